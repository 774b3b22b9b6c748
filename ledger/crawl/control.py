"""Stop, pause and resume a crawl (issue 29 item 4, docs/decisions/172).

* :func:`stop` ends a running or paused crawl gracefully: ``succeeded`` with stop reason
  ``stopped`` (failing stays for what went wrong). Its level's Windmill job is cancelled by the
  caller, as for a failed crawl, so no new capture starts (our capture server drops a capture
  that has not reached the site yet, docs/internals.md "Stop means stop"); captures already at
  the site finish and are admitted: those whose ``done`` event came are recorded now
  (``ledger.crawl.salvage``), a later ``done`` by ``salvage.record_late``. Pages not captured
  are skipped (:data:`STOPPED_BEFORE_CAPTURE`).
* :func:`pause` keeps the frontier. With no level in flight (planned, waiting) the crawl is
  ``paused`` at once; with one in flight it is asked (``pause_requested``) and the level's report
  records it as usual (links, next level) and pauses the crawl instead of dispatching — so no
  link of a captured page is lost and no capture is cut. Leaving ``running`` ends the crawl's
  host leases (the trigger of migration 050, which also starts each leased host's gap at that
  moment when the level was cut).
* :func:`resume` takes a paused crawl back to ``running`` (within the organization's running
  limit) and the caller dispatches its level: the hosts' last captures are kept per host in the
  ledger (``ledger.crawl.hosts``), so the level's plan waits the rest of every gap. Resuming a
  crawl whose pause was only asked withdraws the request.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass, field
from typing import Any

from ledger.crawl import salvage
from ledger.crawl.errors import Refused

log = logging.getLogger(__name__)

STOPPED_BEFORE_CAPTURE = salvage.STOPPED_BEFORE_CAPTURE


@dataclass
class Outcome:
    """What a control request did: ``state`` after it (``pausing``: asked, the level in flight
    ends first), the job to cancel (``""`` none), the level in flight and the task ids to admit;
    ``dispatch``: the crawl row whose level to send now (resume)."""

    state: str
    job: str = ""
    depth: int = 0
    tasks: list[str] = field(default_factory=list)
    dispatch: dict | None = None
    sealed: list[str] = field(default_factory=list)  # sealed captures to await (salvage.await_sealed)


async def _locked(conn: Any, crawl_id: uuid.UUID) -> dict:
    cur = await conn.execute("SELECT * FROM crawls WHERE id = %s FOR UPDATE", (crawl_id,))
    crawl = await cur.fetchone()
    if crawl is None:
        raise Refused(404, "not found")
    return crawl


STOP_REASONS = ("stopped", "time_limit", "size_limit")  # graceful ends: a person, or a limit (ledger.crawl.limits)


async def stop(pool: Any, crawl_id: uuid.UUID, bucket: str | None, reason: str = "stopped") -> Outcome:
    """Stop a running or paused crawl with stop reason ``reason`` (:data:`STOP_REASONS`). Raises
    :class:`Refused` 404 unknown, 409 already finished."""
    if reason not in STOP_REASONS:
        raise ValueError(f"not a graceful stop reason: {reason!r}")
    async with pool.connection() as conn, conn.transaction():
        crawl = await _locked(conn, crawl_id)
        if crawl["state"] not in ("running", "paused"):
            raise Refused(409, f"the crawl is {crawl['state']} already; only a running or paused crawl can be"
                               " stopped", state=crawl["state"])
        cur = await conn.execute(
            "UPDATE crawls SET state = 'succeeded', stop_reason = %s, finished_at = now(),"
            " pause_requested = false, level_state = 'planned' WHERE id = %s RETURNING *", (reason, crawl_id))
        row = await cur.fetchone()
        tasks = await salvage.record_captures(conn, row, bucket)
        sealed = await salvage.record_sealed(conn, row, bucket)
        await conn.execute(
            "UPDATE crawl_pages SET state = 'skipped', skip_reason = %s WHERE crawl_id = %s AND state = 'pending'",
            (STOPPED_BEFORE_CAPTURE, crawl_id))
    in_flight = crawl["state"] == "running" and crawl["level_state"] == "dispatched"
    log.info("Crawl stopped (%s): %s (level %d%s)", reason, crawl_id, row["current_depth"],
             ", in flight" if in_flight else "")
    return Outcome("succeeded", (row["last_job_id"] or "") if in_flight else "", row["current_depth"], tasks, sealed=sealed)


async def pause(pool: Any, crawl_id: uuid.UUID) -> Outcome:
    """Pause a running crawl (``paused`` now, or ``pausing`` until its level's report). Raises
    :class:`Refused` 404 unknown, 409 not running (a paused crawl answers ``paused`` again)."""
    async with pool.connection() as conn, conn.transaction():
        crawl = await _locked(conn, crawl_id)
        if crawl["state"] == "paused":
            return Outcome("paused", depth=crawl["current_depth"])
        if crawl["state"] != "running":
            raise Refused(409, f"the crawl is {crawl['state']}; only a running crawl can be paused",
                          state=crawl["state"])
        if crawl["level_state"] == "dispatched":
            await conn.execute("UPDATE crawls SET pause_requested = true WHERE id = %s", (crawl_id,))
            log.info("Crawl pause asked: %s: after level %d's report", crawl_id, crawl["current_depth"])
            return Outcome("pausing", depth=crawl["current_depth"])
        await conn.execute("UPDATE crawls SET state = 'paused', paused_at = now(), pause_requested = false"
                           " WHERE id = %s", (crawl_id,))
    log.info("Crawl paused: %s at level %d", crawl_id, crawl["current_depth"])
    return Outcome("paused", depth=crawl["current_depth"])


async def resume(pool: Any, crawl_id: uuid.UUID, max_running: int) -> Outcome:
    """Resume a paused crawl (``running``; :attr:`Outcome.dispatch` = the row to dispatch), or
    withdraw a pause still asked. Raises :class:`Refused` 404 unknown, 409 finished, 429 the
    organization runs ``max_running`` crawls already."""
    from ledger.crawl.crawls import _within_org_limit

    async with pool.connection() as conn, conn.transaction():
        crawl = await _locked(conn, crawl_id)
        if crawl["state"] == "running":
            if crawl["pause_requested"]:
                await conn.execute("UPDATE crawls SET pause_requested = false WHERE id = %s", (crawl_id,))
            return Outcome("running", depth=crawl["current_depth"])
        if crawl["state"] != "paused":
            raise Refused(409, f"the crawl is {crawl['state']}; only a paused crawl can be resumed",
                          state=crawl["state"])
        await _within_org_limit(conn, crawl["org_id"], max_running)
        cur = await conn.execute(
            "UPDATE crawls SET state = 'running', paused_at = NULL, level_state = 'planned', level_since = now(),"
            " last_progress_at = now() WHERE id = %s RETURNING *", (crawl_id,))
        row = await cur.fetchone()
    log.info("Crawl resumed: %s at level %d", crawl_id, row["current_depth"])
    return Outcome("running", depth=row["current_depth"], dispatch=dict(row))
