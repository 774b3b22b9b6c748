"""Search what was archived (issue 26 item 3): parse, rank in Postgres, authorize in OpenFGA.

Steps of :func:`search`:

1. the text is parsed by ``websearch_to_tsquery`` once per text-search configuration in use
   (``search_configs``): a row matches only the query parsed with its own configuration;
2. candidates: ids of matching rows, filters applied (crawl, host, captured from/to), ranked by
   ``ts_rank_cd`` (weights title A > headings B > body C), newest first among equals, at most
   :data:`CANDIDATES_MAX`; when more than :data:`RANK_WINDOW` rows match, only the most
   recently captured :data:`RANK_WINDOW` are ranked (``rankedNewest`` in the answer);
3. authorization: candidates in rank order go to ``authz.viewable`` (BatchCheck) in chunks that
   grow ×4 from two pages' worth, until ``offset + size + 1`` are viewable or candidates run out
   (over-fetch; docs/decisions/163-search-authorization.md) — no owner column is consulted;
4. only the returned page gets its title, URL and ``ts_headline`` snippet (the costly part).

Errors are :class:`BadQuery` (a 400 with what to change).
"""

from __future__ import annotations

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
CANDIDATES_MAX = 2000
RANK_WINDOW = 2000  # most recent matches ranked (see _CANDIDATES)
HEADLINE_OPTIONS = "StartSel=\x02, StopSel=\x03, MaxWords=30, MinWords=12, MaxFragments=2, FragmentDelimiter=\x04"
_HOST = re.compile(r"^[A-Za-z0-9._-]{1,253}$")


class BadQuery(ValueError):
    """The query cannot be run as given; the message says what to change."""


@dataclass(frozen=True)
class Query:
    """A checked query: ``text``, filters and the page (``page`` from 1, ``size`` hits)."""

    text: str
    crawl: str | None = None
    host: str | None = None
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
        raise BadQuery("give words to search for: q=archive \"exact phrase\" -excluded")
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
    host = (params.get("host") or "").strip().lower().rstrip(".") or None
    if host is not None and not _HOST.match(host):
        raise BadQuery("host must be a host name such as docs.python.org (no scheme, path or port)")
    start, end = _when("from", params.get("from"), False), _when("to", params.get("to"), True)
    if start and end and start > end:
        raise BadQuery("from is after to: give the earlier capture time as from")
    return Query(text, crawl, host, start, end, _int("page", params.get("page"), 1, 1, PAGE_MAX),
                 _int("size", params.get("size"), PAGE_SIZE_DEFAULT, 1, PAGE_SIZE_MAX))


_PARSED = """
SELECT c.config::text AS config, q.query::text AS query, numnode(q.query) AS nodes,
       querytree(q.query) AS tree
FROM search_configs c, LATERAL (SELECT websearch_to_tsquery(c.config, %(q)s) AS query) q
"""

# The query is parsed once (MATERIALIZED: inlined, websearch_to_tsquery ran once per row).
# Ranking reads every ranked row's tsvector (TOAST), so only RANK_WINDOW matches are ranked:
# a common word matching half the archive costs a sort, not half a million ts_rank_cd calls
# (decision 162). Fewer matches: all ranked. The window takes the matches of crawls of the
# caller's organizations (from the token) first, then the others, newest first in each: a
# window chosen before authorization must not be filled with other organizations' pages
# (decision 163). It only chooses what is ranked: every hit is still decided by OpenFGA.
_CANDIDATES = """
WITH q AS MATERIALIZED (SELECT c.config, websearch_to_tsquery(c.config, %(q)s) AS query
           FROM search_configs c WHERE c.config::text = ANY(%(configs)s)),
m AS (SELECT t.archive_id, t.captured_at, t.tsv, q.query
      FROM q JOIN archive_text t ON t.config = q.config AND t.tsv @@ q.query
      LEFT JOIN crawls c ON c.id = t.crawl_id
      WHERE (%(crawl)s::uuid IS NULL OR t.crawl_id = %(crawl)s::uuid)
        AND (%(host)s::text IS NULL OR t.host = %(host)s::text)
        AND (%(from)s::timestamptz IS NULL OR t.captured_at >= %(from)s::timestamptz)
        AND (%(to)s::timestamptz IS NULL OR t.captured_at <= %(to)s::timestamptz)
      ORDER BY (c.org_id = ANY(%(orgs)s::text[])) IS TRUE DESC, t.captured_at DESC, t.archive_id
      LIMIT %(window)s)
SELECT m.archive_id::text AS id FROM m
ORDER BY ts_rank_cd(m.tsv, m.query) DESC, m.captured_at DESC, m.archive_id
LIMIT %(limit)s
"""

_PAGE = """
SELECT t.archive_id::text AS id, t.url, t.title, t.captured_at, t.crawl_id::text AS crawl_id, t.lang,
       ts_headline(t.config, t.body, websearch_to_tsquery(t.config, %(q)s), %(opts)s) AS snippet
FROM archive_text t WHERE t.archive_id = ANY(%(ids)s::uuid[])
"""


async def usable_configs(conn: Any, text: str) -> list[str]:
    """The configurations whose parse of ``text`` can be searched; raises :class:`BadQuery` for
    no words at all (only punctuation or operators), only stop words, or only exclusions.

    Stop words: refused when the query is empty as English parses it (the default language of
    the web page and of most pages), or as every language configuration in use parses it
    (``der die das`` over German pages). A word one language drops may be a word in another:
    a query that English keeps is searched in every configuration that keeps it."""
    rows = await (await conn.execute(_PARSED, {"q": text})).fetchall()
    checks = await (await conn.execute(
        "SELECT numnode(websearch_to_tsquery('simple', %(q)s)) AS simple,"
        " numnode(websearch_to_tsquery('english', %(q)s)) AS english", {"q": text})).fetchone()
    if checks["simple"] == 0:
        raise BadQuery("the query has no words to search for (only punctuation or operators)")
    languages = [r for r in rows if r["config"] != "simple"]
    if checks["english"] == 0 or (languages and all(r["nodes"] == 0 for r in languages)):
        raise BadQuery("the query has only stop words (such as 'the', 'and', 'of'), which are not indexed;"
                       " add a word that says what the page is about")
    searched = [r for r in rows if r["nodes"] > 0 and r["tree"] != "T"]
    if not searched and any(r["nodes"] > 0 for r in rows) or not rows and checks["english"] and await _only_exclusions(conn, text):
        raise BadQuery("the query only excludes words (-word); add a word or phrase the pages must have")
    return [r["config"] for r in searched]


async def _only_exclusions(conn: Any, text: str) -> bool:
    row = await (await conn.execute("SELECT querytree(websearch_to_tsquery('simple', %(q)s)) = 'T' AS neg",
                                    {"q": text})).fetchone()
    return bool(row["neg"])


def _snippet(raw: str | None) -> tuple[str, str]:
    """(plain text, HTML with <mark>) of a ts_headline result using \\x02/\\x03 markers."""
    raw = (raw or "").replace("\x04", " … ")
    plain = raw.replace("\x02", "").replace("\x03", "")
    marked = html.escape(raw, quote=False).replace("\x02", "<mark>").replace("\x03", "</mark>")
    return plain, marked


async def search(pool: Any, authz: Any, identity: Any, query: Query) -> dict:
    """Run ``query`` for ``identity`` → ``{hits, page, size, more, incomplete, rankedNewest}``:
    ``hits`` the page's viewable hits in rank order (``archiveId, url, title, capturedAt,
    crawlId, lang, snippet, snippetHtml, replay``); ``more`` whether a next page has hits;
    ``incomplete`` true when
    :data:`CANDIDATES_MAX` candidates were checked before the page was full (more matches may
    be viewable further down); ``rankedNewest`` true when more than :data:`RANK_WINDOW` pages
    matched and the ranking covered the newest of them. How many candidates OpenFGA refused is
    never said: it would tell a caller whether other organizations' pages hold a word (the two
    flags only say that at least :data:`CANDIDATES_MAX` / :data:`RANK_WINDOW` pages matched).
    Raises :class:`BadQuery`."""
    from ledger.api.archives import iso_ms

    async with pool.connection() as conn:
        configs = await usable_configs(conn, query.text)
        candidates: list[str] = []
        if configs:
            rows = await (await conn.execute(_CANDIDATES, {
                "q": query.text, "configs": configs, "crawl": query.crawl, "host": query.host,
                "from": query.captured_from, "to": query.captured_to, "limit": CANDIDATES_MAX,
                "window": RANK_WINDOW, "orgs": list(getattr(identity, "organizations", None) or []),
            })).fetchall()
            candidates = [r["id"] for r in rows]
    need = (query.page - 1) * query.size + query.size + 1
    viewable: list[str] = []
    checked, chunk = 0, max(2 * need, 20)
    while len(viewable) < need and checked < len(candidates):
        part = candidates[checked: checked + chunk]
        allowed = await authz.viewable(identity, part)
        viewable.extend(i for i in part if i in allowed)
        checked += len(part)
        chunk *= 4
    start = (query.page - 1) * query.size
    page_ids = viewable[start: start + query.size]
    hits: list[dict] = []
    if page_ids:
        async with pool.connection() as conn:
            rows = await (await conn.execute(_PAGE, {"q": query.text, "ids": page_ids, "opts": HEADLINE_OPTIONS})).fetchall()
        by_id = {r["id"]: r for r in rows}
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
