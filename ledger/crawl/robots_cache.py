"""robots.txt read once per crawl per host (docs/internals.md "robots.txt cache").

The level report may carry ``robots: [{host, fetchedAt, state, body}]`` — the outcomes
``plan_level`` fetched for that level (``f/waggle/robots_cache.py`` writes them). This module
checks their sizes (:func:`check_sizes`, 413, before anything is recorded), keeps the latest
per ``(crawl, host)`` in ``crawl_robots`` (:func:`record`, in the report's transaction; an entry
for a host the level did not plan is ignored and logged), and gives the next level's dispatch
the young ones (:func:`cached`), which the flow then uses instead of fetching.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import datetime, timedelta, timezone
from typing import Any

from ledger.crawl.errors import Refused
from ledger.crawl.times import iso_ms

log = logging.getLogger(__name__)

BODY_MAX_CHARS = 512 * 1024  # one entry's body (the flow parses at most 512 KiB; CHECK in migration 120)
TOTAL_MAX_CHARS = 8 * 1024 * 1024  # every body of one report (f/waggle/robots_cache.py stays under it)
FUTURE_SLACK = timedelta(minutes=5)  # clocks of flow workers and ledger may differ this much
STATES = ("allowed", "unavailable", "unreachable")


def check_sizes(entries: Sequence[Any] | None, settings: Any) -> None:
    """Raise :class:`Refused` 413 when the report's ``robots`` has more entries than
    ``WAGGLE_REPORT_RESULTS_MAX`` (a level plans no more hosts than it reports results), an
    entry's body above ``BODY_MAX_CHARS`` or all bodies above ``TOTAL_MAX_CHARS``."""
    if not entries:
        return
    if len(entries) > settings.report_results_max:
        raise Refused(413, f"robots has {len(entries)} entries; at most {settings.report_results_max}"
                           " (WAGGLE_REPORT_RESULTS_MAX, one per host of the level)")
    total = 0
    for index, entry in enumerate(entries):
        size = len(entry.body or "")
        if size > BODY_MAX_CHARS:
            raise Refused(413, f"robots.{index}.body has {size} characters; at most {BODY_MAX_CHARS}"
                               " (the groups of a robots.txt that apply to waggle, parsed from at most 512 KiB)")
        total += size
    if total > TOTAL_MAX_CHARS:
        raise Refused(413, f"robots bodies have {total} characters in all; at most {TOTAL_MAX_CHARS} in one report")


def check_entries(entries: Sequence[dict]) -> None:
    """Shape rules the types cannot say → ValueError (400): one entry per host; a body exactly
    when ``state`` is ``allowed``; ``fetchedAt`` not in the future (beyond ``FUTURE_SLACK``:
    a copy dated ahead would never expire)."""
    seen: set[str] = set()
    latest = datetime.now(timezone.utc) + FUTURE_SLACK
    for index, entry in enumerate(entries):
        if entry["host"] in seen:
            raise ValueError(f"robots.{index}: host {entry['host']!r} appears twice; send one entry per host")
        seen.add(entry["host"])
        if (entry["state"] == "allowed") != (entry.get("body") is not None):
            raise ValueError(f"robots.{index}: body is required when state is allowed and must be null otherwise")
        if entry["fetchedAt"] > latest:
            raise ValueError(f"robots.{index}.fetchedAt lies in the future; it is when robots.txt was fetched")


_LEVEL_HOSTS = "SELECT DISTINCT host FROM crawl_pages WHERE crawl_id = %s AND coalesce(level, depth) = %s"

_UPSERT = """
INSERT INTO crawl_robots AS r (crawl_id, host, fetched_at, state, body, depth)
SELECT %s, v.host, least(v.fetched_at, now()), v.state, v.body, %s
FROM unnest(%s::text[], %s::timestamptz[], %s::text[], %s::text[]) AS v(host, fetched_at, state, body)
ON CONFLICT (crawl_id, host) DO UPDATE SET fetched_at = EXCLUDED.fetched_at, state = EXCLUDED.state,
    body = EXCLUDED.body, depth = EXCLUDED.depth, recorded_at = now()
WHERE r.fetched_at <= EXCLUDED.fetched_at
"""


async def record(conn: Any, crawl_id: Any, depth: int, entries: list[dict] | None) -> int:
    """Store the report's entries (camelCase dicts as validated) for the hosts of level
    ``depth``; a later ``fetchedAt`` replaces an earlier one, never the reverse (a fetchedAt
    ahead of the ledger's clock within the slack is stored as now). Entries for other hosts are
    ignored and logged. Returns how many were stored."""
    if not entries:
        return 0
    cur = await conn.execute(_LEVEL_HOSTS, (crawl_id, depth))
    planned = {r["host"] for r in await cur.fetchall()}
    kept = [e for e in entries if e["host"] in planned]
    if len(kept) < len(entries):
        strangers = sorted(e["host"] for e in entries if e["host"] not in planned)
        log.warning("Level report robots: %d entr(ies) for hosts level %d of crawl %s did not plan, ignored: %s",
                    len(strangers), depth, crawl_id, ", ".join(strangers[:10]))
    if kept:
        await conn.execute(_UPSERT, (crawl_id, depth, [e["host"] for e in kept],
                                     [e["fetchedAt"] for e in kept], [e["state"] for e in kept],
                                     [e.get("body") for e in kept]))
    return len(kept)


_CACHED = """
SELECT host, fetched_at, state, body, fetched_at <= now() - make_interval(secs => %s) AS stale FROM crawl_robots
WHERE crawl_id = %s AND host = ANY(%s) AND state <> 'unreachable'
  AND (fetched_at > now() - make_interval(secs => %s) OR (state = 'allowed' AND body LIKE '%%crawl-delay:%%'))
ORDER BY host
"""


async def cached(pool: Any, crawl_id: Any, hosts: list[str], ttl_s: float) -> list[dict]:
    """``[{host, fetchedAt, state, body, stale?}]`` for the level's hosts: each outcome younger
    than ``ttl_s`` (``WAGGLE_ROBOTS_CACHE_TTL_S``; 0 → none), which the flow uses instead of a
    fetch; and, marked ``stale: true``, an older one whose rules hold a Crawl-delay (the body's
    normal form writes ``crawl-delay:``): not used for rules, only so the fetch that replaces it
    waits that Crawl-delay since the host's last capture. ``unreachable`` is never sent (it is
    transient: the flow fetches again)."""
    if not hosts:
        return []
    async with pool.connection() as conn:
        cur = await conn.execute(_CACHED, (ttl_s, crawl_id, sorted(set(hosts)), ttl_s))
        rows = await cur.fetchall()
    out = []
    for r in rows:
        entry = {"host": r["host"], "fetchedAt": iso_ms(r["fetched_at"]), "state": r["state"], "body": r["body"]}
        if r["stale"]:
            entry["stale"] = True
        out.append(entry)
    return out
