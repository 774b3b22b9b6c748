"""Limits per crawl (issue 29 item 3, docs/decisions/173): a time limit and a total bytes limit
end the crawl gracefully, as a stop does (``ledger.crawl.control.stop``: no new capture starts,
captures in flight finish and are admitted), with their own stop reasons ``time_limit`` and
``size_limit``. The page limit per host is the plan's (``levels.host_cap``: the smaller of the
crawl's ``max_pages_per_host`` and ``WAGGLE_MAX_PAGES_PER_HOST``; the host's further links are
dropped ``max_pages_per_host``), so it ends the host, not the crawl.

:func:`check_once` is a background loop round (``ledger.loops``, every ``lease_interval_s``):
* time: wall-clock seconds since the crawl started (a pause counts), ``time_limit_s``;
* bytes: the sum of the crawl's admitted archives' WACZ sizes (``archives.wacz_bytes``, read by
  a HEAD once per archive; archives carry the crawl id as correlation id) against ``max_bytes``.
  Admission follows each level report, so the crawl ends within a round of the archive that
  reached the limit; the captures then in flight are admitted too (the total may pass the limit
  by what was in flight, never by a new capture).
"""

from __future__ import annotations

import logging
from typing import Any

from ledger.crawl import control
from ledger.crawl.errors import Refused

log = logging.getLogger(__name__)

SIZES_PER_ROUND = 200  # HEADs per crawl and round (the rest next round)


async def _fill_sizes(services: Any, conn: Any, crawl_id: Any) -> None:
    """``archives.wacz_bytes`` of the crawl's admitted archives that have none yet."""
    if services.s3 is None:
        return
    cur = await conn.execute("SELECT id, bucket, object_key FROM archives WHERE correlation_id = %s"
                             " AND wacz_bytes IS NULL ORDER BY id LIMIT %s", (str(crawl_id), SIZES_PER_ROUND))
    for row in await cur.fetchall():
        size = await services.s3.size(row["object_key"], bucket=row["bucket"])
        if size is not None:
            await conn.execute("UPDATE archives SET wacz_bytes = %s WHERE id = %s", (size, row["id"]))


async def over_limit(services: Any, conn: Any, crawl: dict) -> str | None:
    """``time_limit`` / ``size_limit`` when the crawl has reached that limit, else None."""
    if crawl["time_limit_s"] is not None and crawl["elapsed_s"] >= crawl["time_limit_s"]:
        return "time_limit"
    if crawl["max_bytes"] is not None:
        await _fill_sizes(services, conn, crawl["id"])
        cur = await conn.execute("SELECT coalesce(sum(wacz_bytes), 0) AS n FROM archives WHERE correlation_id = %s",
                                 (str(crawl["id"]),))
        if (await cur.fetchone())["n"] >= crawl["max_bytes"]:
            return "size_limit"
    return None


async def check_once(services: Any) -> int:
    """End every running or paused crawl past its time or bytes limit; returns how many."""
    from ledger.archive.verify import verify_level
    from ledger.crawl.dispatch import dispatch_waiting
    from ledger.crawl.watchdog import cancel_job

    async with services.pool.connection() as conn:
        cur = await conn.execute(
            "SELECT id, time_limit_s, max_bytes, extract(epoch FROM clock_timestamp() - started_at) AS elapsed_s"
            " FROM crawls WHERE state IN ('running', 'paused')"
            " AND (time_limit_s IS NOT NULL OR max_bytes IS NOT NULL) ORDER BY started_at")
        crawls = await cur.fetchall()
        due = [(c["id"], reason) for c in crawls if (reason := await over_limit(services, conn, c))]
    for crawl_id, reason in due:
        try:
            done = await control.stop(services.pool, crawl_id, services.settings.s3_bucket, reason)
        except Refused:  # closed meanwhile
            continue
        log.info("Crawl reached its %s: %s", reason.replace("_", " "), crawl_id)
        if done.job:
            await cancel_job(services.http, services.settings, done.job, f"waggle: the crawl reached its {reason}")
        if done.tasks:
            await verify_level(services, crawl_id, done.depth, set(), done.tasks)
    if due:
        await dispatch_waiting(services)
    return len(due)
