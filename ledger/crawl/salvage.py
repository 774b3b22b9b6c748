"""Captures of a crawl failed before its level report (docs/internals.md "Inputs and outcomes
(round 20)" and "Faults (round 21)"): what the progress events said was captured is recorded,
not skipped.

crawl_host's ``done`` event of a captured page carries its ``taskId``, ``manifestLocation`` and
``manifestSummary`` (``crawl_progress``, migration 140). Every path that closes a running crawl
as failed — ``POST /api/crawls/{id}/failed`` (a person, or the flow's failure module), the
watchdog (``ledger.crawl.watchdog``), an expired host lease (``ledger.crawl.leases``) and a
dispatch that failed (``ledger.crawl.dispatch``) — calls :func:`record_captures` in its closing
transaction: each page still ``pending`` whose latest event is such a capture becomes
``captured`` (its task and the crawl as correlation id; counted into ``pages_captured``; its
``submitted_at`` / ``finished_at`` = when the ledger received its ``started`` / ``done`` event,
migration 160, so its capture time is shown; the host's ``last_capture_at`` moves to the
``done`` as a level report's ``finishedAt`` would) and gets its ``capture_submissions`` row, as
a level report would have given it; its archive is then
admitted after the answer by the same check (``ledger.archive.verify.verify_level``: the manifest
must name the task and agree with the summary, the WACZ is checked), else left to the
reconciler. A ``done`` that arrives *after* the close (the flow posts events from a queue, and a
cancelled job's last captures finish after it) is recorded the same way by :func:`record_late`.
"""

from __future__ import annotations

import json
import logging
import uuid
from typing import Any

from ledger.crawl import hosts as host_politeness
from ledger.crawl.attribution import attribute_tasks
from ledger.crawl.errors import Refused

log = logging.getLogger(__name__)

CLOSED_BEFORE_CAPTURE = "the crawl was failed before this page was captured"
STOPPED_BEFORE_CAPTURE = "the crawl was stopped before this page was captured"  # ledger.crawl.control
_CLOSED = [CLOSED_BEFORE_CAPTURE, STOPPED_BEFORE_CAPTURE]  # skip reasons a late capture may replace

_CAPTURED = (
    "UPDATE crawl_pages p SET state = 'captured', skip_reason = NULL, failure_class = NULL,"
    " task_id = g.task_id::text, correlation_id = %s, submitted_at = g.started_at, finished_at = g.at"
    " FROM crawl_progress g"
    " WHERE g.page_id = p.id AND g.crawl_id = %s AND g.phase = 'done' AND g.status = 'captured'"
    " AND g.task_id IS NOT NULL"
    " AND (p.state = 'pending' OR (p.state = 'skipped' AND p.skip_reason = ANY(%s)))"
    " AND (%s::bigint IS NULL OR p.id = %s::bigint)"
    " RETURNING p.url, g.at, g.task_id, g.manifest_location, g.manifest_summary"
)


async def record_captures(conn: Any, crawl: dict, bucket: str | None, *, page_id: int | None = None) -> list[str]:
    """In the closing transaction: mark the crawl's pending pages (or pages skipped by the close,
    :data:`CLOSED_BEFORE_CAPTURE`) with a captured progress event ``captured`` and attribute
    their tasks; ``page_id`` limits it to that page. Returns the task ids with a manifest key
    (for ``verify_level``); nothing when no such event exists."""
    cur = await conn.execute(_CAPTURED, (str(crawl["id"]), crawl["id"], _CLOSED, page_id, page_id))
    rows = await cur.fetchall()
    if not rows:
        return []
    await conn.execute("UPDATE crawls SET pages_captured = pages_captured + %s WHERE id = %s",
                       (len(rows), crawl["id"]))
    results = [{"taskId": str(r["task_id"]), "correlationId": str(crawl["id"]),
                **({"manifestLocation": r["manifest_location"]} if r["manifest_location"] else {}),
                **({"manifestSummary": r["manifest_summary"]} if r["manifest_summary"] is not None else {})}
               for r in rows]
    to_admit = await attribute_tasks(conn, crawl, results, bucket)
    # the host's gap runs from these captures too (at the latest as the ledger heard of them)
    await host_politeness.record_captures(conn, crawl, [{"url": r["url"], "finishedAt": r["at"]} for r in rows])
    log.info("Crawl closed mid-level: %s: %d captured page(s) recorded from their progress events",
             crawl["id"], len(rows))
    return [str(t) for t in to_admit]


_LATE_PAGE = (
    "SELECT p.id, p.depth FROM crawl_pages p WHERE p.crawl_id = %s AND p.url = %s"
    " AND coalesce(p.level, p.depth) = %s"
    " AND (p.state = 'pending' OR (p.state = 'skipped' AND p.skip_reason = ANY(%s))) FOR UPDATE"
)
_LATE_EVENT = (
    "INSERT INTO crawl_progress (page_id, crawl_id, depth, phase, status, task_id, manifest_location,"
    " manifest_summary) VALUES (%s, %s, %s, 'done', 'captured', %s, %s, %s::jsonb)"
    " ON CONFLICT (page_id) DO UPDATE SET phase = 'done', status = 'captured', at = now(),"
    " task_id = EXCLUDED.task_id, manifest_location = EXCLUDED.manifest_location,"
    " manifest_summary = EXCLUDED.manifest_summary WHERE crawl_progress.phase = 'started'"
)


async def record_late(pool: Any, crawl_id: uuid.UUID, url: str, capture: dict,
                      bucket: str | None) -> tuple[int, list[str]] | None:
    """A captured page's ``done`` (``capture`` = ``{taskId, manifestLocation?,
    manifestSummary?}``) that reached the ledger after its crawl was closed ``failed``: record
    the page captured as :func:`record_captures` would have, in one transaction under the crawl's
    row lock. Returns ``(level, task ids to admit)``; None when the crawl is not ``failed`` (the
    caller answers as before). Raises :class:`Refused` (409) when ``url`` is no page of the
    level in flight at the close that the close left uncaptured (already recorded, or never in
    it): nothing changes."""
    async with pool.connection() as conn, conn.transaction():
        cur = await conn.execute("SELECT * FROM crawls WHERE id = %s FOR UPDATE", (crawl_id,))
        crawl = await cur.fetchone()
        # failed, or stopped (ledger.crawl.control): the job was cut, its last captures finish after it
        if crawl is None or not (crawl["state"] == "failed" or crawl["stop_reason"] in ("stopped", "time_limit", "size_limit")):
            return None
        cur = await conn.execute(_LATE_PAGE, (crawl_id, url, crawl["current_depth"], _CLOSED))
        page = await cur.fetchone()
        if page is None:
            raise Refused(409, "the crawl is failed and url is not one of its pages left uncaptured at the close"
                               " (already recorded, or not in the level in flight): nothing recorded")
        summary = capture.get("manifestSummary")
        await conn.execute(_LATE_EVENT, (page["id"], crawl_id, page["depth"], capture["taskId"],
                                         capture.get("manifestLocation"),
                                         json.dumps(summary) if summary is not None else None))
        tasks = await record_captures(conn, crawl, bucket, page_id=page["id"])
    log.info("Late capture of a failed crawl recorded: %s %s", crawl_id, url)
    return crawl["current_depth"], tasks
