"""Live progress of the level in flight: capture events from ``crawl_host``, and their summary.

``POST /api/crawls/{id}/progress`` ``{url, phase: queued|started|done, status?: captured|failed}``
(status only with ``done``) records the latest event of one pending page of the crawl's current
level (``crawl_progress``, one row per page; phases only move forward, queued → started → done,
so a re-sent or late event changes nothing; ``queued``: a capture submitted held behind the
host's loading page, decision 401). The level report stays the record of outcomes; a
captured page's ``done`` may also carry ``taskId``, ``manifestLocation`` and ``manifestSummary``
(kept for a crawl failed before its report: ledger.crawl.salvage), and ``links``: the page's
links, put into the frontier during the level (ledger.crawl.report_early, issue 14). Several
events of one crawl may come in one request (``{events: [...]}``, :func:`record_many`).
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
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
    " manifest_summary, links_sha256, links_scoped, started_at)"  # started_at: set by the first 'queued'/'started', kept after (160)
    " VALUES (%s, %s, %s, %s, %s, %s, %s, %s::jsonb, %s, %s, CASE WHEN %s <> 'done' THEN now() END)"
    " ON CONFLICT (page_id) DO UPDATE SET phase = EXCLUDED.phase, status = EXCLUDED.status, at = now(),"
    " task_id = EXCLUDED.task_id, manifest_location = EXCLUDED.manifest_location,"
    " manifest_summary = EXCLUDED.manifest_summary, links_sha256 = EXCLUDED.links_sha256,"
    " links_scoped = EXCLUDED.links_scoped"
    # queued → started → done, never back (a re-sent or late event changes nothing; decision 401)
    " WHERE crawl_progress.phase = 'queued' AND EXCLUDED.phase <> 'queued'"
    " OR crawl_progress.phase = 'started' AND EXCLUDED.phase = 'done'"
)

# a sealed capture was released: a queued row whose 'started' was lost is started now
_SEALED = ("UPDATE crawl_progress SET task_id = %s, manifest_location = %s, phase = 'started'"
           " WHERE page_id = %s AND phase IN ('queued', 'started')")


@dataclass
class Event:
    """One progress event as validated: page ``url``, ``phase``, ``status`` (with ``done``),
    ``capture`` (a captured page's ``{taskId, manifestLocation?, manifestSummary?}``) and
    ``links`` (a captured page's links, ``[{href, rel?}]``)."""

    url: str
    phase: str
    status: str | None = None
    capture: dict | None = None
    links: list | None = None


async def record(pool: Any, crawl_id: uuid.UUID, url: str, phase: str, status: str | None,
                 capture: dict | None = None, links: list | None = None, settings: Any = None) -> bool:
    """:func:`record_many` for one event: False when the crawl does not exist (the route
    answers 404); raises the event's :class:`Refused`."""
    outcomes = await record_many(pool, crawl_id, [Event(url, phase, status, capture, links)], settings)
    if outcomes is None:
        return False
    if outcomes[0] is not None:
        raise outcomes[0]
    return True


async def record_many(pool: Any, crawl_id: uuid.UUID, events: list[Event], settings: Any = None) -> list[Refused | None] | None:
    """Store ``events`` in order, in one transaction (a host's queued events come in one request:
    f/waggle/progress.py); returns one outcome per event — None when recorded, else its
    :class:`Refused` (409: not a pending page of the level in flight, already reported or never
    in it; the flow logs it and goes on) — or None when the crawl does not exist (404).
    A crawl that is not running refuses every event (409).

    ``capture`` is kept so that a crawl failed before its level report still records the page
    (ledger.crawl.salvage). ``links``: on the page's *first* ``done``, when the page budget is
    not expected to cut the level (``report_early.budget_safe``), they go into the frontier now,
    under the crawl's row lock, and their digest and scope verdicts are recorded; otherwise (or
    on a re-sent ``done``) they are ignored — the level report carries them anyway.
    """
    async with pool.connection() as conn, conn.transaction():
        # inserts of a crawl hold its row lock
        try:
            crawl = await require_running(conn, crawl_id, "progress is no longer recorded",
                                          lock=any(e.links is not None for e in events))
        except Refused as refused:
            return [refused for _ in events]
        if crawl is None:
            return None
        outcomes: list[Refused | None] = []
        for event in events:
            outcomes.append(await _record_one(conn, crawl, event, settings))
    return outcomes


async def _record_one(conn: Any, crawl: dict, event: Event, settings: Any) -> Refused | None:
    cur = await conn.execute(_PAGE, {"crawl": crawl["id"], "depth": crawl["current_depth"], "url": event.url})
    page = await cur.fetchone()
    if page is None:  # checked before any write: a refused event changes nothing
        return Refused(409, "url is not a pending page of the crawl's level in flight"
                            " (already reported, or not in this level)")
    links = event.links
    digest = scoped = None  # a re-sent done (the page has one already) lands nothing
    if links is not None and page["phase"] != "done" and await report_early.budget_safe(conn, crawl, len(links)):
        landed = await report_early.land(conn, crawl, links, settings)
        digest = report_early.digest(links)
        scoped = landed.encode() if landed is not None else None
    capture = event.capture or {}
    if event.phase == "sealed":  # the page stays started; its task is known (salvage.record_sealed)
        await conn.execute(_SEALED, (capture.get("taskId"), capture.get("manifestLocation"), page["id"]))
        return None
    summary = capture.get("manifestSummary")
    await conn.execute(_UPSERT, (page["id"], crawl["id"], page["depth"], event.phase, event.status,
                                 capture.get("taskId"), capture.get("manifestLocation"),
                                 json.dumps(summary) if summary is not None else None, digest, scoped, event.phase))
    return None


async def level_progress(conn: Any, crawl_id: uuid.UUID, depth: int) -> dict:
    """``{depth, planned, done, captured, failed, capturing, finishing, queued}`` of level
    ``depth``: pages planned in it, captures finished, and three lists of ``{host, url, since}``
    (oldest first): ``capturing`` — loading in a browser, the site may be receiving its requests;
    ``finishing`` — sealed (no request to the site any more), the capture server still writes its
    archive; ``queued`` — submitted held behind the host's loading page, nothing sent to the site
    yet (decision 401). One host has at most one page capturing at a time."""
    cur = await conn.execute("SELECT count(*) AS n FROM crawl_pages WHERE crawl_id = %s AND depth = %s",
                             (crawl_id, depth))
    planned = (await cur.fetchone())["n"]
    cur = await conn.execute(
        "SELECT p.host, p.url, g.phase, g.status, g.at, g.task_id IS NOT NULL AS sealed"
        " FROM crawl_progress g JOIN crawl_pages p ON p.id = g.page_id"
        " WHERE g.crawl_id = %s AND g.depth = %s ORDER BY g.at", (crawl_id, depth))
    rows = await cur.fetchall()
    done = [r for r in rows if r["phase"] == "done"]

    def listed(keep: Any) -> list[dict]:
        return [{"host": r["host"], "url": r["url"], "since": iso_ms(r["at"])} for r in rows if keep(r)]

    return {
        "depth": depth,
        "planned": planned,
        "done": len(done),
        "captured": sum(r["status"] == "captured" for r in done),
        "failed": sum(r["status"] == "failed" for r in done),
        "capturing": listed(lambda r: r["phase"] == "started" and not r["sealed"]),
        "finishing": listed(lambda r: r["phase"] == "started" and r["sealed"]),
        "queued": listed(lambda r: r["phase"] == "queued"),
    }
