"""Final URLs of redirected pages (issue 13 item 3, internals contract 4).

A PageResult's ``finalUrl`` is where the capture's main document ended after HTTP or JavaScript
redirects. It comes from the page (a redirect target is chosen by the site), so it is hostile
input: only an absolute http(s) URL that ``parse_http_url`` accepts is used; anything else is
logged and ignored (the page's outcome stands). The ledger stores it on the page row
(``crawl_pages.final_url``) and, when its dedup key differs from the page's own, that key
(``final_url_key``) — which makes the final URL known to the crawl: a later link to it is not
captured again. Scope is untouched: links are judged against the crawl's seeds, never the final
URL's host (case C5).

A final URL with userinfo (``http://user:pw@host/``: a site may redirect there) is stored without
it — the password is never stored, logged or shown — and is not made known for dedup (the page
behind credentials may not be the page without them); each such result counts as a ``userinfo``
drop, like a discovered link with credentials (ledger.crawl.scope).
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Sequence
from typing import Any

from ledger.crawl.urls import InvalidUrl, ParsedUrl, has_userinfo, parse_http_url

log = logging.getLogger(__name__)


def without_userinfo(parsed: ParsedUrl) -> ParsedUrl:
    """``parsed`` without its ``user:password@`` (the serialized authority's part before its
    ``@``, which WHATWG leaves unencoded only as the separator)."""
    scheme, _, rest = parsed.url.partition("://")
    authority, slash, tail = rest.partition("/")
    return parse_http_url(f"{scheme}://{authority.rpartition('@')[2]}{slash}{tail}")


def final_of(result: dict) -> tuple[ParsedUrl | None, bool]:
    """``(the parsed finalUrl of one result, whether it carried userinfo)``: None when absent or
    not a usable http(s) URL; with userinfo, the URL without it."""
    raw = result.get("finalUrl")
    if raw is None:
        return None, False
    try:
        parsed = parse_http_url(raw)
    except InvalidUrl:
        shown = raw if "@" not in str(raw) else "(an unparseable URL with '@', not shown: it may hold a password)"
        log.warning("finalUrl ignored: not an absolute http(s) URL: %.200r (page %.200s)", shown, result.get("url"))
        return None, False
    if has_userinfo(parsed):
        return without_userinfo(parsed), True
    return parsed, False


async def record(conn: Any, crawl_id: Any, depth: int, results: Sequence[dict],
                 hashes: Sequence[bytes | None]) -> int:
    """Store the final URL of every result of level ``depth`` that has a usable one, on its page
    row (matched by the requested URL's ``url_hash``, as the level report matches rows); one with
    userinfo is stored without it and with no dedup key. Returns the number of results whose
    final URL carried userinfo (the ``userinfo`` drops). One statement; nothing when no result
    has a final URL."""
    rows: dict[bytes, tuple[str, str | None]] = {}
    credentials = 0
    for result, h in zip(results, hashes):
        final, had_userinfo = final_of(result) if h is not None else (None, False)
        if final is not None:
            rows[h] = (final.url, None if had_userinfo else final.key)  # a later result for one page wins
            credentials += had_userinfo
    if not rows:
        return 0
    hs = list(rows)
    await conn.execute(
        "UPDATE crawl_pages p SET final_url = v.final_url,"
        " final_url_key = CASE WHEN v.final_key <> p.url_key THEN v.final_key END"
        " FROM unnest(%s::bytea[], %s::text[], %s::text[]) AS v(url_hash, final_url, final_key)"
        " WHERE p.crawl_id = %s AND coalesce(p.level, p.depth) = %s AND p.url_hash = v.url_hash",
        (hs, [rows[h][0] for h in hs], [rows[h][1] for h in hs], crawl_id, depth),
    )
    return credentials


async def drop_known_finals(conn: Any, crawl_id: Any, candidates: list[ParsedUrl]) -> list[ParsedUrl]:
    """``candidates`` without those whose dedup key is the final URL of a page the crawl holds
    (redirect targets already captured). Costs one indexed probe when no page redirected."""
    if not candidates:
        return candidates
    cur = await conn.execute(
        "SELECT EXISTS (SELECT 1 FROM crawl_pages WHERE crawl_id = %s AND final_url_hash IS NOT NULL) AS any",
        (crawl_id,),
    )
    if not (await cur.fetchone())["any"]:
        return candidates
    hashes = [hashlib.sha256(c.key.encode("utf-8")).digest() for c in candidates]
    cur = await conn.execute(
        "SELECT final_url_hash FROM crawl_pages WHERE crawl_id = %s AND final_url_hash = ANY(%s::bytea[])",
        (crawl_id, hashes),
    )
    known = {bytes(r["final_url_hash"]) for r in await cur.fetchall()}
    if not known:
        return candidates
    return [c for c, h in zip(candidates, hashes) if h not in known]
