"""Crawl rows: start, read, list, close (reference/ledger.md §6.7, §6.8, §6.10, §7.1–§7.2).

Starting is one transaction (crawl row + seed pages), unlike upstream, so a failure never
leaves a ``running`` row without pages. The level-0 dispatch happens after commit.
"""

from __future__ import annotations

import json
import logging
import uuid
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import psycopg
from psycopg import AsyncConnection

from ledger.crawl import scripts as catalogue
from ledger.crawl import blocked, frontier, salvage, servers, sitemaps, traps, waits
from ledger.crawl import scope as scope_rules
from ledger.crawl.progress import level_progress
from ledger.crawl.times import iso_ms
from ledger.crawl.pages import capture_incomplete
from ledger.crawl.errors import Refused
from ledger.crawl.guard import refusal
from ledger.crawl.urls import USERINFO_REFUSED, InvalidUrl, ParsedUrl, has_userinfo, parse_http_url

log = logging.getLogger(__name__)

FLOW_FAILED_WITHOUT_REASON = "the flow failed without saying why"


# The politeness gap on one host when a caller names none: the one source of this default. The
# ledger always sends the crawl's delay to the flow; the flow's own fallbacks (plan_level's
# literal, plan_level.script.yaml, crawl_level.flow) must agree (tests/flow/test_default_delay.py).
DEFAULT_PER_HOST_DELAY_MS = 2000


@dataclass
class CrawlSpec:
    """A validated ``POST /api/crawls`` body (defaults not yet applied where None)."""

    seeds: list[str] | None
    from_targets_limit: int | None  # used when seeds is None; 0 = no limit
    scope: str  # a scope type (ledger.crawl.scope.SCOPES; aliases resolved by the route)
    max_depth: int | None
    max_pages: int | None
    per_host_delay_ms: int
    host_parallelism: int
    scripts: list[Any] | None  # None = default set; items: "id", "id@n", or inline dicts
    formats: list[str] | None = None  # capture formats (with wacz); None = WAGGLE_CAPTURE_FORMATS
    ignore_robots_meta: bool = False  # archive noarchive pages, follow nofollow ones (migration 190)
    signing: bool | None = None  # signed WACZ; None = WAGGLE_CAPTURE_SIGNING
    include: list[str] = field(default_factory=list)  # RE2 patterns over the normalized URL
    exclude: list[str] = field(default_factory=list)  # an exclude always wins
    extra_hops: int = 0  # pages out of scope taken from pages in scope, not expanded past N hops
    time_limit_s: int | None = None  # limits (ledger.crawl.limits); None: none
    max_bytes: int | None = None
    max_pages_per_host: int | None = None
    use_sitemap: bool = False  # queue the seed hosts' sitemap URLs in scope (ledger.crawl.sitemaps)
    sitemap_lastmod_after: datetime | None = None  # only sitemap URLs with a later lastmod (aware)
    group_hosts: str = "address"  # hosts sharing an address are one server; "domain": also a registered domain
    delay_factor: float = 5.0  # a slow host's gap ≥ this × its page's document time (decision 242)


def is_unique_violation(exc: BaseException, constraint: str) -> bool:
    """SQLSTATE 23505 on a constraint whose name contains ``constraint``."""
    if not isinstance(exc, psycopg.errors.UniqueViolation):
        return False
    name = getattr(exc.diag, "constraint_name", None) or ""
    return constraint in name


async def _target_seeds(conn: AsyncConnection, org_id: str, limit: int | None) -> list[str]:
    cur = await conn.execute(
        "SELECT url FROM capture_targets WHERE enabled AND org_id = %s ORDER BY id"
        + (" LIMIT %s" if limit else ""),
        (org_id, limit) if limit else (org_id,),
    )
    return [r["url"] for r in await cur.fetchall()]


def _seed_refusal(message: str, field: str = "seeds") -> Refused:
    """400 about the seeds, with ``fields`` like a validation error (the web page shows it there)."""
    return Refused(400, message, fields={field: message})


def _first_of_each(seeds: list[ParsedUrl]) -> list[ParsedUrl]:
    """Seeds in order, a seed given twice (or another spelling of one URL, same frontier key)
    kept once where it first came: stored, counted and captured once."""
    first: dict[str, ParsedUrl] = {}
    for seed in seeds:
        first.setdefault(seed.key, seed)
    return list(first.values())


def parse_seeds(raw: list[str], allow_private: bool, field: str = "seeds") -> list[ParsedUrl]:
    """Every seed parsed; raises :class:`Refused` 400 naming the unusable ones (none dropped):
    not http(s), longer than :data:`ledger.crawl.traps.MAX_URL_LENGTH` (as given or
    serialized), on a private host, or with credentials (``user:password@``; such a seed is
    named by its origin only, never with its password). ``field`` names the request field they
    came from (``seeds``, or ``fromTargets`` for saved targets)."""
    noun = "seed" if field == "seeds" else "saved target"
    parsed, bad, too_long, refused, secret = [], [], [], [], []
    for item in raw:
        try:
            p = parse_http_url(item)
        except InvalidUrl:
            bad.append(item)
            continue
        shown = p.url
        if has_userinfo(p):
            shown = p.origin + "/…"
            secret.append(shown)
        if traps.too_long(p.url, p.key):
            too_long.append(traps.shown(shown))
            continue
        why = refusal(p.url, allow_private)
        if why:
            refused.append(f"{shown} ({why})")
        parsed.append(p)
    # every kind of problem at once: a form that named one per submit made people submit four times
    problems = []
    if bad:
        problems.append(f"every {noun} must be an http(s) URL; unusable: " + ", ".join(traps.shown(repr(b)) for b in bad))
    if too_long:
        problems.append(f"{noun}s longer than {traps.MAX_URL_LENGTH:,} characters are refused (a crawl never"
                        " follows so long a URL; shorten it): " + ", ".join(too_long))
    if refused:
        problems.append(f"{noun}s on private or local hosts are refused: " + "; ".join(refused)
                        + " (set WAGGLE_ALLOW_PRIVATE_HOSTS=1 to crawl local sites)")
    if secret:
        problems.append(f"{noun}s with user:password@ are refused ({USERINFO_REFUSED}): " + ", ".join(secret))
    if problems:
        raise _seed_refusal(". ".join(problems), field)
    return parsed


async def _resolve_scripts(conn: AsyncConnection, requested: list[Any] | None) -> list[dict]:
    if requested is None:
        pinned = await catalogue.default_set(conn)
        if not pinned:
            raise Refused(400, "no default page scripts are registered: run `waggle scripts load-defaults`,"
                               " or pass scripts: [] to run none")
        return pinned
    refs = [r for r in requested if isinstance(r, str)]
    try:
        found, missing = await catalogue.resolve(conn, refs)
    except ValueError as exc:
        raise Refused(400, str(exc)) from None
    if missing:
        raise Refused(400, "unknown scripts: " + ", ".join(missing) + " (see GET /api/scripts or `waggle scripts list`)")
    by_ref = iter(found)
    pinned: list[dict] = []
    for item in requested:
        if isinstance(item, str):
            pinned.append(next(by_ref))
        else:
            try:
                pinned.append(catalogue.inline_script(item["name"], item["phase"], item["source"], item.get("options")))
            except ValueError as exc:
                raise Refused(400, str(exc)) from None
    ids = [f"{s['id']}@{s['version']}" for s in pinned]
    dupes = sorted({i for i in ids if ids.count(i) > 1})
    if dupes:
        raise Refused(400, "a script may be pinned once per crawl; repeated: " + ", ".join(dupes))
    return pinned


_ORG_LOCK = 0x7767_6F72  # "wgor": advisory lock namespace, one lock per organization


async def _within_org_limit(conn: AsyncConnection, org_id: str, max_running: int) -> None:
    """Raise :class:`Refused` 429 when ``org_id`` already has ``max_running`` running crawls.

    Takes the organization's advisory transaction lock first, so two starts for one
    organization (on any replica) count one after the other and never both slip under the limit.
    """
    await conn.execute("SELECT pg_advisory_xact_lock(%s, hashtext(%s))", (_ORG_LOCK, org_id))
    cur = await conn.execute(
        "SELECT count(*) AS n, min(started_at) AS oldest FROM crawls WHERE org_id = %s AND state = 'running'",
        (org_id,))
    row = await cur.fetchone()
    if row["n"] >= max_running:
        log.info("Running-crawl limit reached for %s (%d)", org_id, max_running)
        raise Refused(429, f"organization {org_id} already has {row['n']} running crawls, the most"
                           f" WAGGLE_MAX_RUNNING_CRAWLS_PER_ORG ({max_running}) allows; wait for one to finish"
                           " (waggle crawls) or raise the setting", running=row["n"], limit=max_running)


async def start_crawl(
    pool: Any, spec: CrawlSpec, *, subject: str, org_id: str, max_pages_limit: int, allow_private: bool,
    max_running: int = 4, workflow_id: uuid.UUID | None = None,
) -> tuple[dict, list[dict]]:
    """Create a running crawl and its level-0 pages; returns ``(crawl row, pages [{url, host}])``.

    Raises :class:`Refused`: 400 (no seeds / unusable seeds / unknown scripts / maxPages above
    ``WAGGLE_MAX_PAGES``), 429 ``{"error","running","limit"}`` when the organization already has
    ``max_running`` running crawls (``WAGGLE_MAX_RUNNING_CRAWLS_PER_ORG``). Other organizations'
    crawls, and this one's below the limit, run at the same time (issue 12). ``workflow_id``: the
    crawl is a run of that workflow (decision 201): 409 while another of its crawls is running or
    paused (``ledger.crawl.workflows.guard_idle``), and the crawl row names it.
    """
    async with pool.connection() as conn:
        async with conn.transaction():
            if workflow_id is not None:
                from ledger.crawl.workflows import guard_idle

                await guard_idle(conn, workflow_id)
            if spec.seeds is not None:
                raw = spec.seeds
                if not raw:
                    raise _seed_refusal("seeds must not be empty")
            else:
                raw = await _target_seeds(conn, org_id, spec.from_targets_limit)
                if not raw:
                    why = (f"no enabled capture targets for this organization ({org_id}):"
                           " add some with `waggle targets add --org`")
                    raise Refused(400, why, fields={"fromTargets": why})
            seeds = parse_seeds(raw, allow_private, "seeds" if spec.seeds is not None else "fromTargets")
            seeds = _first_of_each(seeds)
            if len(seeds) > max_pages_limit:
                raise Refused(400, f"{len(seeds)} seeds are more than WAGGLE_MAX_PAGES ({max_pages_limit}) allows"
                                   " in one crawl; send fewer (fromTargets: use limit)")
            try:  # the route checked them; a caller in-process (saved targets, tests) may not have
                scope_rules.Scope.build(seeds, spec.scope, spec.include, spec.exclude, spec.extra_hops)
            except scope_rules.InvalidPattern as exc:
                raise Refused(400, str(exc), fields={exc.field: str(exc)}) from None
            except ValueError as exc:
                raise Refused(400, str(exc), fields={"scope": str(exc)}) from None
            max_depth = spec.max_depth if spec.max_depth is not None else (2 if spec.seeds is not None else 0)
            max_pages = spec.max_pages if spec.max_pages is not None else min(max(30, len(seeds)), max_pages_limit)
            sitemaps.check_spec(spec.use_sitemap, spec.sitemap_lastmod_after, max_depth)
            pinned = await _resolve_scripts(conn, spec.scripts)
            await _within_org_limit(conn, org_id, max_running)
            crawl_id = uuid.uuid4()
            cur = await conn.execute(
                "INSERT INTO crawls (id, seeds, scope, max_depth, max_pages, per_host_delay_ms,"
                " host_parallelism, org_id, requested_by, scripts, capture_formats, scope_include, scope_exclude,"
                " extra_hops, time_limit_s, max_bytes, max_pages_per_host, ignore_robots_meta, signing, use_sitemap,"
                " sitemap_lastmod_after, group_hosts, delay_factor)"
                " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s::jsonb, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)"
                " RETURNING *",
                (crawl_id, [s.url for s in seeds], scope_rules.canonical(spec.scope), max_depth, max_pages,
                 spec.per_host_delay_ms, spec.host_parallelism, org_id, subject, json.dumps(pinned),
                 spec.formats, list(spec.include), list(spec.exclude), spec.extra_hops, spec.time_limit_s,
                 spec.max_bytes, spec.max_pages_per_host, spec.ignore_robots_meta, spec.signing, spec.use_sitemap,
                 spec.sitemap_lastmod_after, spec.group_hosts, spec.delay_factor),
            )
            crawl = await cur.fetchone()
            if workflow_id is not None:
                cur = await conn.execute("UPDATE crawls SET workflow_id = %s WHERE id = %s RETURNING *",
                                         (workflow_id, crawl_id))
                crawl = await cur.fetchone()
            landed = await frontier.insert_rows(conn, crawl_id, 0, seeds)  # exact dedup (migration 071)
            pages, placed = [], set()
            for seed in seeds:
                if seed.key in landed and seed.key not in placed:
                    placed.add(seed.key)
                    pages.append({"url": seed.url, "host": seed.host})
    log.info("Crawl started: %s by %s for %s, %d seed pages", crawl_id, subject, org_id, len(pages))
    return dict(crawl), pages


def crawl_view(crawl: dict, failures: list[dict]) -> dict:
    """``GET /api/crawls/{id}`` body (camelCase; scripts as identities, never source)."""
    job = {"id": crawl["last_job_id"], "depth": crawl["last_job_depth"]} if crawl["last_job_id"] else None
    return {
        "crawlId": str(crawl["id"]),
        "seeds": list(crawl["seeds"]),
        "scope": crawl["scope"],
        "include": list(crawl.get("scope_include") or []),
        "exclude": list(crawl.get("scope_exclude") or []),
        "extraHops": crawl.get("extra_hops") or 0,
        "timeLimitS": crawl.get("time_limit_s"),
        "maxBytes": crawl.get("max_bytes"),
        "maxPagesPerHost": crawl.get("max_pages_per_host"),
        **sitemaps.view(crawl),  # useSitemap, sitemapLastmodAfter, sitemap (what the sitemaps gave)
        "state": crawl["state"],
        "stopReason": crawl["stop_reason"],
        "workflowId": str(crawl["workflow_id"]) if crawl.get("workflow_id") else None,  # decision 201
        "pauseRequested": bool(crawl.get("pause_requested")),  # pausing: after the level in flight
        "pausedAt": iso_ms(crawl.get("paused_at")),
        "maxDepth": crawl["max_depth"],
        "maxPages": crawl["max_pages"],
        "perHostDelayMs": crawl["per_host_delay_ms"],
        "hostParallelism": crawl["host_parallelism"],
        "organization": crawl["org_id"],
        "requestedBy": crawl["requested_by"],
        "startedAt": iso_ms(crawl["started_at"]),
        "finishedAt": iso_ms(crawl["finished_at"]),
        "pagesDiscovered": crawl["pages_discovered"],
        "pagesCaptured": crawl["pages_captured"],
        "currentDepth": crawl["current_depth"],
        "levelState": crawl.get("level_state"),  # planned | waiting (hosts leased elsewhere) | dispatched
        "drops": crawl["drops"],
        "error": crawl["error"],
        "lastJob": job,
        "lastProgressAt": iso_ms(crawl["last_progress_at"]),
        "failures": failures,
        "scripts": [catalogue.identity(s) for s in crawl["scripts"]],
        "formats": None if crawl.get("capture_formats") is None else list(crawl["capture_formats"]),
        "ignoreRobotsMeta": bool(crawl.get("ignore_robots_meta")),  # noarchive / nofollow honoured unless true
        "signing": crawl.get("signing"),  # None: the deployment's WAGGLE_CAPTURE_SIGNING
        "groupHosts": crawl.get("group_hosts") or "address",  # politeness per server (decision 241)
        "delayFactor": float(crawl["delay_factor"]) if crawl.get("delay_factor") is not None else 5.0,
    }


async def get_crawl(pool: Any, crawl_id: uuid.UUID, orgs: list[str]) -> dict | None:
    """The crawl's view with its 5 newest failures (``[{url, depth, reason, failureClass}]``) and its
    ``workflow`` (``{workflowId, name}`` or null), or None;
    while it runs also ``levelProgress`` and ``waiting`` (why hosts wait: ledger.crawl.waits, which
    names another crawl only when it belongs to one of the caller's organizations ``orgs``)."""
    async with pool.connection() as conn:
        cur = await conn.execute("SELECT * FROM crawls WHERE id = %s", (crawl_id,))
        crawl = await cur.fetchone()
        if crawl is None:
            return None
        cur = await conn.execute(
            "SELECT url, depth, skip_reason AS reason, failure_class AS \"failureClass\" FROM crawl_pages"
            " WHERE crawl_id = %s AND state = 'failed'"
            " ORDER BY id DESC LIMIT 5",
            (crawl_id,),
        )
        failures = [dict(r) for r in await cur.fetchall()]
        workflow = None
        if crawl.get("workflow_id"):  # its name: a member of the crawl's organization may view it (model.fga)
            cur = await conn.execute("SELECT name FROM workflows WHERE id = %s", (crawl["workflow_id"],))
            named = await cur.fetchone()
            workflow = {"workflowId": str(crawl["workflow_id"]), "name": named["name"]} if named else None
        cur = await conn.execute(
            "SELECT state, count(*) AS n FROM crawl_pages WHERE crawl_id = %s GROUP BY state", (crawl_id,)
        )
        by_state = {r["state"]: r["n"] for r in await cur.fetchall()}
        problems = await archive_problems(conn, crawl_id)
        paused_hosts = await blocked.blocked_hosts(conn, crawl_id)  # decision 231
        shared = await servers.crawl_servers(conn, crawl)  # hosts that are one server (decision 241)
        hosts: list[str] = []
        if crawl["state"] == "running":
            # Hosts of the level in flight that still have pages to capture.
            cur = await conn.execute(
                "SELECT DISTINCT host FROM crawl_pages WHERE crawl_id = %s AND coalesce(level, depth) = %s"
                " AND state = 'pending'"
                " ORDER BY host",
                (crawl_id, crawl["current_depth"]),
            )
            hosts = [r["host"] for r in await cur.fetchall()]
            level = await level_progress(conn, crawl_id, crawl["current_depth"])
            cur = await conn.execute("SELECT clock_timestamp() AS now")
            waiting = await waits.waiting(conn, crawl, (await cur.fetchone())["now"], orgs)
    view = crawl_view(crawl, failures)
    view["workflow"] = workflow  # {workflowId, name} of the workflow that ran it, or null (decision 201)
    if crawl["state"] == "running":
        view["levelProgress"] = level
        view["waiting"] = waiting  # why hosts are not being captured now (ledger.crawl.waits)
    view["pagesFailed"] = by_state.get("failed", 0)
    view["pagesSkipped"] = by_state.get("skipped", 0)
    view["pagesPending"] = by_state.get("pending", 0)
    view["pagesBlocked"] = by_state.get("blocked", 0)
    view["blockedHosts"] = paused_hosts
    view["hostsInFlight"] = hosts
    view["servers"] = shared
    view.update(problems)
    return view


async def archive_problems(conn: Any, crawl_id: uuid.UUID, limit: int = 5) -> dict:
    """``{"archivesIncomplete": n, "archiveProblems": [{url, reason}]}`` (newest ``limit``): the
    crawl's archives whose WACZ failed the ledger's check (``archives.wacz_problem``) or that were
    captured at the page-load deadline (``incomplete_reason``, capture-server extension 14); a
    crawl's archives carry its id as correlation id."""
    cur = await conn.execute(
        "SELECT source_url AS url, wacz_problem, incomplete_reason, missing_body_urls, count(*) OVER () AS n"
        " FROM archives WHERE correlation_id = %s AND (wacz_problem IS NOT NULL OR incomplete_reason IS NOT NULL)"
        " ORDER BY id DESC LIMIT %s",
        (str(crawl_id), limit),
    )
    found = await cur.fetchall()
    return {"archivesIncomplete": found[0]["n"] if found else 0,
            "archiveProblems": [{"url": r["url"], "reason": _problem(r)} for r in found]}


def _problem(row: dict) -> str:
    """One archive's problem in words: the capture's incompleteness, then the WACZ check's."""
    parts = [capture_incomplete(row["incomplete_reason"], row["missing_body_urls"])] if row["incomplete_reason"] else []
    return "; ".join(parts + ([row["wacz_problem"]] if row["wacz_problem"] else []))


async def crawl_in_orgs(pool: Any, crawl_id: uuid.UUID, orgs: list[str]) -> bool:
    """True when crawl ``crawl_id`` exists and belongs to one of ``orgs``."""
    async with pool.connection() as conn:
        cur = await conn.execute("SELECT 1 FROM crawls WHERE id = %s AND org_id = ANY(%s)", (crawl_id, list(orgs)))
        return await cur.fetchone() is not None


async def list_crawls(pool: Any, limit: int = 20, *, orgs: list[str] | None = None,
                      id_prefix: str | None = None) -> list[dict]:
    """Every running crawl, then the most recently started others up to ``limit`` in all
    (summaries, newest first in each group; several crawls run at once, issue 12): ``crawlId,
    seeds, state, stopReason, startedAt, finishedAt, pagesDiscovered, pagesCaptured,
    organization, requestedBy, error, currentDepth, levelState, maxDepth, maxPages`` and
    ``pagesFailed, pagesSkipped, pagesPending, pagesBlocked`` (crawl_pages counts by state) and
    ``hostsBlocked`` (hosts paused as blocking the crawler, decision 231). ``orgs`` (None =
    every organization) keeps only the crawls of those organizations; ``id_prefix`` (lower-case
    hex digits and dashes, checked by the route) only those whose id starts with it."""
    visible = "(%(all)s OR org_id = ANY(%(orgs)s)) AND (%(prefix)s::text IS NULL OR id::text LIKE %(prefix)s || '%%')"
    async with pool.connection() as conn:
        cur = await conn.execute(
            f"SELECT * FROM ((SELECT * FROM crawls WHERE state = 'running' AND {visible})"
            f" UNION ALL (SELECT * FROM crawls WHERE state <> 'running' AND {visible}"
            " ORDER BY started_at DESC LIMIT %(limit)s)) c"
            " ORDER BY (c.state = 'running') DESC, c.started_at DESC",
            {"all": orgs is None, "orgs": list(orgs or []), "limit": limit, "prefix": id_prefix})
        rows = await cur.fetchall()
        running = sum(1 for r in rows if r["state"] == "running")
        rows = rows[:max(limit, running)]
        cur = await conn.execute(
            "SELECT crawl_id, state, count(*) AS n FROM crawl_pages WHERE crawl_id = ANY(%s) GROUP BY 1, 2",
            ([r["id"] for r in rows],))
        counts: dict[tuple[Any, str], int] = {(c["crawl_id"], c["state"]): c["n"] for c in await cur.fetchall()}
        cur = await conn.execute("SELECT crawl_id, count(*) AS n FROM crawl_blocked_hosts WHERE crawl_id = ANY(%s)"
                                 " GROUP BY 1", ([r["id"] for r in rows],))
        hosts_blocked = {c["crawl_id"]: c["n"] for c in await cur.fetchall()}  # decision 231
    keys = ("crawlId", "seeds", "state", "stopReason", "startedAt", "finishedAt", "pagesDiscovered",
            "pagesCaptured", "organization", "requestedBy", "error", "currentDepth", "levelState", "maxDepth",
            "maxPages")
    out = []
    for r in rows:
        item = {k: v for k, v in crawl_view(r, []).items() if k in keys}
        for state, key in (("failed", "pagesFailed"), ("skipped", "pagesSkipped"), ("pending", "pagesPending"),
                           ("blocked", "pagesBlocked")):
            item[key] = counts.get((r["id"], state), 0)
        item["hostsBlocked"] = hosts_blocked.get(r["id"], 0)
        out.append(item)
    return out


CLOSED_BEFORE_CAPTURE = salvage.CLOSED_BEFORE_CAPTURE  # also imported from here


@dataclass
class Closed:
    """A crawl :func:`close_failed` closed: its last Windmill job id (``""`` when none), the level
    in flight, and the tasks of the pages it recorded as captured from their progress events (to
    admit)."""

    job: str
    depth: int
    tasks: list[str]
    sealed: list[str] = field(default_factory=list)  # sealed captures to await (salvage.await_sealed)


async def close_failed(pool: Any, crawl_id: uuid.UUID, reason: str | None, bucket: str | None = None) -> Closed | None:
    """Close a *running* crawl as failed (``POST /api/crawls/{id}/failed``): its pending pages
    whose capture a progress event reported become ``captured`` (``ledger.crawl.salvage``; their
    manifests in ``bucket``), the others ``skipped`` (:data:`CLOSED_BEFORE_CAPTURE`). Returns
    :class:`Closed` when it was closed, None when it was not running."""
    tasks: list[str] = []
    sealed: list[str] = []
    async with pool.connection() as conn, conn.transaction():
        cur = await conn.execute(
            "UPDATE crawls SET state = 'failed', stop_reason = 'failed', finished_at = now(), error = %s"
            " WHERE id = %s AND state = 'running' RETURNING *",
            (reason or FLOW_FAILED_WITHOUT_REASON, crawl_id),
        )
        row = await cur.fetchone()
        if row is not None:
            tasks = await salvage.record_captures(conn, row, bucket)
            sealed = await salvage.record_sealed(conn, row, bucket)
            await conn.execute(
                "UPDATE crawl_pages SET state = 'skipped', skip_reason = %s WHERE crawl_id = %s AND state = 'pending'",
                (CLOSED_BEFORE_CAPTURE, crawl_id))
    if row is not None:
        log.warning("Crawl failed on request: %s: %s", crawl_id, (reason or FLOW_FAILED_WITHOUT_REASON)[:200])
        return Closed(row["last_job_id"] or "", row["current_depth"], tasks, sealed)
    log.info("Nothing to close: %s", crawl_id)
    return None
