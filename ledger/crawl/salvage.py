"""Captures of a crawl failed before its level report (docs/internals.md "Inputs and outcomes
(round 20)"): what the progress events said was captured is recorded, not skipped.

crawl_host's ``done`` event of a captured page carries its ``taskId``, ``manifestLocation`` and
``manifestSummary`` (``crawl_progress``, migration 140). When a running crawl is failed
(``POST /api/crawls/{id}/failed``: by a person, or by the flow's failure module; or closed by the
watchdog, ``ledger.crawl.watchdog``), each page still
``pending`` whose latest event is such a capture becomes ``captured`` (its task and the crawl as
correlation id; counted into ``pages_captured``) and gets its ``capture_submissions`` row, as a
level report would have given it; its archive is then admitted after the answer by the same
check (``ledger.archive.verify.verify_level``: the manifest must name the task and agree with the
summary, the WACZ is checked), else left to the reconciler. Pages whose event never arrived
(the flow posts events from a queue) stay ``skipped`` as before.
"""

from __future__ import annotations

import logging
from typing import Any

from ledger.crawl.attribution import attribute_tasks

log = logging.getLogger(__name__)


async def record_captures(conn: Any, crawl: dict, bucket: str | None) -> list[str]:
    """In the closing transaction: mark the crawl's pending pages with a captured progress
    event ``captured`` and attribute their tasks; returns the task ids with a manifest key (for
    ``verify_level``). Nothing when no such event exists."""
    cur = await conn.execute(
        "UPDATE crawl_pages p SET state = 'captured', skip_reason = NULL, failure_class = NULL,"
        " task_id = g.task_id::text, correlation_id = %s"
        " FROM crawl_progress g"
        " WHERE g.page_id = p.id AND g.crawl_id = %s AND g.phase = 'done' AND g.status = 'captured'"
        " AND g.task_id IS NOT NULL AND p.state = 'pending'"
        " RETURNING g.task_id, g.manifest_location, g.manifest_summary",
        (str(crawl["id"]), crawl["id"]),
    )
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
    log.info("Crawl failed mid-level: %s: %d captured page(s) recorded from their progress events",
             crawl["id"], len(rows))
    return [str(t) for t in to_admit]
