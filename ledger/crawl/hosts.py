"""Per-host politeness shared by every crawl (table ``hosts``, migration 050; issue 12).

A host's gap runs from its last capture, whichever crawl made it: ``hosts.last_capture_at``
is the latest ``gapFrom`` (else ``finishedAt``) any level report carried for the host (BRIEF
contract 2), never moving back; ``last_delay_ms`` is the per-host delay of the crawl that made
that capture. The frontier of a level carries, per host, ``lastFinishedAt`` = that time and
``hostDelayMs`` = the largest per-host delay among this crawl, the crawl of that last capture,
and every other running crawl with pages pending on the host; ``plan_level`` waits and spaces
the host's captures by ``max(its own delay and Crawl-delay, hostDelayMs)`` (docs/internals.md
"Concurrent crawls and host leases"). :func:`current` answers the same just before a level's
first request (``GET /api/crawls/{id}/politeness``, docs/internals.md "Faults (round 21)").
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from ledger.crawl import servers
from ledger.crawl.running import require_running
from ledger.crawl.times import iso_ms
from ledger.crawl.urls import InvalidUrl, parse_http_url

_RECORD = """
INSERT INTO hosts AS h (host, last_capture_at, last_delay_ms, last_crawl_id)
SELECT v.host, v.at, %s, %s FROM unnest(%s::text[], %s::timestamptz[]) AS v(host, at) ORDER BY v.host
ON CONFLICT (host) DO UPDATE SET last_capture_at = EXCLUDED.last_capture_at,
    last_delay_ms = EXCLUDED.last_delay_ms, last_crawl_id = EXCLUDED.last_crawl_id, updated_at = now()
WHERE h.last_capture_at < EXCLUDED.last_capture_at
   OR (h.last_capture_at = EXCLUDED.last_capture_at AND h.last_delay_ms < EXCLUDED.last_delay_ms)
"""


def _when(value: Any) -> datetime | None:
    if isinstance(value, datetime):
        return value
    if isinstance(value, str) and value:
        try:
            return datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            return None
    return None


def last_captures(results: list[dict]) -> dict[str, datetime]:
    """``{host: latest gap start}`` of a level report's results: ``gapFrom``, else ``finishedAt``
    (results without either, or with an unusable URL, say nothing about the host)."""
    latest: dict[str, datetime] = {}
    for r in results:
        at = _when(r.get("gapFrom")) or _when(r.get("finishedAt"))
        if at is None:
            continue
        try:
            host = parse_http_url(r["url"]).host
        except (InvalidUrl, KeyError, TypeError):
            continue
        if host not in latest or at > latest[host]:
            latest[host] = at
    return latest


async def record_captures(conn: Any, crawl: dict, results: list[dict]) -> int:
    """Move each reported host's ``last_capture_at`` forward (never back) in the caller's
    transaction, with this crawl's ``per_host_delay_ms``; returns the hosts reported."""
    latest = last_captures(results)
    if not latest:
        return 0
    reported = len(latest)
    latest = await servers.with_keys(conn, latest)  # the hosts' servers feel the captures too (decision 241)
    hosts = sorted(latest)
    await conn.execute(_RECORD, (crawl["per_host_delay_ms"], crawl["id"], hosts, [latest[h] for h in hosts]))
    return reported


_POLITENESS = """
SELECT v.host, h.last_capture_at, h.last_delay_ms, h.last_crawl_id, o.id AS other_id, o.per_host_delay_ms AS other_delay
FROM unnest(%s::text[]) AS v(host) LEFT JOIN hosts h ON h.host = v.host
LEFT JOIN LATERAL (SELECT c.id, c.per_host_delay_ms FROM crawls c
                   WHERE c.state = 'running' AND c.id <> %s
                     AND EXISTS (SELECT 1 FROM crawl_pages p
                                 WHERE p.crawl_id = c.id AND p.host = v.host AND p.state = 'pending')
                   ORDER BY c.per_host_delay_ms DESC, c.id LIMIT 1) o ON true
"""


async def politeness(conn: Any, crawl: dict, hosts: list[str], *, who: bool = False) -> dict[str, dict]:
    """``{host: {"lastFinishedAt": ISO | None, "hostDelayMs": int}}`` for a level of ``crawl``
    (see the module docstring). ``who=True`` adds ``"setBy"``: None when this crawl's own delay
    is the largest, else ``{"crawlId": UUID, "capturedLast": bool}`` — the crawl whose delay
    applies: the one that made the host's last capture (``capturedLast``), else the running crawl
    with the largest delay among those with pages pending on the host (ties: the last capture's)."""
    if not hosts:
        return {}
    own = crawl["per_host_delay_ms"]
    cur = await conn.execute(_POLITENESS, (sorted(set(hosts)), crawl["id"]))
    out: dict[str, dict] = {}
    for r in await cur.fetchall():
        last, other = r["last_delay_ms"] or 0, r["other_delay"] or 0
        delay = max(own, last, other)
        out[r["host"]] = {"lastFinishedAt": iso_ms(r["last_capture_at"]), "hostDelayMs": int(delay)}
        if who:
            by = None
            if delay > own and last == delay and r["last_crawl_id"] != crawl["id"]:
                by = {"crawlId": r["last_crawl_id"], "capturedLast": True}
            elif delay > own and other == delay:
                by = {"crawlId": r["other_id"], "capturedLast": False}
            out[r["host"]]["setBy"] = by
    for host, (at, delay) in (await servers.key_politeness(conn, crawl, list(out))).items():
        # the host's server: its last capture of any of its hosts, with the larger delay (decision 241)
        mine = out[host]
        if at is not None and (mine["lastFinishedAt"] is None or iso_ms(at) > mine["lastFinishedAt"]):
            mine["lastFinishedAt"] = iso_ms(at)
        if delay > mine["hostDelayMs"]:
            mine["hostDelayMs"] = delay
    return out


HOSTS_MAX = 1000  # hosts asked at once by GET /api/crawls/{id}/politeness (one level's plan)


async def current(pool: Any, crawl_id: Any, hosts: list[str]) -> dict[str, dict] | None:
    """The politeness of ``hosts`` for running crawl ``crawl_id`` *now* (:func:`politeness`):
    what ``plan_level`` reads just before its first request to a host, so a crawl that registered
    after this level was claimed — started at the same time — is honoured from robots.txt on.
    None when the crawl does not exist. Raises :class:`Refused` 409 when it is not running."""
    async with pool.connection() as conn:
        crawl = await require_running(conn, crawl_id, "nothing more is sent to its hosts")
        return None if crawl is None else await politeness(conn, crawl, hosts)
