"""The level report (``POST /api/crawls/{id}/pages``): reference/ledger.md §7.3, in one
transaction, plus waggle's ordering rules:

* an identical re-send of an accepted report returns the stored answer (safe retry);
* a different report for a recorded depth, a report for a depth other than the level in
  flight, or a report for a crawl that is not running → 409, nothing changes.

The next level is dispatched by the caller after commit (``LevelOutcome.dispatch``), and
archive admission runs after the answer too (``LevelOutcome.verify`` →
``ledger.archive.verify.verify_level``): the report reads S3 only for results of the old shape
(``linksLocation`` without inline ``links``, docs/internals.md "Level report v2").
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
from collections import Counter
from dataclasses import dataclass
from typing import Any

import orjson

from ledger.crawl import blocked, frontier, hosts, leases, link_counts
from ledger.crawl.attribution import attribute_tasks
from ledger.crawl.budget import plan_next_level
from ledger.crawl.errors import Refused
from ledger.crawl import outcome, redirects, report_early, robots_cache, shape_store, sitemaps
from ledger.crawl.guard import refusal
from ledger.crawl.param_traps import PATH_WALK_LEVELS_DEFAULT, QUERY_VARIANTS_DEFAULT, WALK_LEVELS_DEFAULT
from ledger.crawl.report_gc import paused_gc
from ledger.crawl.report_links import discovered_links
from ledger.crawl.scope import InvalidPattern, LinkFilter, Scope
from ledger.crawl.scripts import CompiledMismatch, merge_compiled
from ledger.crawl.traps import trap_reason
from ledger.crawl.urls import InvalidUrl, ParsedUrl, parse_http_url

log = logging.getLogger(__name__)

LINKS_MAX_BYTES_DEFAULT = 8 * 1024 * 1024
LINKS_READ_CONCURRENCY = 8
# links per chunk of the streamed frontier insert: small enough that Postgres starts soon,
# large enough that a statement's fixed cost stays small (≈ 9,000 rows each at 100,000 links)
STREAM_CHUNK_LINKS = 10_000


@dataclass
class LevelOutcome:
    status: int
    answer: dict
    dispatch: tuple[dict, int, list[dict]] | None = None  # (crawl row, depth, pages) to send
    # after the answer: (depth, task ids reported failed, task ids to admit) for
    # ledger.archive.verify.verify_level (admission reads S3 off the report's critical path)
    verify: tuple[int, set[str], list[str]] | None = None
    body: bytes | None = None  # ``answer`` as JSON when it was just serialized (stored and sent as is)


def report_hash(report: dict) -> str:
    """SHA-256 hex of the report's canonical JSON (sorted keys, no spaces, UTF-8 unescaped):
    the bytes of ``json.dumps(report, sort_keys=True, separators=(",", ":"),
    ensure_ascii=False)``, written by orjson (9× faster on a 9 MB report; a test keeps them equal)."""
    try:
        canonical = orjson.dumps(report, option=orjson.OPT_SORT_KEYS)
    except orjson.JSONEncodeError:  # an integer beyond 64 bits (orjson's limit): the slow way
        canonical = json.dumps(report, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    return hashlib.sha256(canonical).hexdigest()



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


def _sha256(key: str) -> bytes:
    """``crawl_pages.url_hash`` of a dedup key: SHA-256 of its UTF-8 bytes (the column is
    ``waggle_sha256(url_key)``, migration 001); computed here so lookups use the index directly."""
    return hashlib.sha256(key.encode("utf-8")).digest()


def _url_key(url: str) -> str | None:
    """The dedup key of a reported page URL, or None when it does not parse."""
    try:
        return parse_http_url(url).key
    except InvalidUrl:
        return None


def _url_hash(url: str) -> bytes | None:
    """The ``url_hash`` of a reported page URL, or None when it does not parse."""
    try:
        return _sha256(parse_http_url(url).key)
    except InvalidUrl:
        return None


async def _read_all_links(services: Any, results: list[dict]) -> list[list]:
    """Each result's ``.links.json`` items (one list per result, in order; empty when skipped);
    files are read concurrently (≤ ``LINKS_READ_CONCURRENCY``). Raises :class:`Refused` 503 when
    the store does not answer (no later file is started then)."""
    if services.s3 is None:
        return [[] for _ in results]
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

    async def none() -> None:
        return None

    found = await asyncio.gather(*(read(k) if k else none() for k in keys), return_exceptions=True)
    for item in found:
        if isinstance(item, BaseException):
            raise item
    return [item or [] for item in found]


# PageResult keys stored per page, in the order of _close_reported's unnest columns after url_hash
_PAGE_COLUMNS = ("status", "skipReason", "taskId", "correlationId", "submittedAt", "finishedAt", "gapFrom",
                 "failureClass", "waitMs")


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
        " gap_from = v.gap_from, failure_class = v.failure_class, wait_ms = v.wait_ms"
        " FROM unnest(%s::bytea[], %s::text[], %s::text[], %s::text[], %s::text[], %s::timestamptz[],"
        " %s::timestamptz[], %s::timestamptz[], %s::text[], %s::int[])"
        " AS v(url_hash, state, skip_reason, task_id, correlation_id, submitted_at, finished_at, gap_from, failure_class,"
        " wait_ms)"
        " WHERE p.crawl_id = %s AND coalesce(p.level, p.depth) = %s AND p.url_hash = v.url_hash RETURNING p.url_hash",
        ([h for h, _ in rows], *[[r.get(k) for _, r in rows] for k in _PAGE_COLUMNS], crawl_id, depth),
    )
    return {bytes(r["url_hash"]) for r in await cur.fetchall()}



async def _known(conn: Any, crawl: dict, max_pages_per_host: int | None) -> tuple[int, dict[str, int]]:
    """``(pages the crawl holds, {host: pages})``; the per-host counts only when the per-host
    cap needs them (otherwise one total will do)."""
    if max_pages_per_host:
        cur = await conn.execute(
            "SELECT host, count(*) AS n FROM crawl_pages WHERE crawl_id = %s GROUP BY host", (crawl["id"],)
        )
        per_host = {r["host"]: r["n"] for r in await cur.fetchall()}
        return sum(per_host.values()), per_host
    cur = await conn.execute("SELECT count(*) AS n FROM crawl_pages WHERE crawl_id = %s", (crawl["id"],))
    return (await cur.fetchone())["n"], {}


def _planner(crawl: dict, next_depth: int, known: int, per_host: dict[str, int], max_pages_per_host: int | None,
             counts: Any, reasons: dict[str, str | None] | None = None) -> Any:
    def plan_over(new: list[ParsedUrl]) -> Any:
        return plan_next_level(new, next_depth=next_depth, max_depth=crawl["max_depth"],
                               max_pages=crawl["max_pages"], known=known, known_per_host=per_host,
                               max_pages_per_host=max_pages_per_host, shape_counts=counts, trap_reasons=reasons)
    return plan_over


async def _load_shapes(conn: Any, crawl: dict, keys: list[str], next_depth: int, settings: Any,
                       held_up_to: int | None = None) -> Any:
    return await shape_store.load(conn, crawl["id"], keys, next_depth=next_depth,
                                  walk_levels=getattr(settings, "trap_walk_levels", WALK_LEVELS_DEFAULT),
                                  query_variants=getattr(settings, "trap_query_variants", QUERY_VARIANTS_DEFAULT),
                                  held_up_to=held_up_to,
                                  path_walk_levels=getattr(settings, "trap_path_walk_levels", PATH_WALK_LEVELS_DEFAULT))


async def _plan_and_insert(conn: Any, crawl: dict, next_depth: int, candidates: list[ParsedUrl],
                           max_pages_per_host: int | None, settings: Any = None,
                           held: tuple[int, dict[str, int]] | None = None) -> tuple[Any, list[dict]]:
    """Steps 6–7: plan the next level (``plan_next_level``: depth limit, traps, page budget)
    over the candidates the crawl does not hold yet, insert it, and return ``(plan, inserted)``
    with ``inserted`` = ``[{url, host}]`` of the rows that landed, in discovery order.
    ``held``: :func:`_known` when the caller read it already.

    Three ways to the same outcome, chosen by cost (a fourth, :func:`_stream_plan_and_insert`,
    is the first of these with the insert overlapping the scope):
    * no level may follow (``max_depth``): nothing is looked up or inserted;
    * every candidate fits the page budget: ``ledger.crawl.frontier.insert_then_screen`` (insert
      first — the unique index tells which were new — plan over the rows that landed, delete
      the few the plan screens out, all in this transaction);
    * otherwise (the budget may cut): the known ones are looked up, the plan made, its URLs inserted.
    """
    known, per_host = held or await _known(conn, crawl, max_pages_per_host)
    if next_depth > crawl["max_depth"] or not candidates:
        link_counts.note_all(candidates, "max_depth", [])  # no level follows: known or not, not looked up
        return _planner(crawl, next_depth, known, per_host, max_pages_per_host, None)([]), []
    # the query-parameter trap rules' counts (ledger.crawl.param_traps), read before inserting
    counts = await _load_shapes(conn, crawl, [c.key for c in candidates], next_depth, settings)
    plan_over = _planner(crawl, next_depth, known, per_host, max_pages_per_host, counts)
    if len(candidates) <= crawl["max_pages"] - known:
        plan, urls = await frontier.insert_then_screen(conn, crawl, next_depth, candidates, plan_over)
        await shape_store.save(conn, crawl["id"], [p.key for p in plan.urls], depth=next_depth)
        return plan, [{"url": p.url, "host": p.host} for p in urls]
    # known = held under the key's first hash (a key held further along its probe chain is
    # found by the insert, which then does not land it)
    held_now = await frontier.held_keys(conn, crawl["id"], [frontier.url_hash(c.key) for c in candidates])
    known_keys = set(held_now.values())
    plan = plan_over([c for c in candidates if c.key not in known_keys])
    if not plan.urls:
        return plan, []
    landed = await frontier.insert_rows(conn, crawl["id"], next_depth, plan.urls)
    await shape_store.save(conn, crawl["id"], [p.key for p in plan.urls], depth=next_depth)
    return plan, [{"url": p.url, "host": p.host} for p in plan.urls if p.key in landed]


async def _stream_plan_and_insert(conn: Any, crawl: dict, next_depth: int, chunks: Any,
                                  max_pages_per_host: int | None, settings: Any,
                                  held: tuple[int, dict[str, int]],
                                  reasons: dict[str, str | None], ordered: list[ParsedUrl],
                                  early: report_early.Early) -> tuple[Any, list[dict]]:
    """:func:`_plan_and_insert`'s insert-first way with the insert overlapping the ledger's
    work (issue 14, third round): ``chunks`` yields the candidates chunk by chunk (scope and
    the private-host guard run as it is iterated) and ``frontier.insert_stream`` sends each
    chunk's INSERT before the next is made. The plan is then made once over the rows that
    landed, exactly as ``insert_then_screen`` makes it: redirect targets already held are
    not new; the parameter rules' counts are read as they were before this report's rows (id
    range); what the plan screens out is deleted. Only when the page budget cannot cut (the
    caller checks that the group's links fit in the room left). ``reasons``: the URL trap
    rules' verdicts, filled while the chunks are made (``traps.trap_reason`` per key).

    Links from progress (``early``, ``ledger.crawl.report_early``): the chunks leave out the
    candidates of results whose links landed already, ``ordered`` gets every candidate in
    discovery order; new = landed now or early; early rows no candidate names are deleted.
    ``held`` counts the crawl's rows before the level (early rows not included)."""
    known, per_host = held
    # this crawl's rows above it are this level's
    before = early.first_id - 1 if early.first_id is not None else await leases.max_page_id(conn)
    _, landed = await frontier.insert_stream(conn, crawl["id"], next_depth, chunks)
    candidates = ordered
    if early.keys:
        names = {c.key for c in candidates}
        stale = [h for k, h in early.keys.items() if k not in names]
        if stale:
            await conn.execute("DELETE FROM crawl_pages WHERE crawl_id = %s AND depth = %s"
                               " AND url_hash = ANY(%b::bytea[])", (crawl["id"], next_depth, stale))
        landed = {**early.keys, **landed}
    new = [c for c in candidates if c.key in landed]
    fresh = await redirects.drop_known_finals(conn, crawl["id"], new)  # redirect targets held: never new
    counts = await _load_shapes(conn, crawl, [c.key for c in candidates], next_depth, settings, held_up_to=before)
    plan = _planner(crawl, next_depth, known, per_host, max_pages_per_host, counts, reasons)(fresh)
    if len(plan.urls) < len(new):
        keep = {p.key for p in plan.urls}
        await conn.execute("DELETE FROM crawl_pages WHERE crawl_id = %s AND depth = %s AND url_hash = ANY(%b::bytea[])",
                           (crawl["id"], next_depth, [landed[c.key] for c in new if c.key not in keep]))
    await shape_store.save(conn, crawl["id"], [p.key for p in plan.urls], depth=next_depth)
    return plan, [{"url": p.url, "host": p.host} for p in plan.urls]


def _stream_chunks(screen: LinkFilter, links: list, pieces: list[tuple[int, int, Any]],
                   verdicts: dict[str, str | None], drops: Counter, settings: Any, reasons: dict[str, str | None],
                   ordered: list[ParsedUrl]) -> Any:
    """Chunks of about ``STREAM_CHUNK_LINKS`` links through :func:`_guarded`; each yields the
    candidates to insert: those of ``pieces`` ``(start, end, early)`` whose links did not land
    from progress (``early`` False). A piece whose links landed is not inserted: with its scope
    verdicts from the event (``early`` a ``report_early.Scoped``) only the in-report dedup and
    the guard run (``LinkFilter.take``), else (``early`` True) its links are scoped again.
    Every candidate goes into ``ordered``, in discovery order."""
    out: list[ParsedUrl] = []
    size = 0  # links scoped into ``out`` since the last chunk
    for a, b, early in pieces:
        if isinstance(early, report_early.Scoped):
            got = screen.take(early.urls, early.drops)
            ordered += _guard(got, verdicts, drops, settings, reasons,
                              dict(zip((p.key for p in early.urls), early.reasons)))
            continue
        for i in range(a, b, STREAM_CHUNK_LINKS):
            j = min(b, i + STREAM_CHUNK_LINKS)
            got = _guarded(screen, links[i:j], verdicts, drops, settings, reasons)
            ordered += got
            if not early:
                out += got
                size += j - i
                if size >= STREAM_CHUNK_LINKS:
                    yield out
                    out, size = [], 0
    if out:
        yield out


def _pieces(counts: list[int], early: dict[int, Any]) -> list[tuple[int, int, Any]]:
    """``(start, end, early)`` link ranges of results (``counts`` links each): ``early`` maps
    the positions of the results whose links landed to their ``report_early.Scoped`` (or True
    when there is none); consecutive results of the same kind are merged, except those with
    verdicts (one piece each)."""
    out: list[tuple[int, int, Any]] = []
    start = 0
    for i, n in enumerate(counts):
        kind = early.get(i, False)
        if isinstance(kind, report_early.Scoped):
            out.append((start, start + n, kind))
        elif out and out[-1][2] is kind:
            out[-1] = (out[-1][0], start + n, kind)
        elif n:
            out.append((start, start + n, kind))
        start += n
    return out


def _guarded(screen: LinkFilter, links: list, verdicts: dict[str, str | None], drops: Counter,
             settings: Any, reasons: dict[str, str | None] | None = None) -> list[ParsedUrl]:
    """Step 5 for one chunk of links: scope, nofollow, in-call dedup (``screen``, carried across
    chunks), then :func:`_guard`. With ``reasons``, each candidate's URL trap verdict (pure:
    ``traps.trap_reason``) is put there for the plan, so that it too is computed while Postgres
    inserts the previous chunk."""
    return _guard(screen.accept(links), verdicts, drops, settings, reasons)


def _guard(accepted: list[ParsedUrl], verdicts: dict[str, str | None], drops: Counter, settings: Any,
           reasons: dict[str, str | None] | None = None, known: dict[str, str | None] | None = None) -> list[ParsedUrl]:
    """The private-host guard over accepted URLs — its verdict depends on the host name only, so
    it is asked once per host (``verdicts``, carried); refusals are counted in ``drops``. With
    ``reasons``, each candidate's URL trap verdict goes there (from ``known`` when given)."""
    out: list[ParsedUrl] = []
    for p in accepted:
        if p.host not in verdicts:
            verdicts[p.host] = refusal(p.url, settings.allow_private_hosts)
        if verdicts[p.host]:
            drops["private_host"] += 1
            continue
        out.append(p)
        if reasons is not None:
            reasons[p.key] = known[p.key] if known is not None else trap_reason(p.url, p.key)
    return out


def host_cap(crawl: dict, settings: Any) -> int | None:
    """The page limit per host of ``crawl``: the smaller of its ``max_pages_per_host`` (migration
    242) and ``WAGGLE_MAX_PAGES_PER_HOST`` (None: neither is set)."""
    caps = [c for c in (crawl.get("max_pages_per_host"), getattr(settings, "max_pages_per_host", None)) if c]
    return min(caps) if caps else None


def _by_page(screen: LinkFilter, links: list, counts: list[int], hops: list[int]) -> list[ParsedUrl]:
    """``screen.accept`` over each result's links (``counts`` each, in order) with the hops out
    of scope of the page they were found on."""
    out: list[ParsedUrl] = []
    start = 0
    for n, h in zip(counts, hops):
        out += screen.accept(links[start:start + n], h)
        start += n
    return out


async def _page_hops(conn: Any, crawl_id: Any, hashes: list[bytes | None]) -> list[int]:
    """``crawl_pages.hops`` of each reported page (0 for a result that matches no page)."""
    cur = await conn.execute("SELECT url_hash, hops FROM crawl_pages WHERE crawl_id = %s AND url_hash = ANY(%s)",
                             (crawl_id, [h for h in hashes if h is not None]))
    found = {bytes(r["url_hash"]): r["hops"] for r in await cur.fetchall()}
    return [found.get(h, 0) if h is not None else 0 for h in hashes]


async def _record_hops(conn: Any, crawl_id: Any, landed: list[dict], candidates: list[ParsedUrl],
                       outside: dict[str, int]) -> None:
    """Store the hops out of scope of the rows that just landed out of scope (extra hops)."""
    new = {x["url"] for x in landed}
    keys = [(p.key, outside[p.key]) for p in candidates if p.key in outside and p.url in new]
    if not keys:
        return
    stored = await frontier.stored_hashes(conn, crawl_id, [k for k, _ in keys])
    await conn.execute("UPDATE crawl_pages p SET hops = v.hops FROM unnest(%s::bytea[], %s::smallint[]) AS v(h, hops)"
                       " WHERE p.crawl_id = %s AND p.url_hash = v.h AND p.state = 'pending'",
                       (stored, [h for _, h in keys], crawl_id))


async def _page_links(conn: Any, crawl_id: Any, depth: int, results: list[dict], hashes: list[bytes | None],
                      per_page: list[tuple], seeds: list[ParsedUrl], crawl_scope: Scope, settings: Any) -> list[dict]:
    """Each reporting page's links: discovered, kept, dropped by reason (:mod:`ledger.crawl.link_counts`),
    stored on its row; returns the answer's ``pageLinks``."""
    fates = link_counts.current()
    pages: list[tuple[dict, list, int, Any]] = []
    cache: dict = {}
    for group, links, counts, hops, screen, scoped in per_page:
        cache.update(screen._fate)  # noqa: SLF001 - the report's href verdicts: nothing parsed twice
        start = 0
        for g, (r, n) in enumerate(zip(group, counts)):
            # a page whose links landed from progress: its stored scope verdicts, not its links again
            pages.append((r, links[start:start + n], hops[g] if hops else 0, scoped.get(g)))
            start += n
    tallied = link_counts.tally(pages, seeds, crawl_scope, fates, settings.allow_private_hosts, cache)
    by_id = {id(r): c for (r, *_), c in zip(pages, tallied)}
    ordered = [by_id.get(id(r)) for r in results]
    await link_counts.store(conn, crawl_id, depth, hashes, ordered)
    return link_counts.answer_items(results, [c or {"discovered": 0} for c in ordered])


async def _drop_early(conn: Any, crawl_id: Any, level: int) -> tuple[report_early.Early, set[int]]:
    await report_early.drop(conn, crawl_id, level)
    log.info("Links from progress not used: crawl %s level %d: the report inserts its links itself", crawl_id, level)
    return report_early.Early(), set()


def _before_level(held: tuple[int, dict[str, int]], early: report_early.Early) -> tuple[int, dict[str, int]]:
    """:func:`_known` without the early rows: what the crawl held before the level."""
    total, per_host = held
    if not early.keys:
        return held
    return total - len(early.keys), {h: n - early.hosts.get(h, 0) for h, n in per_host.items()}


async def _level_done(conn: Any, crawl: dict, depth: int, results: list[dict], inserted: list[dict],
                      held_up_to: int) -> list[dict]:
    """Record the reported hosts' last captures (``ledger.crawl.hosts``), end this level's host
    leases, and return the next level: pages carried to ``depth + 1`` earlier (hosts leased
    elsewhere, ``ledger.crawl.leases``) first, then ``inserted``."""
    await hosts.record_captures(conn, crawl, results)
    await conn.execute("DELETE FROM host_leases WHERE crawl_id = %s AND depth = %s", (crawl["id"], depth))
    return await leases.carried_pages(conn, crawl["id"], depth + 1, inserted, held_up_to) + inserted


async def record_level(services: Any, crawl_id: Any, report: dict) -> LevelOutcome:
    """Apply one level report (camelCase dict as validated) to crawl ``crawl_id``.

    Returns the answer ``{"next": [{url, host, depth}], "stopReason"}``. Raises
    :class:`Refused`: 404 unknown crawl; 409 order/duplicate rules; 400/409 ``compiled``
    mismatch (``{"error", "scriptId"}``); 503 store unavailable; 500 unusable stored seed.
    The cyclic garbage collector is paused meanwhile (``ledger.crawl.report_gc``).
    """
    with paused_gc(), link_counts.collecting():  # the plan's verdict per link, for each page's counts
        return await _record_level(services, crawl_id, report)


async def _record_level(services: Any, crawl_id: Any, report: dict) -> LevelOutcome:
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
                crawl_scope = Scope.of_crawl(crawl, seeds)
            except (InvalidPattern, ValueError) as exc:  # checked at submission: a row edited since
                raise Refused(500, f"the crawl's stored scope is not usable: {exc}") from None
            try:
                merged = merge_compiled(crawl["scripts"], report["compiled"])
            except CompiledMismatch as exc:
                raise Refused(exc.status, exc.message, scriptId=exc.script_id) from None
            await robots_cache.record(conn, crawl_id, depth, report.get("robots"))  # before leases end
            cap = host_cap(crawl, settings)  # pages per host: the crawl's limit or the deployment's

            # each reported page's stored url_hash (its key's probe chain, exact under a collision)
            hashes = await frontier.stored_hashes(conn, crawl_id, [_url_key(r["url"]) for r in results])
            # extra hops: how far out of scope each reported page is (its links' hops follow from it)
            page_hops = await _page_hops(conn, crawl_id, hashes) if crawl_scope.extra_hops else None
            # 1. close the reported rows of this level (matched by dedup key); a result that
            # matches no page of this level is ignored and not counted
            matched = await _close_reported(conn, crawl_id, depth, results, hashes)
            # finalUrl: known from now on
            finals_with_userinfo = await redirects.record(conn, crawl_id, depth, results, hashes)
            captured = sum(1 for r, h in zip(results, hashes) if h in matched and r["status"] == "captured")
            # 2. attribution: every result with a taskId, whatever its status
            to_admit = await attribute_tasks(conn, crawl, results, settings.s3_bucket)
            # 3. archive admission and recovery happen after the answer (ledger.archive.verify):
            # nothing is admitted here, so the answer claims no admission
            # 4.–7. per link distance of the reported pages, shallowest first: one group (this
            # depth) unless the level captured pages carried from an earlier level (issue 12)
            sources = await leases.source_depths(conn, crawl_id, depth, hashes)
            # links landed from progress during the level (ledger.crawl.report_early): trusted
            # only when every landed page's result carries them unchanged and no carried page
            # adds a second group; otherwise deleted, and the report runs as without them
            early = await report_early.read(conn, crawl_id, depth + 1, bool(cap))
            landed_pages = await report_early.landed_pages(conn, crawl_id, depth)
            skip = report_early.skipped(results, hashes, landed_pages) if landed_pages else set()
            if early.keys and (skip is None or len(set(sources)) > 1):
                early, skip = await _drop_early(conn, crawl_id, depth + 1)
            skip = skip or set()
            # rows above it are this level's (early rows included)
            held_up_to = early.first_id - 1 if early.first_id is not None else await leases.max_page_id(conn)
            plan, inserted, discovered, drops = None, [], 0, Counter()
            # (group, links, counts, hops, screen, {position in group: report_early.Scoped}): each page's
            # link counts
            per_page: list[tuple] = []
            for src in sorted(set(sources)) or [depth]:
                group = [r for r, s in zip(results, sources) if s == src]
                at = [i for i, s in enumerate(sources) if s == src]  # the group's results' positions
                # 4. discovered links: inline in the results, else read from S3 (old shape)
                links, overflow, counts = await discovered_links(group, lambda rs: _read_all_links(services, rs))
                screen = LinkFilter(seeds, crawl_scope)
                # the stored scope verdicts of the group's pages whose links landed unchanged (decoded once)
                scoped = {g: report_early.Scoped.decode(landed_pages[hashes[i]][1]) for g, i in enumerate(at)
                          if i in skip}
                per_page.append((group, links, counts, [page_hops[i] for i in at] if page_hops else None, screen,
                                 {g: v for g, v in scoped.items() if v is not None}))
                # 5. scope, nofollow, in-call dedup; the private-host guard (its verdict depends on
                # the host name only, so it is asked once per host); chunk by chunk, so that when the
                # budget cannot cut, chunk n + 1 is scoped while Postgres inserts chunk n
                verdicts: dict[str, str | None] = {}
                held = _before_level(await _known(conn, crawl, cap), early)
                if (src + 1 <= crawl["max_depth"] and len(links) <= crawl["max_pages"] - held[0]
                        and page_hops is None):
                    # 6.–7. every link fits the budget: insert while scoping, plan over what landed
                    reasons: dict[str, str | None] = {}
                    ordered: list[ParsedUrl] = []
                    pieces = _pieces(counts, {g: v or True for g, v in scoped.items()})
                    chunks = _stream_chunks(screen, links, pieces, verdicts, drops, settings, reasons, ordered)
                    part, landed = await _stream_plan_and_insert(conn, crawl, src + 1, chunks,
                                                                 cap, settings, held, reasons,
                                                                 ordered, early)
                else:
                    if early.keys:  # the budget may cut: the report alone decides, in its order
                        early, skip = await _drop_early(conn, crawl_id, depth + 1)
                    if page_hops is None:
                        candidates = _guarded(screen, links, verdicts, drops, settings)
                    else:  # page by page: a link's hops out of scope follow from its page's
                        candidates = _guard(_by_page(screen, links, counts, [page_hops[i] for i in at]),
                                            verdicts, drops, settings)
                    # 6.–7. budget over links not yet known to the crawl (nor the final URL of a
                    # redirected page), then the next level through the unique index
                    candidates = await redirects.drop_known_finals(conn, crawl_id, candidates)
                    part, landed = await _plan_and_insert(conn, crawl, src + 1, candidates,
                                                          cap, settings, held)
                    if screen.outside:
                        await _record_hops(conn, crawl_id, landed, candidates, screen.outside)
                drops.update(screen.drops)
                drops.pop("duplicate", None)  # in-call duplicates are the same page, not a drop
                if overflow:
                    drops["links_overflow"] += overflow  # beyond the per-page cap: never sent
                discovered += screen.accepted  # in scope, private hosts included
                drops.update(part.drops)
                if src < depth:  # found on carried pages: shallower than the next level, captured in it
                    await leases.lift(conn, crawl_id, [_url_hash(x["url"]) for x in landed], depth + 1)
                plan = part if plan is None or part.stop_reason else plan
                inserted += landed
            if report.get("sitemaps"):  # the seed hosts' sitemap URLs in scope, after the seeds (issue 29)
                part, landed, in_scope = await sitemaps.queue(conn, crawl, depth, seeds, crawl_scope,
                                                              report["sitemaps"], cap, settings,
                                                              guarded=_guarded, plan_and_insert=_plan_and_insert)
                plan, inserted, discovered = part if part.stop_reason else plan, inserted + landed, discovered + in_scope
            page_links = await _page_links(conn, crawl_id, depth, results, hashes, per_page, seeds, crawl_scope,
                                           settings)  # decision 232
            # issue 12: the hosts' last captures (shared by every crawl), this level's leases end,
            # and pages carried from hosts leased elsewhere join the next level
            inserted = await _level_done(conn, crawl, depth, results, inserted, held_up_to)
            # decision 231: hosts paused by their breaker; their next-level pages are blocked, not sent
            if await blocked.record(conn, crawl_id, depth, results) or await blocked.any_blocked(conn, crawl_id):
                inserted = await blocked.hold_back(conn, crawl_id, depth + 1, inserted)
            # 8. counters and closing
            done = not inserted
            reason = plan.stop_reason or ("completed" if done else None)
            # nothing captured at all: failed, not succeeded, naming what happened (ledger.crawl.outcome)
            error = (await outcome.nothing_captured(conn, crawl_id)
                     if done and crawl["pages_captured"] + captured == 0 else None)
            if error:
                reason = "failed"
            total_drops = Counter({k: int(v) for k, v in (crawl["drops"] or {}).items()})
            total_drops.update({k: v for k, v in drops.items() if v})
            if finals_with_userinfo:  # stored without user:password@ (ledger.crawl.redirects)
                total_drops["userinfo"] += finals_with_userinfo
            await conn.execute(
                "UPDATE crawls SET pages_captured = pages_captured + %s, pages_discovered = pages_discovered + %s,"
                " stop_reason = COALESCE(stop_reason, %s), drops = %s::jsonb, last_progress_at = now(),"
                " scripts = %s::jsonb, current_depth = %s, level_state = 'planned', level_since = now(),"
                " state = CASE WHEN %s THEN %s WHEN pause_requested THEN 'paused' ELSE state END,"
                " paused_at = CASE WHEN NOT %s AND pause_requested THEN now() ELSE paused_at END,"
                " pause_requested = false, error = COALESCE(%s, error),"
                " finished_at = CASE WHEN %s THEN now() ELSE finished_at END"
                " WHERE id = %s",
                (captured, discovered, reason, json.dumps(dict(total_drops)),
                 json.dumps(merged.scripts), depth if done else depth + 1, done,
                 "failed" if error else "succeeded", done, error, done, crawl_id),
            )
            # a pause asked during the level (ledger.crawl.control): recorded, not dispatched
            paused = not done and crawl["pause_requested"]
            answer = {
                "next": [{"url": p["url"], "host": p["host"], "depth": depth + 1} for p in inserted],
                "stopReason": reason if done else None,
            }
            if page_links:  # per page that gave links: discovered, kept, dropped by reason (decision 232)
                answer["pageLinks"] = page_links
            body = orjson.dumps(answer)
            await conn.execute(
                "INSERT INTO crawl_level_reports (crawl_id, depth, report_sha256, answer) VALUES (%s, %s, %s, %s::json)",
                (crawl_id, depth, digest, body.decode()),
            )
    log.info("Crawl level recorded: crawl %s depth %d: %d results, %d captured, next %d%s", crawl_id, depth,
             len(results), captured, len(inserted), f" (stopped: {reason})" if done else "")
    if error:
        log.warning("Crawl failed: %s: %s", crawl_id, error)
    crawl = dict(crawl)
    crawl["scripts"] = merged.scripts
    failed = {str(r["taskId"]) for r in results if r.get("taskId") and r["status"] != "captured"}
    if paused:
        log.info("Crawl paused after level %d: %s", depth, crawl_id)
    return LevelOutcome(200, answer, None if done or paused else (crawl, depth + 1, inserted),
                        (depth, failed, [str(t) for t in to_admit]) if to_admit else None, body)
