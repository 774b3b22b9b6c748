"""Every page of a crawl (``GET /api/crawls/{id}/pages``, issue 17 item 4): one row per
``crawl_pages`` row, oldest first (the order the crawl discovered them), keyset-paginated.

Row: ``url, finalUrl (where the main document ended after redirects, issue 13; None when no
redirect was reported), depth, state, failureClass, reason, captureMs, archiveId``. ``captureMs`` = ``finished_at − submitted_at`` in whole ms
(None until the page was submitted); ``archiveId`` = the archive registered for the page's
BrowserHive task (None when there is none).
"""

from __future__ import annotations

import uuid
from typing import Any

STATES = ("captured", "failed", "skipped", "pending")
LIMIT_DEFAULT = 100
LIMIT_MAX = 500

_PAGES = """
SELECT p.id, p.url, p.final_url, p.depth, p.state, p.failure_class, p.skip_reason,
       (extract(epoch FROM p.finished_at - p.submitted_at) * 1000)::bigint AS capture_ms,
       (SELECT a.id FROM archives a WHERE a.task_id::text = p.task_id ORDER BY a.created_at LIMIT 1) AS archive_id
FROM crawl_pages p
WHERE p.crawl_id = %s AND p.id > %s AND (%s::text IS NULL OR p.state = %s::text)
ORDER BY p.id LIMIT %s
"""


def page_row(row: dict) -> dict:
    """One API row (camelCase) of a ``crawl_pages`` row read by :data:`_PAGES`."""
    return dict(
        url=row["url"], finalUrl=row["final_url"], depth=row["depth"], state=row["state"], failureClass=row["failure_class"], reason=row["skip_reason"],
        captureMs=row["capture_ms"], archiveId=str(row["archive_id"]) if row["archive_id"] else None,
    )


async def list_pages(pool: Any, crawl_id: uuid.UUID, *, state: str | None, limit: int,
                     after: int) -> dict | None:
    """``{"pages": [...], "nextCursor": str | None}`` for pages with ``id > after``, or None
    when the crawl does not exist. ``nextCursor`` is set when the page came back full."""
    async with pool.connection() as conn:
        cur = await conn.execute("SELECT 1 FROM crawls WHERE id = %s", (crawl_id,))
        if await cur.fetchone() is None:
            return None
        cur = await conn.execute(_PAGES, (crawl_id, after, state, state, limit))
        rows = await cur.fetchall()
    pages = [page_row(r) for r in rows]
    return {"pages": pages, "nextCursor": str(rows[-1]["id"]) if len(rows) == limit else None}
