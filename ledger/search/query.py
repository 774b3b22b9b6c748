"""Search what was archived (issue 26 item 3): parse, rank in Postgres, authorize in OpenFGA.

Steps of :func:`search`:

1. the text is parsed by ``websearch_to_tsquery`` once per text-search configuration in use
   (``search_configs``): a row matches only the query parsed with its own configuration;
2. scope, asked of OpenFGA while Postgres parses: the caller's organizations it confirms
   (``member``) and the archives shared with the caller (ListObjects: grants, organization
   shares, owned capture jobs);
3. candidates: matches inside that scope, filters applied (crawl, host, captured from/to); the
   :data:`RANK_WINDOW` newest are ranked by ``ts_rank_cd`` (weights title A > headings B >
   body C), newest first among equals (``rankedNewest`` when the window was full);
   authorization: ranked candidates confirmed by one BatchCheck a little larger than the page
   (docs/decisions/311-search-at-a-million-pages.md) — no owner column is consulted;
4. only the returned page gets its title, URL and ``ts_headline`` snippet (the costly part).

Errors are :class:`BadQuery` (a 400 with what to change).
"""

from __future__ import annotations

import asyncio
import contextlib
import html
import re
import uuid
from dataclasses import dataclass
from datetime import date, datetime, time, timezone
from typing import Any

from ledger.search.links import replay_link

QUERY_MAX_CHARS = 500
PAGE_SIZE_DEFAULT = 10
PAGE_SIZE_MAX = 50
PAGE_MAX = 100
CANDIDATES_MAX = 1000
RANK_WINDOW = 1000  # newest matches of the caller's scope that are ranked (decision 311)
HEADLINE_OPTIONS = "StartSel=\x02, StopSel=\x03, MaxWords=30, MinWords=12, MaxFragments=2, FragmentDelimiter=\x04"
_HOST = re.compile(r"^([A-Za-z0-9._-]{1,253})(?::(\d{1,5}))?$")
_DEFAULT_PORTS = {80: "http", 443: "https"}


class BadQuery(ValueError):
    """The query cannot be run as given; the message says what to change."""


@dataclass(frozen=True)
class Query:
    """A checked query: ``text``, filters and the page (``page`` from 1, ``size`` hits)."""

    text: str
    crawl: str | None = None
    host: str | None = None
    port: int | None = None  # with ``host``: only pages whose URL names this port (or its scheme's default)
    captured_from: datetime | None = None
    captured_to: datetime | None = None
    page: int = 1
    size: int = PAGE_SIZE_DEFAULT


def _when(name: str, value: str | None, end_of_day: bool) -> datetime | None:
    if not value:
        return None
    raw = value.strip()
    try:
        if len(raw) == 10:  # a date: the whole day, UTC
            d = date.fromisoformat(raw)
            return datetime.combine(d, time.max if end_of_day else time.min, tzinfo=timezone.utc)
        # an unencoded "+hh:mm" offset arrives as " hh:mm" (form decoding): read it as meant
        when = datetime.fromisoformat(re.sub(r" (\d{2}:?\d{2})$", r"+\1", raw))
    except ValueError:
        raise BadQuery(f"{name} must be a date (2026-09-24) or a date-time with a zone (2026-09-24T10:00:00Z)") from None
    return when if when.tzinfo else when.replace(tzinfo=timezone.utc)


def _int(name: str, value: str | None, default: int, low: int, high: int) -> int:
    if value in (None, ""):
        return default
    try:
        n = int(value)
    except ValueError:
        raise BadQuery(f"{name} must be a whole number from {low} to {high}") from None
    if not low <= n <= high:
        raise BadQuery(f"{name} must be a whole number from {low} to {high}")
    return n


def parse(params: Any) -> Query:
    """A :class:`Query` from request parameters ``q, crawl, host, from, to, page, size``;
    raises :class:`BadQuery`."""
    text = (params.get("q") or "").strip()
    if not text:
        raise BadQuery("the query is empty: give words to search for, e.g. archive \"exact phrase\" -excluded")
    words = [w.strip('"-').upper() for w in text.split()]
    if "OR" in words and all(w in ("OR", "") for w in words):
        raise BadQuery("OR joins two words or phrases (tide OR harbour): give words to search for around it")
    if len(text) > QUERY_MAX_CHARS:
        raise BadQuery(f"the query is {len(text)} characters long; at most {QUERY_MAX_CHARS} are searched")
    if "\x00" in text:
        raise BadQuery("the query contains a NUL character; remove it")
    crawl = params.get("crawl") or None
    if crawl is not None:
        try:
            crawl = str(uuid.UUID(crawl))
        except ValueError:
            raise BadQuery("crawl must be a crawl id (UUID), e.g. 3f2b8c1e-8d0a-4d59-9f5e-0c6a1b2d3e4f") from None
    host, port = _host_port((params.get("host") or "").strip().lower())
    start, end = _when("from", params.get("from"), False), _when("to", params.get("to"), True)
    if start and end and start > end:
        raise BadQuery("from is after to: give the earlier capture time as from")
    return Query(text, crawl, host, port, start, end, _int("page", params.get("page"), 1, 1, PAGE_MAX),
                 _int("size", params.get("size"), PAGE_SIZE_DEFAULT, 1, PAGE_SIZE_MAX))


def _host_port(value: str) -> tuple[str | None, int | None]:
    """``docs.python.org`` → (host, None); ``127.0.0.1:8631`` → (host, 8631); raises :class:`BadQuery`
    for a scheme, a path or a port outside 1–65535. The index stores the host name alone
    (``archive_text.host``); a port is matched against the page's URL (:func:`port_pattern`)."""
    if not value:
        return None, None
    m = _HOST.match(value)
    host = m.group(1).rstrip(".") if m else ""
    if not host:
        raise BadQuery("host must be a host name such as docs.python.org, or host:port such as 127.0.0.1:8631"
                       " (no scheme or path)")
    port = int(m.group(2)) if m.group(2) else None
    if port is not None and not 1 <= port <= 65535:
        raise BadQuery(f"the port of host {value!r} must be 1–65535")
    return host, port


def port_pattern(host: str, port: int) -> str:
    """A case-insensitive Postgres regular expression matching URLs of ``host`` on ``port``:
    the port written out, or left out where it is the scheme's default (http 80, https 443)."""
    h = re.sub(r"([.\\])", r"\\\1", host)
    auth = "(?:[^/?#@]*@)?"
    alts = [f"[a-z][a-z0-9+.-]*://{auth}{h}:{port}"]
    if port in _DEFAULT_PORTS:
        alts.append(f"{_DEFAULT_PORTS[port]}://{auth}{h}")
    return f"^(?:{'|'.join(alts)})(?:[/?#]|$)"


# One round trip (decision 381): the checks of the whole text (simple: any word at all; english:
# not only stop words; only exclusions) and its parse by each configuration in use (none yet:
# one row with NULL config).
_PARSED = """
SELECT k.simple, k.english, k.negated, k.pages, c.config::text AS config, q.query::text AS query,
       numnode(q.query) AS nodes, querytree(q.query) AS tree
FROM (SELECT numnode(websearch_to_tsquery('simple', %(q)s)) AS simple,
             numnode(websearch_to_tsquery('english', %(q)s)) AS english,
             querytree(websearch_to_tsquery('simple', %(q)s)) = 'T' AS negated,
             (SELECT reltuples FROM pg_class WHERE oid = 'archive_text'::regclass) AS pages) k
LEFT JOIN (search_configs c CROSS JOIN LATERAL (SELECT websearch_to_tsquery(c.config, %(q)s) AS query) q) ON TRUE
"""

# Candidates (decision 311). One branch per (scope, configuration): a scope is one of the
# caller's organizations confirmed by OpenFGA (archive_text.org_id) or the archives shared with
# the caller (ListObjects: grants, organization shares, owned capture jobs). Each branch is a
# plain filtered SELECT, so the planner flattens the UNION ALL into a Merge Append over
# newest-first branches and stops after RANK_WINDOW rows: for a common word it walks
# (org_id, captured_at DESC) and tests `@@` row by row; a rare word (no walk) has one branch for
# all the organizations, a single GIN bitmap whose few matches are sorted (decision 431). Only
# that window is ranked by ts_rank_cd.
_BRANCH = """(SELECT t.archive_id, t.captured_at, t.tsv, %({tsq})s::tsquery AS query FROM archive_text t
WHERE {scope} AND t.config = %({cfg})s::regconfig AND {match}{filters}
ORDER BY t.captured_at DESC LIMIT %(window)s)"""
_RANKED = """
WITH w AS (SELECT u.archive_id, u.captured_at, u.tsv, u.query FROM ({branches}) u
           ORDER BY u.captured_at DESC LIMIT %(window)s)
SELECT w.archive_id::text AS id FROM w
ORDER BY ts_rank_cd(w.tsv, w.query) DESC, w.captured_at DESC, w.archive_id
LIMIT %(limit)s
"""


# A text that matches at least this share of the pages (the planner's estimate) is found by
# newest-first walks only (decision 381): its 1,000 newest matches are within ~1,000 / share
# rows of a walk, whatever the table's size, while a GIN bitmap visits (and, for a phrase,
# rechecks) every match of every branch, and reads the GIN once per branch — at 100,000 pages
# `"context manager"` (7 % of the pages) spent 66 ms in ten GIN scans alone. Each branch is
# planned for its own LIMIT, so the planner cannot know that most branches give one row. The
# planner's estimate of a phrase or of several words is 2–3× low (their words come together),
# of a word outside its statistics 0.5 % (the column keeps 10,000 lexemes: decision 431, so only
# words rarer than ≈ 0.1–0.3 % of the pages fall outside): those stay with the planner's plan.
WALK_SHARE_MIN = 0.01
# The planner's estimate of the rows matching the text (any configuration in use).
_ESTIMATE = "EXPLAIN (FORMAT JSON) SELECT 1 FROM archive_text t WHERE {cond}"


async def walk_only(conn: Any, parsed: list[tuple[str, str]], rows: float) -> bool:
    """True when the planner estimates that the text matches at least :data:`WALK_SHARE_MIN`
    of the ``rows`` indexed pages (then :func:`candidate_sql` hides the GIN index)."""
    if not parsed or rows <= 0:
        return False
    params: dict[str, Any] = {}
    conds = []
    for k, (config, tsq) in enumerate(parsed):
        params[f"cfg{k}"], params[f"tsq{k}"] = config, tsq
        conds.append(f"(t.config = %(cfg{k})s::regconfig AND t.tsv @@ %(tsq{k})s::tsquery)")
    got = await (await conn.execute(_ESTIMATE.format(cond=" OR ".join(conds)), params, prepare=False)).fetchone()
    plan = got["QUERY PLAN"] if isinstance(got, dict) else got[0]
    return plan[0]["Plan"]["Plan Rows"] >= WALK_SHARE_MIN * rows


def candidate_sql(parsed: list[tuple[str, str]], orgs: list[str], shared: list[str], query: "Query",
                  walk: bool = False) -> tuple[str, dict]:
    """The ranked-candidates statement and its parameters for ``parsed`` (configuration,
    tsquery text) pairs over the scopes ``orgs`` (organization ids) and ``shared`` (archive
    ids); None-free filters of ``query`` are added to every branch. ``walk``: the match is
    written as ``ts_match_vq(tsv, query)`` — the same test as ``@@``, which the GIN index
    cannot serve, so every branch walks its newest-first b-tree (:func:`walk_only`)."""
    params: dict[str, Any] = {"window": RANK_WINDOW, "limit": CANDIDATES_MAX}
    filters = ""
    for name, col, op in (("crawl", "crawl_id", "= %(crawl)s::uuid"), ("host", "host", "= %(host)s::text"),
                          ("from", "captured_at", ">= %(from)s::timestamptz"),
                          ("to", "captured_at", "<= %(to)s::timestamptz")):
        value = {"crawl": query.crawl, "host": query.host, "from": query.captured_from, "to": query.captured_to}[name]
        if value is not None:
            params[name] = value
            filters += f" AND t.{col} {op}"
    if query.host is not None and query.port is not None:  # the index keeps host names alone
        params["port_re"] = port_pattern(query.host, query.port)
        filters += " AND t.url ~* %(port_re)s"
    scopes = []
    if walk:  # one newest-first walk per organization, merged (Merge Append stops at the window)
        for i, org in enumerate(orgs):
            params[f"org{i}"] = org
            scopes.append(f"t.org_id = %(org{i})s")
    elif orgs:  # one GIN bitmap for them all: per organization it read the GIN and ANDed an
        # organization's b-tree bitmap once each (decision 431: zipimport at 100 % scope 130 → 45 ms)
        params["orgs"] = list(orgs)
        scopes.append("t.org_id = ANY(%(orgs)s::text[])")
    if shared:  # not those of the organizations' branches: each archive in one branch only
        params["shared"], params["orgs"] = shared, list(orgs)
        scopes.append("t.archive_id = ANY(%(shared)s::uuid[]) AND (t.org_id IS NULL OR t.org_id <> ALL(%(orgs)s::text[]))")
    branches = []
    for k, (config, tsq) in enumerate(parsed):
        params[f"cfg{k}"], params[f"tsq{k}"] = config, tsq
        match = f"ts_match_vq(t.tsv, %(tsq{k})s::tsquery)" if walk else f"t.tsv @@ %(tsq{k})s::tsquery"
        branches += [_BRANCH.format(scope=scope, cfg=f"cfg{k}", tsq=f"tsq{k}", match=match, filters=filters)
                     for scope in scopes]
    return _RANKED.format(branches="\nUNION ALL\n".join(branches)), params


_PAGE = """
SELECT t.archive_id::text AS id, t.url, t.title, t.captured_at, t.crawl_id::text AS crawl_id, t.lang,
       ts_headline(t.config, t.body, websearch_to_tsquery(t.config, %(q)s), %(opts)s) AS snippet
FROM archive_text t WHERE t.archive_id = ANY(%(ids)s::uuid[])
"""


async def usable_configs(conn: Any, text: str) -> list[str]:
    """The configurations whose parse of ``text`` can be searched (:func:`parsed_queries`)."""
    return [config for config, _ in await parsed_queries(conn, text)]


async def parsed_queries(conn: Any, text: str) -> list[tuple[str, str]]:
    """See :func:`parsed_and_pages` (its first part)."""
    return (await parsed_and_pages(conn, text))[0]


async def parsed_and_pages(conn: Any, text: str) -> tuple[list[tuple[str, str]], float]:
    """((configuration, tsquery text) for each configuration whose parse of ``text`` can be
    searched, the planner's count of indexed pages — ``pg_class.reltuples``, ≤ 0 unknown) in one
    round trip; raises :class:`BadQuery` for no words at all (only punctuation or operators), only stop words, or only exclusions.

    Stop words: refused when the query is empty as English parses it (the default language of
    the web page and of most pages), or as every language configuration in use parses it
    (``der die das`` over German pages). A word one language drops may be a word in another:
    a query that English keeps is searched in every configuration that keeps it."""
    got = await (await conn.execute(_PARSED, {"q": text})).fetchall()
    checks, rows = got[0], [r for r in got if r["config"] is not None]
    if checks["simple"] == 0:
        raise BadQuery("the query has no words to search for (only punctuation or operators)")
    languages = [r for r in rows if r["config"] != "simple"]
    if checks["english"] == 0 or (languages and all(r["nodes"] == 0 for r in languages)):
        raise BadQuery("the query has only stop words (such as 'the', 'and', 'of'), which are not indexed;"
                       " add a word that says what the page is about")
    searched = [r for r in rows if r["nodes"] > 0 and r["tree"] != "T"]
    if not searched and any(r["nodes"] > 0 for r in rows) or not rows and checks["english"] and checks["negated"]:
        raise BadQuery("the query only excludes words (-word); add a word or phrase the pages must have")
    return [(r["config"], r["query"]) for r in searched], float(checks["pages"] or 0)


async def _page_rows(pool: Any, text: str, ids: list[str]) -> dict[str, dict]:
    """archive id → its hit row (``url, title, captured_at, crawl_id, lang, snippet``) for ``ids``."""
    async with pool.connection() as conn:
        rows = await (await conn.execute(_PAGE, {"q": text, "ids": ids, "opts": HEADLINE_OPTIONS})).fetchall()
    return {r["id"]: r for r in rows}


def _snippet(raw: str | None) -> tuple[str, str]:
    """(plain text, HTML with <mark>) of a ts_headline result using \\x02/\\x03 markers."""
    raw = (raw or "").replace("\x04", " … ")
    plain = raw.replace("\x02", "").replace("\x03", "")
    marked = html.escape(raw, quote=False).replace("\x02", "<mark>").replace("\x03", "</mark>")
    return plain, marked


async def search(pool: Any, authz: Any, identity: Any, query: Query) -> dict:
    """Run ``query`` for ``identity`` → ``{hits, page, size, more, incomplete, rankedNewest}``:
    ``hits`` the page's viewable hits in rank order (``archiveId, url, title, capturedAt,
    crawlId, lang, snippet, snippetHtml, replay``); ``more`` whether a next page has hits.

    Candidates come only from the caller's scope as OpenFGA states it in this request
    (``authz.member_organizations``: organizations confirmed ``member``; ``authz.shared_with``:
    grants, shares and owned jobs); of their matches the :data:`RANK_WINDOW` newest are ranked
    (``rankedNewest`` true when the window was full: older matches were not ranked — filters
    reach them). Ranked candidates are then confirmed by BatchCheck (``authz.checked_viewable``)
    in rank order, a little more than the page at a time, until ``offset + size + 1`` are
    viewable (one more says ``more``); a candidate refused is dropped and the next one taken.
    ``incomplete``: the candidates ran out at :data:`CANDIDATES_MAX` before the page was full.
    How many candidates OpenFGA refused is never said. Raises :class:`BadQuery`;
    ``FgaUnavailable`` when OpenFGA does not answer."""
    from ledger.api.archives import iso_ms

    scope = asyncio.ensure_future(asyncio.gather(authz.member_organizations(identity), authz.shared_with(identity)))
    try:
        async with pool.connection() as conn:
            parsed, pages = await parsed_and_pages(conn, query.text)
            walk = await walk_only(conn, parsed, pages)
        orgs, shared = await scope
    finally:
        if not scope.done():
            scope.cancel()
            with contextlib.suppress(BaseException):
                await scope
    candidates: list[str] = []
    if parsed and (orgs or shared):
        sql, params = candidate_sql(parsed, orgs, sorted(shared), query, walk)
        async with pool.connection() as conn:
            # never prepared: a generic plan cannot see the words, and a common word's walk is a
            # rare word's disaster (psycopg prepares a text after 5 runs; the plan then goes generic)
            candidates = [r["id"] for r in await (await conn.execute(sql, params, prepare=False)).fetchall()]
    need = (query.page - 1) * query.size + query.size + 1
    start = (query.page - 1) * query.size
    # The page's rows (title, URL, snippet) are read while OpenFGA checks the candidates,
    # assuming the page is the candidates at its positions (it is unless some are refused):
    # one round trip less on the way (decision 381); rows of a page that moved are read after.
    guess = candidates[start: start + query.size]
    rows_task = asyncio.ensure_future(_page_rows(pool, query.text, guess)) if guess else None
    try:
        viewable: list[str] = []
        checked, chunk = 0, need + max(4, need // 4)  # over-fetch a little: most candidates are allowed
        while len(viewable) < need and checked < len(candidates):
            part = candidates[checked: checked + chunk]
            allowed = await authz.checked_viewable(identity, part)
            viewable.extend(i for i in part if i in allowed)
            checked += len(part)
            chunk = max(chunk, 2 * (need - len(viewable)))
        page_ids = viewable[start: start + query.size]
        by_id = await rows_task if rows_task is not None else {}
    finally:
        if rows_task is not None and not rows_task.done():
            rows_task.cancel()
            with contextlib.suppress(BaseException):
                await rows_task
    by_id = {i: r for i, r in by_id.items() if i in page_ids}  # never a row of a refused candidate
    missing = [i for i in page_ids if i not in by_id]
    if missing:
        by_id.update(await _page_rows(pool, query.text, missing))
    hits: list[dict] = []
    for i in page_ids:
        r = by_id.get(i)
        if r is None:  # deleted meanwhile
            continue
        plain, marked = _snippet(r["snippet"])
        captured = iso_ms(r["captured_at"])
        hits.append({"archiveId": i, "url": r["url"], "title": r["title"], "capturedAt": captured,
                     "crawlId": r["crawl_id"], "lang": r["lang"], "snippet": plain, "snippetHtml": marked,
                     "replay": replay_link(i, r["crawl_id"], r["url"], captured)})
    return {"hits": hits, "page": query.page, "size": query.size, "more": len(viewable) > start + query.size,
            "incomplete": len(viewable) < need and len(candidates) >= CANDIDATES_MAX
            and checked >= len(candidates), "rankedNewest": len(candidates) >= RANK_WINDOW}
