"""Final URLs of redirected pages (issue 13 item 3, internals contract 4).

A PageResult's ``finalUrl`` is where the capture's main document ended after HTTP or JavaScript
redirects. It comes from the page (a redirect target is chosen by the site), so it is hostile
input: only an absolute http(s) URL that ``parse_http_url`` accepts is used; anything else is
logged and ignored (the page's outcome stands). The ledger stores it on the page row
(``crawl_pages.final_url``) and, when its dedup key differs from the page's own, that key
(``final_url_key``) — which makes the final URL known to the crawl: a later link to it is not
captured again. Scope is untouched: links are judged against the crawl's seeds, never the final
URL's host (case C5).
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Sequence
from typing import Any

from ledger.crawl.urls import InvalidUrl, ParsedUrl, parse_http_url

log = logging.getLogger(__name__)


def final_of(result: dict) -> ParsedUrl | None:
    """The parsed ``finalUrl`` of one result, or None (absent, or not a usable http(s) URL)."""
    raw = result.get("finalUrl")
    if raw is None:
        return None
    try:
        return parse_http_url(raw)
    except InvalidUrl:
        log.warning("finalUrl ignored: not an absolute http(s) URL: %.200r (page %.200s)", raw, result.get("url"))
        return None


async def record(conn: Any, crawl_id: Any, depth: int, results: Sequence[dict],
                 hashes: Sequence[bytes | None]) -> int:
    """Store the final URL of every result of level ``depth`` that has a usable one, on its page
    row (matched by the requested URL's ``url_hash``, as the level report matches rows).
    Returns the number of rows updated. One statement; nothing when no result has one."""
    rows: dict[bytes, tuple[str, str]] = {}
    for result, h in zip(results, hashes):
        final = final_of(result) if h is not None else None
        if final is not None:
            rows[h] = (final.url, final.key)  # a later result for one page wins
    if not rows:
        return 0
    hs = list(rows)
    cur = await conn.execute(
        "UPDATE crawl_pages p SET final_url = v.final_url,"
        " final_url_key = CASE WHEN v.final_key <> p.url_key THEN v.final_key END"
        " FROM unnest(%s::bytea[], %s::text[], %s::text[]) AS v(url_hash, final_url, final_key)"
        " WHERE p.crawl_id = %s AND coalesce(p.level, p.depth) = %s AND p.url_hash = v.url_hash",
        (hs, [rows[h][0] for h in hs], [rows[h][1] for h in hs], crawl_id, depth),
    )
    return cur.rowcount


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
