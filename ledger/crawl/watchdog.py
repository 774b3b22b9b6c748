"""Stuck-crawl watchdog: a running crawl that can no longer finish is closed as failed.

ARCHITECTURE.md decision 5; issue #7. A stuck crawl holds its hosts' leases and a place in
its organization's running-crawl limit (issue 12) — the watchdog makes that impossible. Every
``WAGGLE_WATCHDOG_INTERVAL_S`` it looks at every running crawl and closes it as ``failed``
(with an ``error`` that says what happened and what to do; closing ends its host leases,
trigger of migration 050) when:

1. the Windmill job of the level in flight (``last_job_depth == current_depth``) has ended —
   cancelled, failed, or succeeded without the ledger having that level's report — according to
   Windmill's ``GET /api/w/{ws}/jobs_u/get/{id}`` (docs/internals.md, windmill.md §4) or
   Windmill answers 404 for it;
2. or nothing happened (no report, no dispatch: ``last_progress_at``) for
   ``WAGGLE_CRAWL_STALL_S`` seconds; its Windmill job, if still queued or running, is cancelled
   (``POST /api/w/{ws}/jobs_u/queue/cancel/{id}``) so it stops capturing. A crawl whose level
   *waits* for another crawl's host lease (``level_state = 'waiting'``) is exempt: it cannot
   progress until that crawl's level ends, and that crawl is watched itself.

Windmill's address and workspace come from ``WAGGLE_CRAWL_WEBHOOK_URL``
(``{base}/api/w/{ws}/jobs/run/f/...``), its token from ``WAGGLE_CRAWL_WEBHOOK_TOKEN``. When
Windmill does not answer only the stall rule applies. Every close is conditional on the crawl
still being running at the same level with the same job, so a report that lands meanwhile wins.
A closed crawl's pages whose capture a progress event reported are recorded captured and their
archives admitted, as when a crawl is failed on request (``ledger.crawl.salvage``).
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import httpx

from ledger.archive.verify import verify_level
from ledger.crawl import salvage

log = logging.getLogger("waggle.watchdog")

REASON_MAX = 2000


@dataclass(frozen=True)
class JobState:
    """What Windmill says about a job. ``ended`` False = queued or running.
    ``outcome``: ``running`` | ``success`` | ``failure`` | ``canceled`` | ``unknown`` (404)."""

    outcome: str
    detail: str = ""

    @property
    def ended(self) -> bool:
        return self.outcome != "running"


class WindmillUnavailable(RuntimeError):
    """Windmill did not answer the job query (connection error, timeout, 5xx, bad body)."""


def windmill_base(webhook_url: str | None) -> tuple[str, str] | None:
    """``(base_url, workspace)`` from ``…/api/w/{ws}/jobs/run/f/…``; None when not of that form."""
    if not webhook_url or "/api/w/" not in webhook_url:
        return None
    base, _, rest = webhook_url.partition("/api/w/")
    workspace = rest.split("/", 1)[0]
    return (base.rstrip("/"), workspace) if base and workspace else None


def _error_message(result: Any) -> str:
    if isinstance(result, dict):
        err = result.get("error")
        if isinstance(err, dict):
            name, message = err.get("name"), err.get("message")
            return ": ".join(str(x) for x in (name, message) if x)[:500]
        if isinstance(err, str):
            return err[:500]
    return ""


def job_state_from(body: Any) -> JobState:
    """Interpret a ``jobs_u/get`` body (``{"type": "QueuedJob"|"CompletedJob", "running",
    "success", "canceled", "canceled_by", "canceled_reason", "result"}``).

    Raises :class:`WindmillUnavailable` for a body that is not such an object.
    """
    if not isinstance(body, dict) or body.get("type") not in ("QueuedJob", "CompletedJob"):
        raise WindmillUnavailable(f"unexpected job body: {str(body)[:200]}")
    if body["type"] == "QueuedJob":
        return JobState("running")
    if body.get("canceled"):
        by = body.get("canceled_by")
        why = body.get("canceled_reason")
        detail = ", ".join(x for x in (f"by {by}" if by else "", str(why) if why else "") if x)
        return JobState("canceled", detail)
    if body.get("success"):
        return JobState("success")
    return JobState("failure", _error_message(body.get("result")))


async def job_state(http: httpx.AsyncClient, settings: Any, job_id: str, *, timeout_s: float = 10.0) -> JobState:
    """Ask Windmill about ``job_id``. Raises :class:`WindmillUnavailable` when it cannot say."""
    where = windmill_base(settings.crawl_webhook_url)
    if where is None:
        raise WindmillUnavailable("WAGGLE_CRAWL_WEBHOOK_URL is not a Windmill job URL")
    base, ws = where
    url = f"{base}/api/w/{ws}/jobs_u/get/{job_id}"
    headers = {"authorization": f"Bearer {settings.crawl_webhook_token}"} if settings.crawl_webhook_token else {}
    try:
        resp = await http.get(url, headers=headers, timeout=timeout_s)
    except httpx.HTTPError as exc:
        raise WindmillUnavailable(f"{url}: {type(exc).__name__} {exc}") from None
    if resp.status_code == 404:
        return JobState("unknown", resp.text[:200])
    if resp.status_code != 200:
        raise WindmillUnavailable(f"{url} → {resp.status_code} {resp.text[:200]}")
    try:
        return job_state_from(resp.json())
    except ValueError as exc:
        raise WindmillUnavailable(f"{url}: {exc}") from None


async def cancel_job(http: httpx.AsyncClient, settings: Any, job_id: str, reason: str) -> bool:
    """Best-effort ``POST …/jobs_u/queue/cancel/{id}`` with ``{"reason"}``; True on 2xx."""
    where = windmill_base(settings.crawl_webhook_url)
    if where is None:
        return False
    base, ws = where
    headers = {"authorization": f"Bearer {settings.crawl_webhook_token}"} if settings.crawl_webhook_token else {}
    try:
        resp = await http.post(f"{base}/api/w/{ws}/jobs_u/queue/cancel/{job_id}", json={"reason": reason[:500]},
                               headers=headers, timeout=10.0)
    except httpx.HTTPError as exc:
        log.warning("watchdog: could not cancel Windmill job %s: %s", job_id, exc)
        return False
    return 200 <= resp.status_code < 300


def ended_reason(job_id: str, depth: int, state: JobState) -> str:
    """The crawl's ``error`` when its level's Windmill job ended without a report."""
    head = f"watchdog: the Windmill job {job_id} of level {depth}"
    if state.outcome == "canceled":
        what = f"{head} was cancelled{f' ({state.detail})' if state.detail else ''} before it reported the level"
        todo = "nothing more will arrive for this crawl; start a new crawl to continue"
    elif state.outcome == "failure":
        what = f"{head} failed{f' ({state.detail})' if state.detail else ''} and its failure step did not close the crawl"
        todo = "read the job's logs in Windmill, fix the cause, then start a new crawl"
    elif state.outcome == "success":
        what = f"{head} finished without the ledger receiving its level report"
        todo = ("check that the flow's report_level step reaches this ledger (Windmill variable of the"
                " ledger URL and token), then start a new crawl")
    else:
        what = f"{head} is unknown to Windmill{f' ({state.detail})' if state.detail else ''}"
        todo = ("check that WAGGLE_CRAWL_WEBHOOK_URL points at the Windmill instance that runs the flow,"
                " then start a new crawl")
    return f"{what}; {todo}."[:REASON_MAX]


def stall_reason(stall_s: float, idle_s: float, depth: int, job_id: str | None, cancelled: bool) -> str:
    """The crawl's ``error`` when it made no progress for ``stall_s`` seconds."""
    job = f"Windmill job {job_id}" if job_id else "no Windmill job recorded"
    cancel = "; the job was cancelled" if cancelled else ""
    return (
        f"watchdog: no progress for {idle_s:.0f} s (limit WAGGLE_CRAWL_STALL_S={stall_s:g} s) at level {depth},"
        f" {job}{cancel}; check the capture servers and Windmill workers (or raise WAGGLE_CRAWL_STALL_S for"
        " slow sites), then start a new crawl."
    )[:REASON_MAX]


_CLOSE = (
    "UPDATE crawls SET state = 'failed', stop_reason = COALESCE(stop_reason, 'failed'), finished_at = now(),"
    " error = %s WHERE id = %s AND state = 'running' AND current_depth = %s"
    " AND last_job_id IS NOT DISTINCT FROM %s AND last_progress_at = %s RETURNING *"
)


async def _close(services: Any, crawl: dict, reason: str) -> bool:
    tasks: list[str] = []
    async with services.pool.connection() as conn, conn.transaction():
        cur = await conn.execute(
            _CLOSE, (reason, crawl["id"], crawl["current_depth"], crawl["last_job_id"], crawl["last_progress_at"])
        )
        row = await cur.fetchone()
        if row is not None:
            tasks = await salvage.record_captures(conn, row, services.settings.s3_bucket)
    if row is not None:
        log.warning("watchdog closed crawl %s: %s", crawl["id"], reason)
    if tasks:
        await verify_level(services, crawl["id"], crawl["current_depth"], set(), tasks)
    return row is not None


async def _has_report(pool: Any, crawl_id: uuid.UUID, depth: int) -> bool:
    async with pool.connection() as conn:
        cur = await conn.execute(
            "SELECT 1 FROM crawl_level_reports WHERE crawl_id = %s AND depth = %s", (crawl_id, depth)
        )
        return await cur.fetchone() is not None


async def check_once(services: Any, *, now: datetime | None = None) -> list[tuple[str, str]]:
    """Look at every running crawl once; returns ``[(crawl_id, reason)]`` of the crawls closed.

    Never raises for Windmill trouble (logged; stall rule still applies); database errors
    propagate to the caller (:func:`run_periodically` logs them).
    """
    settings, pool = services.settings, services.pool
    async with pool.connection() as conn:
        cur = await conn.execute(
            "SELECT id, current_depth, last_job_id, last_job_depth, last_progress_at, level_state, now() AS db_now"
            " FROM crawls WHERE state = 'running'"
        )
        running = [dict(r) for r in await cur.fetchall()]
    closed: list[tuple[str, str]] = []
    for crawl in running:
        depth, job_id = crawl["current_depth"], crawl["last_job_id"]
        state: JobState | None = None
        if job_id and crawl["last_job_depth"] == depth and windmill_base(settings.crawl_webhook_url):
            try:
                state = await job_state(services.http, settings, job_id)
            except WindmillUnavailable as exc:
                log.warning("watchdog: Windmill cannot say how job %s of crawl %s is doing: %s", job_id, crawl["id"], exc)
        if state is not None and state.ended:
            if state.outcome == "success" and await _has_report(pool, crawl["id"], depth):
                state = None  # reported; the next level's dispatch is being recorded
            else:
                reason = ended_reason(job_id, depth, state)
                if await _close(services, crawl, reason):
                    closed.append((str(crawl["id"]), reason))
                continue
        if crawl["level_state"] == "waiting":
            continue  # waits for another crawl's host lease; that crawl is the one watched
        current = now or crawl["db_now"]
        idle_s = (current - crawl["last_progress_at"]).total_seconds()
        if idle_s >= settings.crawl_stall_s:
            cancelled = False
            if job_id and (state is None or not state.ended):
                cancelled = await cancel_job(services.http, settings, job_id, "waggle watchdog: no progress")
            reason = stall_reason(settings.crawl_stall_s, idle_s, depth, job_id, cancelled)
            if await _close(services, crawl, reason):
                closed.append((str(crawl["id"]), reason))
    return closed


async def run_periodically(services: Any) -> None:
    """Run :func:`check_once` every ``WAGGLE_WATCHDOG_INTERVAL_S`` seconds until cancelled
    (started by the app lifespan). Errors are logged, never fatal."""
    interval = max(0.05, float(services.settings.watchdog_interval_s))
    while True:
        try:
            await check_once(services)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("watchdog: check failed; retrying in %.0f s", interval)
        await asyncio.sleep(interval)
