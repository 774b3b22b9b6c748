"""Live progress of the level in flight: capture events from ``crawl_host``, and their summary.

``POST /api/crawls/{id}/progress`` ``{url, phase: started|done, status?: captured|failed}``
(status only with ``done``) records the latest event of one pending page of the crawl's current
level (``crawl_progress``, one row per page; a ``started`` never replaces a ``done``, so a
re-sent or late event changes nothing). The level report stays the record of outcomes; a
captured page's ``done`` may also carry ``taskId``, ``manifestLocation`` and ``manifestSummary``
(kept for a crawl failed before its report: ledger.crawl.salvage), and ``links``: the page's
links, put into the frontier during the level (ledger.crawl.report_early, issue 14).
"""

from __future__ import annotations

import json
import uuid
from typing import Any

from ledger.crawl import report_early
from ledger.crawl.errors import Refused
from ledger.crawl.running import require_running
from ledger.crawl.times import iso_ms

# the level's own pages through the pending-level index (migration 100): the crawl's pending
# rows also hold the next depth's links from progress (90,000 at 100,000 links), not to be scanned
_PAGE = (
    "SELECT p.id, p.depth, g.phase FROM crawl_pages p LEFT JOIN crawl_progress g ON g.page_id = p.id"
    " WHERE p.crawl_id = %(crawl)s AND coalesce(p.level, p.depth) = %(depth)s AND p.depth = %(depth)s"
    " AND p.url = %(url)s AND p.state = 'pending'"
)
_UPSERT = (
    "INSERT INTO crawl_progress (page_id, crawl_id, depth, phase, status, task_id, manifest_location,"
    " manifest_summary, links_sha256, started_at)"  # started_at: set by 'started', kept by 'done' (migration 160)
    " VALUES (%s, %s, %s, %s, %s, %s, %s, %s::jsonb, %s, CASE WHEN %s = 'started' THEN now() END)"
    " ON CONFLICT (page_id) DO UPDATE SET phase = EXCLUDED.phase, status = EXCLUDED.status, at = now(),"
    " task_id = EXCLUDED.task_id, manifest_location = EXCLUDED.manifest_location,"
    " manifest_summary = EXCLUDED.manifest_summary, links_sha256 = EXCLUDED.links_sha256"
    " WHERE crawl_progress.phase = 'started'"
)


async def record(pool: Any, crawl_id: uuid.UUID, url: str, phase: str, status: str | None,
                 capture: dict | None = None, links: list | None = None, settings: Any = None) -> bool:
    """Store one event; returns False when the crawl does not exist (the route answers 404).
    ``capture`` = a captured page's ``{taskId, manifestLocation?, manifestSummary?}``, kept so
    that a crawl failed before its level report still records the page (ledger.crawl.salvage).
    ``links`` = a captured page's links (``[{href, rel?}]``, as its report result carries them):
    on the page's first ``done``, when the page budget is not expected to cut the level
    (``report_early.budget_safe``), they go into the frontier now, under the crawl's row lock,
    and their digest is recorded; otherwise (or on a re-sent ``done``) they are ignored — the
    level report carries them anyway.

    Raises :class:`Refused` (409) when the crawl is not running or ``url`` is not a pending page
    of its current level (already reported, or never in it): the flow logs it and goes on.
    """
    async with pool.connection() as conn, conn.transaction():
        # inserts of a crawl hold its row lock
        crawl = await require_running(conn, crawl_id, "progress is no longer recorded", lock=links is not None)
        if crawl is None:
            return False
        cur = await conn.execute(_PAGE, {"crawl": crawl_id, "depth": crawl["current_depth"], "url": url})
        page = await cur.fetchone()
        if page is None:
            raise Refused(409, "url is not a pending page of the crawl's level in flight"
                               " (already reported, or not in this level)")
        digest = None  # a re-sent done (the page has one already) lands nothing
        if links is not None and page["phase"] != "done" and await report_early.budget_safe(conn, crawl, len(links)):
            await report_early.land(conn, crawl, links, settings)
            digest = report_early.digest(links)
        capture = capture or {}
        summary = capture.get("manifestSummary")
        await conn.execute(_UPSERT, (page["id"], crawl_id, page["depth"], phase, status, capture.get("taskId"),
                                     capture.get("manifestLocation"),
                                     json.dumps(summary) if summary is not None else None, digest, phase))
    return True


async def level_progress(conn: Any, crawl_id: uuid.UUID, depth: int) -> dict:
    """``{depth, planned, done, captured, failed, capturing: [{host, url, since}]}`` of level
    ``depth``: pages planned in it, captures finished, and the captures running now (oldest
    first; one per busy browser)."""
    cur = await conn.execute("SELECT count(*) AS n FROM crawl_pages WHERE crawl_id = %s AND depth = %s",
                             (crawl_id, depth))
    planned = (await cur.fetchone())["n"]
    cur = await conn.execute(
        "SELECT p.host, p.url, g.phase, g.status, g.at FROM crawl_progress g JOIN crawl_pages p ON p.id = g.page_id"
        " WHERE g.crawl_id = %s AND g.depth = %s ORDER BY g.at", (crawl_id, depth))
    rows = await cur.fetchall()
    done = [r for r in rows if r["phase"] == "done"]
    return {
        "depth": depth,
        "planned": planned,
        "done": len(done),
        "captured": sum(r["status"] == "captured" for r in done),
        "failed": sum(r["status"] == "failed" for r in done),
        "capturing": [{"host": r["host"], "url": r["url"], "since": iso_ms(r["at"])}
                      for r in rows if r["phase"] == "started"],
    }
