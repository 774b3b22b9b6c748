"""Host leases: a host is crawled by at most one level at a time across all crawls (issue 12).

Claiming a level (:func:`claim_level`, one transaction, the crawl row locked) decides what the
level sends:

* every host of the level's pending pages is leased to it (``host_leases``, one row per host:
  crawl, depth, job id, expiry) unless another crawl's level holds it, or this crawl does not
  wait for the host while another running crawl does (``host_waits``): a crawl that just
  released a host cannot take it straight back from a crawl waiting for it, so none starves;
  waiting levels are tried oldest first;
* hosts it could not lease are *carried*: their pending pages move to the next level
  (``crawl_pages.level``; their ``depth``, the link distance, stays) and the crawl waits for the
  host; they are never dropped;
* when it leased no host at all the level *waits* (``crawls.level_state = 'waiting'``, the crawl
  stays running) and the lease loop (:func:`dispatch_waiting`) dispatches it when a lease ends.

A lease ends with its level: the level report moves ``current_depth`` and a crawl that stops
running drops all of its leases (trigger ``crawls_release_leases``, migration 050); an expired
lease (``WAGGLE_CRAWL_STALL_S`` plus two watchdog intervals after dispatch: the watchdog should
have closed the crawl by then) has its job cancelled and its crawl closed by :func:`expire_leases`.
Every step is conditional on the crawl row's state, so two replicas racing claim a level once.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from ledger.crawl import hosts as host_politeness
from ledger.crawl import salvage, servers

log = logging.getLogger("waggle.leases")

PLANNED_GRACE_S = 10.0  # a level still 'planned' after this long lost its dispatcher: resend

_STALE = """
DELETE FROM host_leases l USING crawls c
WHERE l.host = ANY(%s) AND c.id = l.crawl_id
  AND (c.state <> 'running' OR c.current_depth <> l.depth OR l.expires_at < now())
"""

_ACQUIRE = """
INSERT INTO host_leases (host, crawl_id, depth, expires_at)
SELECT v.host, %(crawl)s, %(depth)s, now() + make_interval(secs => %(lease_s)s)
FROM unnest(%(hosts)s::text[]) AS v(host)
WHERE EXISTS (SELECT 1 FROM host_waits m WHERE m.host = v.host AND m.crawl_id = %(crawl)s)
   OR NOT EXISTS (SELECT 1 FROM host_waits w JOIN crawls c ON c.id = w.crawl_id AND c.state = 'running'
                  WHERE w.host = v.host AND w.crawl_id <> %(crawl)s)
ORDER BY v.host
ON CONFLICT (host) DO UPDATE SET job_id = NULL, leased_at = now(), expires_at = EXCLUDED.expires_at
WHERE host_leases.crawl_id = EXCLUDED.crawl_id AND host_leases.depth = EXCLUDED.depth
RETURNING host
"""

_WAIT = """
INSERT INTO host_waits (host, crawl_id) SELECT h, %s FROM unnest(%s::text[]) AS h ORDER BY h
ON CONFLICT (host, crawl_id) DO NOTHING
"""


@dataclass
class Claim:
    """What :func:`claim_level` decided. ``frontier``: ``[{url, host, lastFinishedAt,
    hostDelayMs}]`` to send (empty when the level waits)."""

    crawl: dict
    depth: int
    leased: list[str] = field(default_factory=list)
    carried: list[str] = field(default_factory=list)
    frontier: list[dict] = field(default_factory=list)
    following: bool = False  # a page of the level is shallower than maxDepth: ask for links

    @property
    def waiting(self) -> bool:
        return not self.leased


def lease_seconds(settings: Any) -> float:
    """How long a lease is valid: the stall limit plus two watchdog intervals (the watchdog
    closes a stalled crawl, and thereby ends its leases, before the lease expires)."""
    return float(settings.crawl_stall_s) + 2 * float(settings.watchdog_interval_s)


async def claim_level(pool: Any, crawl_id: Any, depth: int, *, lease_s: float, attempts: int = 3,
                      resolve: servers.Resolve | None = None) -> Claim | None:
    """Lease the hosts of level ``depth`` of ``crawl_id`` and mark it dispatched (or waiting).

    Returns None when there is nothing to claim: the crawl is not running, is at another
    level, or this level was already dispatched (by this or another replica). Two claims
    racing for the same hosts that Postgres aborts as a deadlock are retried (``attempts``).
    ``resolve`` (``ledger.crawl.servers.resolver``): the level's hosts are resolved first
    (outside the transaction) and a host is leased only with all its server keys; None (tests
    of the lease rules alone) leases hosts only.
    """
    import psycopg

    addresses: dict[str, list[str]] | None = None
    if resolve is not None:
        async with pool.connection() as conn:
            cur = await conn.execute(
                "SELECT DISTINCT host FROM crawl_pages WHERE crawl_id = %s AND coalesce(level, depth) = %s"
                " AND state = 'pending'", (crawl_id, depth))
            hosts = [r["host"] for r in await cur.fetchall()]
        addresses = await servers.resolve_hosts(hosts, resolve)
    for attempt in range(attempts):
        try:
            return await _claim(pool, crawl_id, depth, lease_s, addresses)
        except psycopg.errors.DeadlockDetected:
            if attempt == attempts - 1:
                raise
            log.info("Lease claim deadlocked with another claim; retrying: crawl %s depth %d", crawl_id, depth)
    return None


async def _claim(pool: Any, crawl_id: Any, depth: int, lease_s: float,
                 addresses: dict[str, list[str]] | None = None) -> Claim | None:
    async with pool.connection() as conn, conn.transaction():
        cur = await conn.execute("SELECT * FROM crawls WHERE id = %s FOR UPDATE", (crawl_id,))
        crawl = await cur.fetchone()
        if (crawl is None or crawl["state"] != "running" or crawl["current_depth"] != depth
                or crawl["level_state"] == "dispatched"):
            return None
        cur = await conn.execute(
            "SELECT DISTINCT host FROM crawl_pages WHERE crawl_id = %s AND coalesce(level, depth) = %s"
            " AND state = 'pending' ORDER BY host", (crawl_id, depth))
        wanted = [r["host"] for r in await cur.fetchall()]
        if not wanted:
            log.warning("Level has no pending page to dispatch: crawl %s depth %d", crawl_id, depth)
            return None
        await conn.execute(_STALE, (wanted,))
        cur = await conn.execute(_ACQUIRE, {"crawl": crawl_id, "depth": depth, "lease_s": lease_s, "hosts": wanted})
        leased = sorted(r["host"] for r in await cur.fetchall())
        keys_of: dict[str, list[str]] = {}
        if addresses is not None:  # a host also needs its server's keys (ledger.crawl.servers)
            await servers.remember(conn, {h: addresses[h] for h in wanted if h in addresses})
            grouping = crawl.get("group_hosts") or "address"
            keys_of = {h: servers.keys_for(h, addresses.get(h, []), grouping) for h in wanted}
            leased = await _lease_keys(conn, crawl_id, depth, lease_s, leased, keys_of)
        claim = Claim(dict(crawl), depth, leased, [h for h in wanted if h not in set(leased)])
        labels = servers.server_labels({h: keys_of.get(h, []) for h in leased})
        if claim.waiting:
            await conn.execute(_WAIT, (crawl_id, wanted))
            await conn.execute(
                "UPDATE crawls SET level_state = 'waiting',"
                " level_since = CASE WHEN level_state = 'waiting' THEN level_since ELSE now() END WHERE id = %s",
                (crawl_id,))
            return claim
        if claim.carried:
            await conn.execute(
                "UPDATE crawl_pages SET level = %s WHERE crawl_id = %s AND coalesce(level, depth) = %s"
                " AND state = 'pending' AND host = ANY(%s)", (depth + 1, crawl_id, depth, claim.carried))
            await conn.execute(_WAIT, (crawl_id, claim.carried))
        await conn.execute("DELETE FROM host_waits WHERE crawl_id = %s AND host = ANY(%s)",
                           (crawl_id, leased + sorted({k for h in leased for k in keys_of.get(h, [])})))
        cur = await conn.execute(
            "SELECT url, host, depth FROM crawl_pages WHERE crawl_id = %s AND coalesce(level, depth) = %s"
            " AND state = 'pending' ORDER BY id", (crawl_id, depth))
        pages = await cur.fetchall()
        claim.following = any(p["depth"] < crawl["max_depth"] for p in pages)
        polite = await host_politeness.politeness(conn, crawl, leased)
        claim.frontier = [{"url": p["url"], "host": p["host"], **polite[p["host"]],
                           **({"server": labels[p["host"]]} if p["host"] in labels else {})} for p in pages]
        await conn.execute(
            "UPDATE crawls SET level_state = 'dispatched', level_since = now(), last_progress_at = now()"
            " WHERE id = %s", (crawl_id,))
    return claim


async def _lease_keys(conn: Any, crawl_id: Any, depth: int, lease_s: float, leased: list[str],
                      keys_of: dict[str, list[str]]) -> list[str]:
    """The hosts of ``leased`` whose server keys this level could lease too (rows of
    ``host_leases`` under the keys, with the host rows' rules: another level's key is not taken,
    nor one a crawl waits for). The others' host rows and the keys only they needed are given
    back, and the crawl waits for the keys it did not get."""
    wanted = sorted({k for h in leased for k in keys_of.get(h, [])})
    if not wanted:
        return leased
    await conn.execute(_STALE, (wanted,))
    cur = await conn.execute(_ACQUIRE, {"crawl": crawl_id, "depth": depth, "lease_s": lease_s, "hosts": wanted})
    got = {r["host"] for r in await cur.fetchall()}
    kept = [h for h in leased if set(keys_of.get(h, [])) <= got]
    lost = [h for h in leased if h not in set(kept)]
    if lost:
        needed = {k for h in kept for k in keys_of.get(h, [])}
        await conn.execute("DELETE FROM host_leases WHERE crawl_id = %s AND depth = %s AND host = ANY(%s)",
                           (crawl_id, depth, sorted(lost + [k for k in got if k not in needed])))
        await conn.execute(_WAIT, (crawl_id, sorted({k for h in lost for k in keys_of.get(h, [])} - got)))
        log.info("Hosts whose server another level holds, carried: crawl %s depth %d: %s", crawl_id, depth,
                 ", ".join(lost[:10]))
    return kept


async def record_job(pool: Any, crawl_id: Any, depth: int, job_id: str) -> None:
    """Note the Windmill job on the level's leases (the watchdog and lease expiry use it)."""
    async with pool.connection() as conn:
        await conn.execute("UPDATE host_leases SET job_id = %s WHERE crawl_id = %s AND depth = %s",
                           (job_id, crawl_id, depth))


async def carried_pages(conn: Any, crawl_id: Any, level: int, inserted: list[dict], held_up_to: int) -> list[dict]:
    """Pending pages of ``level`` that are not in ``inserted`` (pages carried there from a level
    whose host was leased elsewhere), as ``[{url, host}]`` in id order.

    ``held_up_to`` = the largest ``crawl_pages.id`` before this report inserted anything
    (:func:`max_page_id`, read under the crawl's row lock): only rows up to it are read, so the
    rows the report has just inserted (90,000 at 100,000 links: 0.5 s to read back) are not.
    Every row of the crawl inserted before the lock has a smaller id (one sequence, no cache),
    and the index of migration 100 serves the range in id order."""
    cur = await conn.execute(
        "SELECT url, host FROM crawl_pages WHERE crawl_id = %s AND coalesce(level, depth) = %s"
        " AND state = 'pending' AND id <= %s ORDER BY id", (crawl_id, level, held_up_to))
    have = {p["url"] for p in inserted}
    return [dict(r) for r in await cur.fetchall() if r["url"] not in have]


async def max_page_id(conn: Any) -> int:
    """The largest ``crawl_pages.id`` so far (0 when empty): one step down the primary key."""
    cur = await conn.execute("SELECT coalesce(max(id), 0) AS n FROM crawl_pages")
    return (await cur.fetchone())["n"]


async def expire_leases(services: Any) -> list[str]:
    """Close the crawls whose lease expired (their job cancelled first, best effort), which
    ends their leases, keeping what their progress events reported captured
    (``ledger.crawl.salvage``); drop expired leases of crawls no longer at that level. Returns
    the crawl ids closed."""
    from ledger.archive.verify import verify_level
    from ledger.crawl.watchdog import cancel_job

    async with services.pool.connection() as conn:
        cur = await conn.execute(
            "SELECT DISTINCT crawl_id, depth, job_id FROM host_leases WHERE expires_at < now()")
        expired = [dict(r) for r in await cur.fetchall()]
    closed: list[str] = []
    for lease in expired:
        if lease["job_id"]:
            await cancel_job(services.http, services.settings, lease["job_id"], "waggle: host lease expired")
        reason = (f"the host lease of level {lease['depth']} expired (no report within WAGGLE_CRAWL_STALL_S plus"
                  " two watchdog intervals); its Windmill job was cancelled — check the capture servers and"
                  " Windmill workers, then start a new crawl")
        tasks: list[str] = []
        async with services.pool.connection() as conn, conn.transaction():
            cur = await conn.execute(
                "UPDATE crawls SET state = 'failed', stop_reason = COALESCE(stop_reason, 'failed'),"
                " finished_at = now(), error = %s WHERE id = %s AND state = 'running' AND current_depth = %s"
                " RETURNING *", (reason, lease["crawl_id"], lease["depth"]))
            row = await cur.fetchone()
            if row is not None:
                closed.append(str(lease["crawl_id"]))
                tasks = await salvage.record_captures(conn, row, services.settings.s3_bucket)
                log.warning("Host lease expired; crawl %s closed", lease["crawl_id"])
            await conn.execute("DELETE FROM host_leases WHERE crawl_id = %s AND depth = %s AND expires_at < now()",
                               (lease["crawl_id"], lease["depth"]))
        if tasks:  # admission after the close, as for a level report
            await verify_level(services, lease["crawl_id"], lease["depth"], set(), tasks)
    return closed


async def source_depths(conn: Any, crawl_id: Any, level: int, hashes: list[bytes | None]) -> list[int]:
    """The link distance (``depth``) of each reported page of ``level`` (``level`` itself for a
    result that names no page of the crawl): links found on a carried page are one deeper than
    *it*, not than the level that captured it."""
    known = [h for h in hashes if h is not None]
    if not known:
        return [level] * len(hashes)
    cur = await conn.execute("SELECT url_hash, depth FROM crawl_pages WHERE crawl_id = %s AND url_hash = ANY(%s::bytea[])",
                             (crawl_id, known))
    depth_of = {bytes(r["url_hash"]): r["depth"] for r in await cur.fetchall()}
    return [min(level, depth_of.get(h, level)) if h is not None else level for h in hashes]


async def lift(conn: Any, crawl_id: Any, hashes: list[bytes], level: int) -> None:
    """Put new pages (found on carried pages, so shallower than ``level``) into ``level``."""
    if hashes:
        await conn.execute("UPDATE crawl_pages SET level = %s WHERE crawl_id = %s AND url_hash = ANY(%b::bytea[])"
                           " AND depth < %s", (level, crawl_id, hashes, level))
