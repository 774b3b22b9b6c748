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

import asyncio
import json
import logging
import time
import uuid
from typing import Any

from ledger.crawl import hosts as host_politeness
from ledger.crawl.attribution import attribute_tasks
from ledger.crawl.errors import Refused

log = logging.getLogger(__name__)

CLOSED_BEFORE_CAPTURE = "the crawl was failed before this page was captured"
STOPPED_BEFORE_CAPTURE = "the crawl was stopped before this page was captured"  # ledger.crawl.control
CLOSED_REASONS = [CLOSED_BEFORE_CAPTURE, STOPPED_BEFORE_CAPTURE]  # pages a close skipped: a late capture may replace them


def takes_late_captures(crawl: dict | None) -> bool:
    """Failed, or ended by a stop or a limit (ledger.crawl.control): the level's job was cut and
    its last captures finish after the close, so their events are still recorded."""
    return crawl is not None and (crawl["state"] == "failed"
                                  or crawl["stop_reason"] in ("stopped", "time_limit", "size_limit"))
#: How long after a close the ledger looks for the archives of captures that had sealed but not
#: answered (the capture server's whole-task budget, 130 s, plus its manifest write, 10 s, plus
#: a margin); after it, the reconciler still admits them (:func:`promote_admitted`).
SEALED_WAIT_S = 150.0
SEALED_POLL_S = 1.0

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
    cur = await conn.execute(_CAPTURED, (str(crawl["id"]), crawl["id"], CLOSED_REASONS, page_id, page_id))
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
    " manifest_summary = EXCLUDED.manifest_summary WHERE crawl_progress.phase IN ('queued', 'started')"
)


async def _late_page(conn: Any, crawl_id: uuid.UUID, url: str) -> tuple[dict, dict] | None:
    """Under the crawl's row lock: ``(crawl, page)`` for a late event of ``url``, None when the
    crawl takes none (:func:`takes_late_captures`). Raises :class:`Refused` (409) when ``url``
    is no page of the level in flight that the close left uncaptured."""
    cur = await conn.execute("SELECT * FROM crawls WHERE id = %s FOR UPDATE", (crawl_id,))
    crawl = await cur.fetchone()
    if not takes_late_captures(crawl):
        return None
    cur = await conn.execute(_LATE_PAGE, (crawl_id, url, crawl["current_depth"], CLOSED_REASONS))
    page = await cur.fetchone()
    if page is None:
        raise Refused(409, "the crawl is closed and url is not one of its pages left uncaptured at the close"
                           " (already recorded, or not in the level in flight): nothing recorded")
    return crawl, page


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
        found = await _late_page(conn, crawl_id, url)
        if found is None:
            return None
        crawl, page = found
        summary = capture.get("manifestSummary")
        await conn.execute(_LATE_EVENT, (page["id"], crawl_id, page["depth"], capture["taskId"],
                                         capture.get("manifestLocation"),
                                         json.dumps(summary) if summary is not None else None))
        tasks = await record_captures(conn, crawl, bucket, page_id=page["id"])
    log.info("Late capture of a failed crawl recorded: %s %s", crawl_id, url)
    return crawl["current_depth"], tasks


# -- captures that had sealed when the crawl was closed (issue 24 item 5) ---------------------
#
# A failed crawl's Windmill job is cancelled, which ends crawl_host: a capture already past its
# hold still finishes on the capture server (packaging, upload, manifest), but its answer — and
# so its ``done`` event — reaches nobody. Its ``sealed`` event (docs/capture-server.md extension
# "robots": the seal answer names the task and where its manifest will be written) did reach the
# ledger: the close gives such a page its task id and a ``capture_submissions`` row, leaves it
# skipped (:data:`CLOSED_BEFORE_CAPTURE`) and, after the answer, :func:`await_sealed` admits each
# archive as its manifest appears and marks the page ``captured``; the reconciler does the same
# for any that come later (:func:`promote_admitted`).

_SEALED = (
    "UPDATE crawl_pages p SET task_id = g.task_id::text, correlation_id = %s"
    " FROM crawl_progress g"
    " WHERE g.page_id = p.id AND g.crawl_id = %s AND g.phase = 'started' AND g.task_id IS NOT NULL"
    " AND (p.state = 'pending' OR (p.state = 'skipped' AND p.skip_reason = ANY(%s))) AND p.task_id IS NULL"
    " AND (%s::bigint IS NULL OR p.id = %s::bigint)"
    " RETURNING g.task_id, g.manifest_location"
)


async def record_sealed(conn: Any, crawl: dict, bucket: str | None, *, page_id: int | None = None) -> list[str]:
    """In the closing transaction (after :func:`record_captures`): pages still uncaptured whose
    capture had sealed (a ``sealed`` progress event gave its task id and manifest location) get
    that task id and a ``capture_submissions`` row; they stay uncaptured until their archive is
    admitted. Returns the task ids with a manifest key (for :func:`await_sealed`)."""
    cur = await conn.execute(_SEALED, (str(crawl["id"]), crawl["id"], CLOSED_REASONS, page_id, page_id))
    rows = await cur.fetchall()
    if not rows:
        return []
    results = [{"taskId": str(r["task_id"]), "correlationId": str(crawl["id"]),
                **({"manifestLocation": r["manifest_location"]} if r["manifest_location"] else {})} for r in rows]
    tasks = await attribute_tasks(conn, crawl, results, bucket)
    log.info("Crawl closed mid-level: %s: %d sealed capture(s) awaited", crawl["id"], len(rows))
    return [str(t) for t in tasks]


async def record_sealed_late(pool: Any, crawl_id: uuid.UUID, url: str, capture: dict,
                             bucket: str | None) -> tuple[int, list[str]] | None:
    """A ``sealed`` event (``capture`` = ``{taskId, manifestLocation?}``) that reached the
    ledger after the crawl was closed ``failed``: as :func:`record_sealed` for that page. Returns
    ``(level, task ids)``; None when the crawl is not ``failed``. Raises :class:`Refused` (409)
    when ``url`` is no page of the level in flight left uncaptured by the close."""
    async with pool.connection() as conn, conn.transaction():
        found = await _late_page(conn, crawl_id, url)
        if found is None:
            return None
        crawl, page = found
        await conn.execute(
            "INSERT INTO crawl_progress (page_id, crawl_id, depth, phase, task_id, manifest_location, started_at)"
            " VALUES (%s, %s, %s, 'started', %s, %s, now())"
            " ON CONFLICT (page_id) DO UPDATE SET task_id = EXCLUDED.task_id, phase = 'started',"
            " manifest_location = EXCLUDED.manifest_location WHERE crawl_progress.phase IN ('queued', 'started')",
            (page["id"], crawl_id, page["depth"], capture["taskId"], capture.get("manifestLocation")))
        tasks = await record_sealed(conn, crawl, bucket, page_id=page["id"])
    return crawl["current_depth"], tasks


async def await_sealed(services: Any, crawl_id: Any, depth: int, task_ids: list[str], *,
                       wait_s: float | None = None, every_s: float | None = None) -> int:
    """After a close's answer: admit the archives of ``task_ids`` (sealed captures of level
    ``depth``) as their manifests appear, each page becoming ``captured`` (``verify_level``'s
    recovery), for at most ``wait_s`` seconds. Returns how many were admitted. Never raises."""
    from ledger.archive.verify import verify_level  # verify imports the crawl package

    wait_s = SEALED_WAIT_S if wait_s is None else wait_s
    every_s = SEALED_POLL_S if every_s is None else every_s
    left, admitted = list(task_ids), 0
    deadline = time.monotonic() + wait_s
    while left:
        out = await verify_level(services, crawl_id, depth, set(left), left)
        admitted += out.registered
        if out.missing == 0 and out.errors == 0:  # every manifest read: admitted, or no archive to admit
            return admitted
        try:
            async with services.pool.connection() as conn:
                cur = await conn.execute(
                    "SELECT s.task_id::text AS t FROM capture_submissions s LEFT JOIN archives a ON a.task_id = s.task_id"
                    " WHERE s.task_id = ANY(%s::uuid[]) AND a.task_id IS NULL AND s.verify_error IS NULL", (left,))
                left = [r["t"] for r in await cur.fetchall()]
        except Exception:  # noqa: BLE001 - the reconciler takes over
            log.exception("could not read which sealed captures are still awaited: %s", crawl_id)
            return admitted
        if not left or time.monotonic() + every_s > deadline:
            break
        await asyncio.sleep(every_s)
    if left:
        log.warning("Sealed captures of failed crawl %s not admitted within %.0f s: %d (the reconciler keeps trying)",
                    crawl_id, wait_s, len(left))
    return admitted


async def promote_admitted(conn: Any, task_ids: list[str]) -> int:
    """Pages a close left uncaptured (:data:`CLOSED_BEFORE_CAPTURE`) whose task's archive has
    now been admitted (by the reconciler) become ``captured``, counted into their crawls'
    ``pages_captured``. Returns how many."""
    if not task_ids:
        return 0
    cur = await conn.execute(
        "UPDATE crawl_pages SET state = 'captured', skip_reason = NULL, failure_class = NULL"
        " WHERE task_id = ANY(%s::text[]) AND state = 'skipped' AND skip_reason = ANY(%s) RETURNING crawl_id",
        (task_ids, CLOSED_REASONS))
    rows = await cur.fetchall()
    per_crawl: dict[Any, int] = {}
    for r in rows:
        per_crawl[r["crawl_id"]] = per_crawl.get(r["crawl_id"], 0) + 1
    for crawl_id, n in per_crawl.items():
        await conn.execute("UPDATE crawls SET pages_captured = pages_captured + %s WHERE id = %s", (n, crawl_id))
    return len(rows)
