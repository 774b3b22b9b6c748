"""Level dispatch: one webhook POST per level to the Windmill flow (reference/scheduler.md §6).

The body is the flow's arguments in snake_case (Windmill drops camelCase as "not passed").
A dispatch that fails — non-2xx, timeout, refused connection — closes the crawl as
``failed`` with the reason: a crawl is never left running after a failed dispatch (what its
progress events reported captured is kept: ``ledger.crawl.salvage``).
"""

from __future__ import annotations

import logging
import re
from datetime import datetime
from typing import Any

import httpx

from ledger.archive.verify import verify_level
from ledger.crawl import robots_cache, salvage, servers, sitemaps
from ledger.crawl.leases import PLANNED_GRACE_S, claim_level, expire_leases, lease_seconds, record_job
from ledger.crawl.scripts import webhook_item
from ledger.crawl.times import iso_ms  # noqa: F401 - also imported from here
from ledger.settings import CAPTURE_FORMAT_NAMES, Settings

log = logging.getLogger(__name__)

_UUID = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")


class DispatchFailed(RuntimeError):
    """The webhook did not accept the level; ``str()`` is the reason stored on the crawl."""


def capture_formats(settings: Settings, *, following: bool, chosen: list[str] | None = None) -> dict[str, bool]:
    """All six format booleans from the crawl's own ``formats`` (``chosen``, migration 151) or else
    ``WAGGLE_CAPTURE_FORMATS``; ``links`` forced on when another level may follow (``following``),
    else left as configured (ledger.md §7.9)."""
    names = settings.capture_formats if chosen is None else chosen
    formats = {name: name in names for name in CAPTURE_FORMAT_NAMES}
    if following:
        formats["links"] = True
    return formats


def webhook_body(
    crawl: dict, depth: int, frontier: list[dict], settings: Settings, *, following: bool | None = None,
    robots: list[dict] | None = None,
) -> dict[str, Any]:
    """The flow arguments for level ``depth`` of ``crawl`` (a ``crawls`` row as a dict).

    ``following`` (default: ``max_depth > depth``) asks for links: True when a page of the level
    is shallower than ``max_depth`` (a carried page may be). ``frontier`` items: ``{url, host,
    lastFinishedAt, hostDelayMs?}`` (ISO string or None; ms,
    sent when known — docs/internals.md "Concurrent crawls and host leases"). Keys: ``crawl_id,
    depth, frontier, per_host_delay_ms, host_parallelism, capture_formats, signing, scripts,
    links_per_page`` (the last beyond upstream: inline links per PageResult, issue 14),
    ``blocked_after`` (the hosts' circuit breaker, decision 231), and
    ``robots`` when ``robots`` is non-empty (the crawl's cached robots.txt outcomes for hosts
    of the level, ``ledger.crawl.robots_cache.cached``; once per host, not per URL), and
    ``ignore_robots_meta: true`` for a crawl that ignores robots meta (migration 190), and
    ``exclude`` (the crawl's scope exclude patterns) when it has any (decision 105).
    """
    body = {
        "crawl_id": str(crawl["id"]),
        "depth": depth,
        "frontier": [frontier_item(f) for f in frontier],
        "per_host_delay_ms": crawl["per_host_delay_ms"],
        "host_parallelism": crawl["host_parallelism"],
        "capture_formats": capture_formats(
            settings, following=crawl["max_depth"] > depth if following is None else following,
            chosen=crawl.get("capture_formats")),
        "signing": bool(settings.capture_signing if crawl.get("signing") is None else crawl["signing"]),
        "scripts": [webhook_item(s) for s in crawl["scripts"]],
        "links_per_page": settings.report_links_per_page,
        "blocked_after": settings.blocked_after,  # the host's circuit breaker (decision 231)
    }
    if robots:
        body["robots"] = robots
    if crawl.get("ignore_robots_meta"):  # absent: the flow honours noarchive / nofollow
        body["ignore_robots_meta"] = True
    if crawl.get("scope_exclude"):  # the capture refuses a redirect/script navigation they match (decision 105)
        body["exclude"] = list(crawl["scope_exclude"])
    if sitemaps.flow_input(crawl, depth):  # level 0 of a crawl with useSitemap (ledger.crawl.sitemaps)
        body["sitemap"] = sitemaps.flow_input(crawl, depth)
    if crawl.get("delay_factor") is not None:  # a slow host's longer gap (decision 242; absent: the flow's 5)
        body["delay_factor"] = float(crawl["delay_factor"])
    return body


def frontier_item(page: dict) -> dict[str, Any]:
    """``{url, host, lastFinishedAt}`` plus ``hostDelayMs`` when the page carries one."""
    item = {"url": page["url"], "host": page["host"], "lastFinishedAt": page.get("lastFinishedAt")}
    if page.get("hostDelayMs") is not None:
        item["hostDelayMs"] = int(page["hostDelayMs"])
    if page.get("server"):  # hosts of one server share one gap in the flow (decision 241)
        item["server"] = page["server"]
    return item


def job_id_from(text: str) -> str | None:
    """The Windmill job id in a webhook answer (plain or JSON-quoted UUID), else None."""
    value = text.strip()
    if len(value) >= 2 and value[0] == value[-1] == '"':
        value = value[1:-1].strip()
    return value if _UUID.match(value) else None


async def post_level(http: httpx.AsyncClient, settings: Settings, body: dict) -> str | None:
    """POST ``body`` to ``WAGGLE_CRAWL_WEBHOOK_URL`` with the Bearer token; returns the job id.

    Raises :class:`DispatchFailed` on a non-2xx answer (``crawl webhook → <status> <first 200
    chars>``), a timeout (``WAGGLE_CRAWL_WEBHOOK_TIMEOUT_S``) or a connection error.
    """
    url = settings.crawl_webhook_url
    try:
        resp = await http.post(
            url,  # type: ignore[arg-type]
            json=body,
            headers={"authorization": f"Bearer {settings.crawl_webhook_token}"},
            timeout=settings.crawl_webhook_timeout_s,
        )
    except httpx.TimeoutException:
        raise DispatchFailed(
            f"crawl webhook → no answer within {settings.crawl_webhook_timeout_s:g} s ({url})"
        ) from None
    except httpx.HTTPError as exc:
        raise DispatchFailed(f"crawl webhook → unreachable ({url}): {type(exc).__name__} {exc}") from None
    if not 200 <= resp.status_code < 300:
        raise DispatchFailed(f"crawl webhook → {resp.status_code} {resp.text[:200]}")
    return job_id_from(resp.text)


async def dispatch_level(services: Any, crawl: dict, depth: int, pages: list[dict] | None = None) -> str | None:
    """Claim level ``depth`` of ``crawl`` (only ``crawl["id"]`` is read), send it and record the
    job; never raises. ``pages`` is ignored: the level is what the database holds (its pending
    pages at ``depth``), so a re-dispatch and a waiting level send the same thing.

    The claim (``ledger.crawl.leases.claim_level``) leases the level's hosts, carries the pages
    of hosts leased elsewhere to the next level, and gives each frontier item the host's
    ``lastFinishedAt`` and ``hostDelayMs`` (``ledger.crawl.hosts``). Nothing claimed (already
    dispatched, crawl moved on) or every host leased elsewhere (the level waits) → None, no
    webhook. Success → ``last_job_id/last_job_depth`` (never moving back) and the job id on the
    leases. Failure → the crawl is closed ``failed`` with the reason (its leases end with it).
    Returns the job id (None when there is none, nothing was sent, or dispatch failed).
    """
    pool, settings = services.pool, services.settings
    crawl_id = crawl["id"]
    try:
        claim = await claim_level(pool, crawl_id, depth, lease_s=lease_seconds(settings),
                                  resolve=servers.resolver(settings.resolve_hosts))
        if claim is None:
            return None
        if claim.waiting:
            log.info("Level waits: crawl %s depth %d, every host leased elsewhere: %s", crawl_id, depth,
                     ", ".join(claim.carried[:10]))
            return None
        if claim.carried:
            log.info("Hosts leased elsewhere, carried to the next level: crawl %s depth %d: %s", crawl_id, depth,
                     ", ".join(claim.carried[:10]))
        # level 0 has no report behind it, so nothing cached: no query on the start's path
        robots = await robots_cache.cached(pool, crawl_id, claim.leased, settings.robots_cache_ttl_s) if depth else []
        body = webhook_body(claim.crawl, depth, claim.frontier, settings, following=claim.following, robots=robots)
        job_id = await post_level(services.http, settings, body)
    except Exception as exc:  # every failure closes the crawl; unexpected ones are logged in full
        reason = str(exc) if isinstance(exc, DispatchFailed) else f"could not dispatch level {depth}: {type(exc).__name__}"
        log.error("Could not dispatch a level: crawl %s depth %d: %s", crawl_id, depth, reason,
                  exc_info=not isinstance(exc, DispatchFailed))
        await _close_failed(services, crawl_id, reason)
        return None
    log.info("Level dispatched: crawl %s depth %d, %d pages on %d hosts, job %s", crawl_id, depth,
             len(claim.frontier), len(claim.leased), job_id)
    try:
        async with pool.connection() as conn:
            await conn.execute(
                "UPDATE crawls SET last_progress_at = now()"
                + (", last_job_id = %s, last_job_depth = %s" if job_id else "")
                + " WHERE id = %s"
                + (" AND (last_job_depth IS NULL OR last_job_depth <= %s)" if job_id else ""),
                (job_id, depth, crawl_id, depth) if job_id else (crawl_id,),
            )
        if job_id:
            await record_job(pool, crawl_id, depth, job_id)
    except Exception:
        log.exception("Could not record the dispatch: crawl %s depth %d", crawl_id, depth)
    return job_id


async def _close_failed(services: Any, crawl_id: Any, reason: str) -> None:
    """Close the crawl ``failed``; its pages whose capture a progress event reported (a re-sent
    level whose first job captured) are recorded and admitted (``ledger.crawl.salvage``)."""
    tasks: list[str] = []
    try:
        async with services.pool.connection() as conn, conn.transaction():
            cur = await conn.execute(
                "UPDATE crawls SET state = 'failed', stop_reason = 'failed', finished_at = now(), error = %s"
                " WHERE id = %s AND state = 'running' RETURNING *",
                (reason[:2000], crawl_id),
            )
            row = await cur.fetchone()
            if row is not None:
                tasks = await salvage.record_captures(conn, row, services.settings.s3_bucket)
    except Exception:
        log.exception("Could not record the dispatch failure: crawl %s", crawl_id)
        return
    if tasks:
        await verify_level(services, crawl_id, row["current_depth"], set(), tasks)


async def dispatch_waiting(services: Any, *, planned_grace_s: float = PLANNED_GRACE_S) -> int:
    """Try every waiting level (oldest first), and every level left 'planned' for more than
    ``planned_grace_s`` (its replica died before dispatching it); returns how many were sent."""
    async with services.pool.connection() as conn:
        cur = await conn.execute(
            "SELECT id, current_depth FROM crawls WHERE state = 'running' AND (level_state = 'waiting'"
            " OR (level_state = 'planned' AND level_since < now() - make_interval(secs => %s)))"
            " ORDER BY level_since", (planned_grace_s,))
        rows = await cur.fetchall()
    sent = 0
    for row in rows:
        if await dispatch_level(services, {"id": row["id"]}, row["current_depth"]):
            sent += 1
    return sent


async def lease_round(services: Any) -> None:
    """One round of the lease loop: expire leases, then dispatch the levels that wait."""
    await expire_leases(services)
    await dispatch_waiting(services)
