"""Pages of a crawl's collection as the player looks them up (wabac.js ``MultiWACZ`` with a
``pagesQueryUrl``; decision 152).

With a pages query the player opens a member only when a page of it is shown (the page → member
map comes from here); each member's path is a ledger path that signs afresh on every read
(decision 371), so nothing the player holds expires. Items are ``{id, url, ts, title, filename, status, mime, depth,
isSeed}``: ``filename`` is the member's ``name`` in the collection (``<archive id>.wacz``).
"""

from __future__ import annotations

import uuid
from typing import Any

INITIAL_PAGES = 1000  # page list entries sent with the collection itself

_LOOKUP = """
SELECT a.id AS archive_id, coalesce(p.final_url, p.url) AS url, p.depth, a.captured_at,
       f.title, f.http_status, f.content_type
FROM crawl_pages p
JOIN archives a ON a.task_id = (CASE WHEN p.task_id ~* '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$'
                                 THEN p.task_id::uuid END)
LEFT JOIN archive_files f ON f.archive_id = a.id
WHERE p.crawl_id = %(crawl)s
  AND (CASE WHEN %(exact)s THEN (p.url = %(url)s OR p.final_url = %(url)s)
            ELSE (starts_with(coalesce(p.final_url, p.url), %(url)s)) END)
ORDER BY coalesce(p.final_url, p.url), a.captured_at
LIMIT 500
"""


def _iso(value: Any) -> str:
    from datetime import timezone

    return value.astimezone(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _item(archive_id: str, url: str, ts: str, title: Any, status: Any, mime: Any, depth: int) -> dict:
    return {"id": archive_id, "url": url, "ts": ts, "title": title or url, "filename": f"{archive_id}.wacz",
            "status": status, "mime": mime, "depth": depth, "isSeed": depth == 0}


def player_keys(base: str, crawl_id: str, ticket: str, members: list) -> dict:
    """``pagesQueryUrl``, ``initialPages`` and ``totalPages`` for the player, of ``members``
    (``ledger.crawl.collection.Member``, the viewable ones in answer order)."""
    pages = [m for m in members if not m.original]
    return {"pagesQueryUrl": f"{base}/api/crawls/{crawl_id}/collection/t/{ticket}/pages",
            "initialPages": [_item(m.aid, m.url, m.ts, r.get("title"), r.get("httpStatus"), r.get("contentType"), m.depth)
                             for m in pages[:INITIAL_PAGES] for r in (m.resource,)],
            "totalPages": len(pages)}


def own(body: dict) -> list[dict]:
    """The collection's members of the crawl's own pages (not ``role: "original"`` ones: an
    earlier crawl's archive holding originals of revisits is opened for records, not listed)."""
    return [m for m in body["resources"] if m.get("role") != "original"]


def initial(body: dict) -> list[dict]:
    """The collection's first :data:`INITIAL_PAGES` page members as page-list entries."""
    return [_item(m["archiveId"], m["url"], m["ts"], m.get("title"), m.get("httpStatus"), m.get("contentType"),
                  m["depth"]) for m in own(body)[:INITIAL_PAGES]]


async def lookup(services: Any, identity: Any, crawl_id: uuid.UUID, url: str, *, exact: bool,
                 limit: int) -> dict:
    """``{"items": [...], "total"}``: the viewable members whose page URL is ``url`` (``exact``)
    or starts with it, sorted by URL then capture time."""
    async with services.pool.connection() as conn:
        rows = await (await conn.execute(_LOOKUP, {"crawl": crawl_id, "url": url, "exact": exact})).fetchall()
    allowed = await services.authz.viewable(identity, [str(r["archive_id"]) for r in rows]) if rows else set()
    items = [_item(str(r["archive_id"]), r["url"], _iso(r["captured_at"]), r["title"], r["http_status"],
                   r["content_type"], r["depth"]) for r in rows if str(r["archive_id"]) in allowed]
    return {"items": items[:limit], "total": len(items)}
