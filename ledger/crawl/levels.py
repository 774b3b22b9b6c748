"""The level report (``POST /api/crawls/{id}/pages``): reference/ledger.md §7.3, in one
transaction, plus waggle's ordering rules:

* an identical re-send of an accepted report returns the stored answer (safe retry);
* a different report for a recorded depth, a report for a depth other than the level in
  flight, or a report for a crawl that is not running → 409, nothing changes.

The next level is dispatched by the caller after commit (``LevelOutcome.dispatch``).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import uuid
from collections import Counter
from dataclasses import dataclass
from typing import Any

from ledger.archive.admission import admit_level
from ledger.crawl import hosts, leases
from ledger.crawl.budget import plan_next_level
from ledger.crawl.errors import Refused
from ledger.crawl import redirects, shape_store
from ledger.crawl.guard import refusal
from ledger.crawl.param_traps import QUERY_VARIANTS_DEFAULT, WALK_LEVELS_DEFAULT
from ledger.crawl.scope import accept_links
from ledger.crawl.scripts import CompiledMismatch, merge_compiled
from ledger.crawl.urls import InvalidUrl, ParsedUrl, parse_http_url

log = logging.getLogger(__name__)

LINKS_MAX_BYTES_DEFAULT = 8 * 1024 * 1024
LINKS_READ_CONCURRENCY = 8


@dataclass
class LevelOutcome:
    status: int
    answer: dict
    dispatch: tuple[dict, int, list[dict]] | None = None  # (crawl row, depth, pages) to send


def report_hash(report: dict) -> str:
    """SHA-256 hex of the report's canonical JSON (sorted keys, no spaces)."""
    canonical = json.dumps(report, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def manifest_outcome(result: dict, bucket: str | None) -> tuple[str | None, str | None]:
    """``(manifest_key, manifest_error)`` for a result with a taskId (ledger.md §9.2); the rule
    itself is ``ledger.archive.manifest.manifest_key`` (one place for fast path and ledger)."""
    from ledger.archive.manifest import manifest_key

    return manifest_key(result.get("manifestLocation"), result.get("manifestError"), bucket or "")


def links_key(location: str) -> str | None:
    """The key of a ``linksLocation`` (``s3://<any bucket>/key`` or a bare key); the bucket
    named in the report is ignored — links are read from the configured bucket."""
    if location.startswith("s3://"):
        _, sep, key = location[5:].partition("/")
        return key if sep and key else None
    return location or None


async def _read_links(s3: Any, key: str, max_bytes: int) -> list | None:
    """The ``links`` array of one ``.links.json``; None (logged) when missing, huge or malformed.

    Raises :class:`Refused` 503 when the store does not answer (the report changes nothing and
    may be retried).
    """
    from ledger.s3 import ObjectTooLarge, S3Unavailable

    try:
        doc = await s3.get_json(key, max_bytes)
    except S3Unavailable as exc:
        log.error("links unreadable, store unavailable: %s", exc)
        raise Refused(503, "the artifact store did not answer while reading discovered links;"
                           " nothing was recorded — retry the report") from None
    except ObjectTooLarge:
        log.warning("links file skipped: larger than %d bytes: %s", max_bytes, key)
        return None
    except ValueError as exc:
        log.warning("links file skipped: not JSON: %s (%s)", key, exc.__class__.__name__)
        return None
    if doc is None:
        log.info("links file not found, skipped: %s", key)
        return None
    if not isinstance(doc, dict) or not isinstance(doc.get("links"), list):
        log.warning("links file skipped: not an object with a links array: %s", key)
        return None
    return doc["links"]


async def _admit(conn: Any, services: Any, crawl: dict, results: list[dict]) -> set[int]:
    """Archive admission hook (issue #3, ``ledger.archive.admission.admit_level``): indices of
    results the manifests show as captured although reported otherwise."""
    if services.s3 is None:
        return set()
    admission = await admit_level(
        conn,
        services.s3,
        bucket=services.settings.s3_bucket,
        org_id=crawl["org_id"],
        submitted_by=crawl["requested_by"],
        results=results,
        wacz_hash_max_bytes=getattr(services.settings, "wacz_hash_max_bytes", 64 * 1024 * 1024),
    )
    return set(getattr(admission, "recovered", set()) or set())


def _sha256(key: str) -> bytes:
    """``crawl_pages.url_hash`` of a dedup key: SHA-256 of its UTF-8 bytes (the column is
    ``waggle_sha256(url_key)``, migration 001); computed here so lookups use the index directly."""
    return hashlib.sha256(key.encode("utf-8")).digest()


def _url_hash(url: str) -> bytes | None:
    """The ``url_hash`` of a reported page URL, or None when it does not parse."""
    try:
        return _sha256(parse_http_url(url).key)
    except InvalidUrl:
        return None


async def _read_all_links(services: Any, results: list[dict]) -> list:
    """Every result's ``.links.json`` items, concatenated in result order; files are read
    concurrently (≤ ``LINKS_READ_CONCURRENCY``). Raises :class:`Refused` 503 when the store does
    not answer (no later file is started then)."""
    if services.s3 is None:
        return []
    max_bytes = getattr(services.settings, "links_max_bytes", LINKS_MAX_BYTES_DEFAULT)
    keys = [links_key(r.get("linksLocation") or "") for r in results]
    gate = asyncio.Semaphore(LINKS_READ_CONCURRENCY)
    failed = asyncio.Event()

    async def read(key: str) -> list | None:
        async with gate:
            if failed.is_set():
                return None
            try:
                return await _read_links(services.s3, key, max_bytes)
            except Refused:
                failed.set()
                raise

    found = await asyncio.gather(*(read(k) for k in keys if k), return_exceptions=True)
    links: list = []
    for item in found:
        if isinstance(item, BaseException):
            raise item
        links.extend(item or [])
    return links


# PageResult keys stored per page, in the order of _close_reported's unnest columns after url_hash
_PAGE_COLUMNS = ("status", "skipReason", "taskId", "correlationId", "submittedAt", "finishedAt", "gapFrom",
                 "failureClass")


async def _close_reported(conn: Any, crawl_id: Any, depth: int, results: list[dict],
                          hashes: list[bytes | None]) -> set[bytes]:
    """Step 1 in one statement: set state, skip reason, task/correlation ids and times of the
    rows of level ``depth`` named by ``results``. Two results for one page: the later one wins
    (as if applied in order). Returns the ``url_hash`` of every row that matched."""
    last: dict[bytes, dict] = {}
    for r, h in zip(results, hashes):
        if h is not None:
            last[h] = r
    if not last:
        return set()
    rows = list(last.items())
    cur = await conn.execute(
        "UPDATE crawl_pages p SET state = v.state, skip_reason = v.skip_reason, task_id = v.task_id,"
        " correlation_id = v.correlation_id, submitted_at = v.submitted_at, finished_at = v.finished_at,"
        " gap_from = v.gap_from, failure_class = v.failure_class"
        " FROM unnest(%s::bytea[], %s::text[], %s::text[], %s::text[], %s::text[], %s::timestamptz[],"
        " %s::timestamptz[], %s::timestamptz[], %s::text[])"
        " AS v(url_hash, state, skip_reason, task_id, correlation_id, submitted_at, finished_at, gap_from, failure_class)"
        " WHERE p.crawl_id = %s AND coalesce(p.level, p.depth) = %s AND p.url_hash = v.url_hash RETURNING p.url_hash",
        ([h for h, _ in rows], *[[r.get(k) for _, r in rows] for k in _PAGE_COLUMNS], crawl_id, depth),
    )
    return {bytes(r["url_hash"]) for r in await cur.fetchall()}


async def _attribute(conn: Any, crawl: dict, results: list[dict], bucket: str | None) -> None:
    """Step 2 in one statement: a ``capture_submissions`` row for every result with a taskId
    (``ON CONFLICT (task_id) DO NOTHING``; within one report the first result of a task wins)."""
    rows: dict[uuid.UUID, tuple] = {}
    for r in results:
        if not r.get("taskId"):
            continue
        task = uuid.UUID(r["taskId"])
        if task in rows:
            continue
        manifest_key, manifest_error = manifest_outcome(r, bucket)
        rows[task] = (str(task), r.get("correlationId") or str(crawl["id"]), manifest_key, manifest_error)
    if not rows:
        return
    cols = list(zip(*rows.values()))
    await conn.execute(
        "INSERT INTO capture_submissions (task_id, correlation_id, org_id, submitted_by, manifest_key, manifest_error)"
        " SELECT v.task_id, v.correlation_id, %s, %s, v.manifest_key, v.manifest_error"
        " FROM unnest(%s::uuid[], %s::text[], %s::text[], %s::text[]) AS v(task_id, correlation_id, manifest_key, manifest_error)"
        " ON CONFLICT (task_id) DO NOTHING",
        (crawl["org_id"], crawl["requested_by"], *[list(c) for c in cols]),
    )


async def _plan_and_insert(conn: Any, crawl: dict, next_depth: int, candidates: list[ParsedUrl],
                           max_pages_per_host: int | None, settings: Any = None) -> tuple[Any, list[dict]]:
    """Steps 6–7: plan the next level (``plan_next_level``: depth limit, traps, page budget)
    over the candidates the crawl does not hold yet, insert it, and return ``(plan, inserted)``
    with ``inserted`` = ``[{url, host}]`` of the rows that landed, in discovery order.

    Three ways to the same outcome, chosen by cost:
    * no level may follow (``max_depth``): nothing is looked up or inserted;
    * every candidate fits the page budget: the candidates are inserted first (``ON CONFLICT DO
      NOTHING`` — the unique index tells which were new in the same pass), planned over the rows
      that landed, and the few the plan screens out (traps, per-host cap) deleted again, all in
      this transaction (no separate lookup of 100,000 keys);
    * otherwise (the budget may cut): the known ones are looked up, the plan made, its URLs inserted.
    """
    if max_pages_per_host:  # the per-host cap needs counts per host; otherwise one total will do
        cur = await conn.execute(
            "SELECT host, count(*) AS n FROM crawl_pages WHERE crawl_id = %s GROUP BY host", (crawl["id"],)
        )
        per_host = {r["host"]: r["n"] for r in await cur.fetchall()}
        known = sum(per_host.values())
    else:
        cur = await conn.execute("SELECT count(*) AS n FROM crawl_pages WHERE crawl_id = %s", (crawl["id"],))
        per_host, known = {}, (await cur.fetchone())["n"]

    counts = None  # the query-parameter trap rules' counts (ledger.crawl.param_traps), read before inserting

    def plan_over(new: list[ParsedUrl]) -> Any:
        return plan_next_level(new, next_depth=next_depth, max_depth=crawl["max_depth"],
                               max_pages=crawl["max_pages"], known=known, known_per_host=per_host,
                               max_pages_per_host=max_pages_per_host, shape_counts=counts)

    if next_depth > crawl["max_depth"] or not candidates:
        return plan_over([]), []
    counts = await shape_store.load(conn, crawl["id"], [c.key for c in candidates], next_depth=next_depth,
                                    walk_levels=getattr(settings, "trap_walk_levels", WALK_LEVELS_DEFAULT),
                                    query_variants=getattr(settings, "trap_query_variants", QUERY_VARIANTS_DEFAULT))
    hashes = [_sha256(c.key) for c in candidates]
    if len(candidates) <= crawl["max_pages"] - known:
        landed = await _insert_rows(conn, crawl["id"], next_depth, candidates)
        new = [(c, h) for c, h in zip(candidates, hashes) if h in landed]
        plan = plan_over([c for c, _ in new])
        if len(plan.urls) < len(new):
            keep = {p.key for p in plan.urls}
            await conn.execute(
                "DELETE FROM crawl_pages WHERE crawl_id = %s AND depth = %s AND url_hash = ANY(%s::bytea[])",
                (crawl["id"], next_depth, [h for c, h in new if c.key not in keep]),
            )
        await shape_store.save(conn, crawl["id"], [p.key for p in plan.urls], depth=next_depth)
        return plan, [{"url": p.url, "host": p.host} for p in plan.urls]
    cur = await conn.execute(
        "SELECT url_hash FROM crawl_pages WHERE crawl_id = %s AND url_hash = ANY(%s::bytea[])",
        (crawl["id"], hashes),
    )
    known_hashes = {bytes(r["url_hash"]) for r in await cur.fetchall()}
    plan = plan_over([c for c, h in zip(candidates, hashes) if h not in known_hashes])
    if not plan.urls:
        return plan, []
    landed = await _insert_rows(conn, crawl["id"], next_depth, plan.urls)
    await shape_store.save(conn, crawl["id"], [p.key for p in plan.urls], depth=next_depth)
    return plan, [{"url": p.url, "host": p.host} for p in plan.urls if _sha256(p.key) in landed]


async def _insert_rows(conn: Any, crawl_id: Any, depth: int, urls: list[ParsedUrl]) -> set[bytes]:
    """Insert ``urls`` as pending pages of ``depth`` in one statement, ``ON CONFLICT (crawl_id,
    url_hash) DO NOTHING``; returns the ``url_hash`` of the rows that landed."""
    cur = await conn.execute(
        "INSERT INTO crawl_pages (crawl_id, url, url_key, depth, host)"
        " SELECT %s, u.url, u.url_key, %s, u.host"
        " FROM unnest(%s::text[], %s::text[], %s::text[]) AS u(url, url_key, host)"
        " ON CONFLICT (crawl_id, url_hash) DO NOTHING RETURNING url_hash",
        (crawl_id, depth, [p.url for p in urls], [p.key for p in urls], [p.host for p in urls]),
    )
    return {bytes(r["url_hash"]) for r in await cur.fetchall()}


async def _level_done(conn: Any, crawl: dict, depth: int, results: list[dict], inserted: list[dict]) -> list[dict]:
    """Record the reported hosts' last captures (``ledger.crawl.hosts``), end this level's host
    leases, and return the next level: pages carried to ``depth + 1`` earlier (hosts leased
    elsewhere, ``ledger.crawl.leases``) first, then ``inserted``."""
    await hosts.record_captures(conn, crawl, results)
    await conn.execute("DELETE FROM host_leases WHERE crawl_id = %s AND depth = %s", (crawl["id"], depth))
    return await leases.carried_pages(conn, crawl["id"], depth + 1, inserted) + inserted


async def record_level(services: Any, crawl_id: Any, report: dict) -> LevelOutcome:
    """Apply one level report (camelCase dict as validated) to crawl ``crawl_id``.

    Returns the answer ``{"next": [{url, host, depth}], "stopReason"}``. Raises
    :class:`Refused`: 404 unknown crawl; 409 order/duplicate rules; 400/409 ``compiled``
    mismatch (``{"error", "scriptId"}``); 503 store unavailable; 500 unusable stored seed.
    """
    settings = services.settings
    digest = report_hash(report)
    depth: int = report["depth"]
    results: list[dict] = report["results"]
    async with services.pool.connection() as conn:
        async with conn.transaction():
            cur = await conn.execute("SELECT * FROM crawls WHERE id = %s FOR UPDATE", (crawl_id,))
            crawl = await cur.fetchone()
            if crawl is None:
                raise Refused(404, "not found")
            cur = await conn.execute(
                "SELECT report_sha256, answer FROM crawl_level_reports WHERE crawl_id = %s AND depth = %s",
                (crawl_id, depth),
            )
            recorded = await cur.fetchone()
            if recorded is not None:
                if recorded["report_sha256"] == digest:
                    log.info("Level report re-sent; answering as before: crawl %s depth %d", crawl_id, depth)
                    return LevelOutcome(200, recorded["answer"])
                raise Refused(409, f"a different report for depth {depth} was already accepted;"
                                   " nothing was changed", depth=depth)
            if crawl["state"] != "running":
                raise Refused(409, f"the crawl is {crawl['state']}; it accepts no level reports",
                              state=crawl["state"])
            if depth != crawl["current_depth"]:
                raise Refused(409, f"the crawl is waiting for the report of depth {crawl['current_depth']},"
                                   f" not {depth}", expectedDepth=crawl["current_depth"])
            try:
                seeds = [parse_http_url(s) for s in crawl["seeds"]]
            except InvalidUrl:
                raise Refused(500, "a crawl seed is not a usable url") from None
            try:
                merged = merge_compiled(crawl["scripts"], report["compiled"])
            except CompiledMismatch as exc:
                raise Refused(exc.status, exc.message, scriptId=exc.script_id) from None

            hashes = [_url_hash(r["url"]) for r in results]
            # 1. close the reported rows of this level (matched by dedup key); a result that
            # matches no page of this level is ignored and not counted
            matched = await _close_reported(conn, crawl_id, depth, results, hashes)
            await redirects.record(conn, crawl_id, depth, results, hashes)  # finalUrl: known from now on
            captured = sum(1 for r, h in zip(results, hashes) if h in matched and r["status"] == "captured")
            # 2. attribution: every result with a taskId, whatever its status
            await _attribute(conn, crawl, results, settings.s3_bucket)
            # 3. archive admission; recover pages whose manifest shows a capture
            recover = [i for i in sorted(await _admit(conn, services, crawl, results))
                       if 0 <= i < len(results) and results[i]["status"] != "captured" and hashes[i] is not None]
            recovered = 0
            if recover:
                cur = await conn.execute(
                    "UPDATE crawl_pages SET state = 'captured', skip_reason = NULL, failure_class = NULL"
                    " WHERE crawl_id = %s AND coalesce(level, depth) = %s AND url_hash = ANY(%s::bytea[])"
                    " RETURNING url_hash",
                    (crawl_id, depth, [hashes[i] for i in recover]),
                )
                landed = {bytes(r["url_hash"]) for r in await cur.fetchall()}
                recovered = sum(1 for i in recover if hashes[i] in landed)
            if recovered:
                log.info("recovered captures the flow could not see: crawl %s depth %d: %d",
                         crawl_id, depth, recovered)
            # 4.–7. per link distance of the reported pages, shallowest first: one group (this
            # depth) unless the level captured pages carried from an earlier level (issue 12)
            sources = await leases.source_depths(conn, crawl_id, depth, hashes)
            plan, inserted, discovered, drops = None, [], 0, Counter()
            for src in sorted(set(sources)) or [depth]:
                group = [r for r, s in zip(results, sources) if s == src]
                # 4. discovered links, read concurrently, kept in result order
                links = await _read_all_links(services, group)
                # 5. scope, nofollow, in-call dedup; the private-host guard (its verdict depends on
                # the host name only, so it is asked once per host)
                accepted = accept_links(links, seeds, crawl["scope"])
                drops.update(accepted.drops)
                drops.pop("duplicate", None)  # in-call duplicates are the same page, not a drop
                discovered += len(accepted.urls)
                candidates: list[ParsedUrl] = []
                verdicts: dict[str, str | None] = {}
                for p in accepted.urls:
                    if p.host not in verdicts:
                        verdicts[p.host] = refusal(p.url, settings.allow_private_hosts)
                    if verdicts[p.host]:
                        drops["private_host"] += 1
                    else:
                        candidates.append(p)
                # 6.–7. budget over links not yet known to the crawl (nor the final URL of a redirected
                # page), then the next level through the unique index (see _plan_and_insert)
                candidates = await redirects.drop_known_finals(conn, crawl_id, candidates)
                part, landed = await _plan_and_insert(conn, crawl, src + 1, candidates, settings.max_pages_per_host,
                                                      settings)
                drops.update(part.drops)
                if src < depth:  # found on carried pages: shallower than the next level, captured in it
                    await leases.lift(conn, crawl_id, [_url_hash(x["url"]) for x in landed], depth + 1)
                plan = part if plan is None or part.stop_reason else plan
                inserted += landed
            # issue 12: the hosts' last captures (shared by every crawl), this level's leases end,
            # and pages carried from hosts leased elsewhere join the next level
            inserted = await _level_done(conn, crawl, depth, results, inserted)
            # 8. counters and closing
            captured += recovered
            done = not inserted
            reason = plan.stop_reason or ("completed" if done else None)
            total_drops = Counter({k: int(v) for k, v in (crawl["drops"] or {}).items()})
            total_drops.update({k: v for k, v in drops.items() if v})
            await conn.execute(
                "UPDATE crawls SET pages_captured = pages_captured + %s, pages_discovered = pages_discovered + %s,"
                " stop_reason = COALESCE(stop_reason, %s), drops = %s::jsonb, last_progress_at = now(),"
                " scripts = %s::jsonb, current_depth = %s, level_state = 'planned', level_since = now(),"
                " state = CASE WHEN %s THEN 'succeeded' ELSE state END,"
                " finished_at = CASE WHEN %s THEN now() ELSE finished_at END"
                " WHERE id = %s",
                (captured, discovered, reason, json.dumps(dict(total_drops)),
                 json.dumps(merged.scripts), depth if done else depth + 1, done, done, crawl_id),
            )
            answer = {
                "next": [{"url": p["url"], "host": p["host"], "depth": depth + 1} for p in inserted],
                "stopReason": reason if done else None,
            }
            await conn.execute(
                "INSERT INTO crawl_level_reports (crawl_id, depth, report_sha256, answer) VALUES (%s, %s, %s, %s::jsonb)",
                (crawl_id, depth, digest, json.dumps(answer)),
            )
    log.info("Crawl level recorded: crawl %s depth %d: %d results, %d captured, next %d%s", crawl_id, depth,
             len(results), captured, len(inserted), f" (stopped: {reason})" if done else "")
    crawl = dict(crawl)
    crawl["scripts"] = merged.scripts
    return LevelOutcome(200, answer, None if done else (crawl, depth + 1, inserted))
