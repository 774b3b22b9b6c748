"""Every page of a crawl (``GET /api/crawls/{id}/pages``, issue 17 item 4): one row per
``crawl_pages`` row, oldest first (the order the crawl discovered them), keyset-paginated.

Row: ``url, finalUrl (where the main document ended after redirects, issue 13; None when no
redirect was reported), depth, state, failureClass, reason, captureMs, archiveId,
archiveComplete, waitMs``, ``links`` (``{discovered, kept, dropped}``: decision 232). ``captureMs`` = ``finished_at − submitted_at`` minus ``waitMs`` in whole
ms (None until the page was submitted); ``waitMs`` = how long the capture waited behind the previous
page of its host (a held capture, issue 24 item 8; None when none was reported); ``archiveId`` = the archive registered for the page's BrowserHive task
(None when there is none); ``reason`` of a captured page says why its archive is incomplete
(captured at the page-load deadline, a file cut by the size limit, bodies missing, a WACZ check
problem), else None.

What is in it (issue 25 item 5): ``title``, ``httpStatus``, ``contentType`` of the page as its
archive recorded them (a revisit: its original's type, and ``revisit`` true; decision 341),
``bytes`` (the archive's size) and ``thumbnailUrl`` (a signed 300 s URL of
the capture's screenshot, when one was written) — each None when unknown (no archive, or the
archive does not say). Archives of the listed page not measured yet are measured on the way
(``ledger.archive.files``, once per archive).
"""

from __future__ import annotations

import uuid
from typing import Any

from ledger.archive.facts import FACTS_COLUMNS, FACTS_JOIN, REVISIT_MIME, backfill
from ledger.archive.files import measure_missing

STATES = ("captured", "failed", "skipped", "blocked", "pending")  # blocked: decision 231
LIMIT_DEFAULT = 100
LIMIT_MAX = 500

_PAGES = """
SELECT p.id, p.url, p.final_url, p.depth, p.state, p.failure_class, p.skip_reason, p.links,
       CASE WHEN p.finished_at IS NOT NULL AND p.submitted_at IS NOT NULL  -- greatest() ignores NULLs
            THEN greatest(0, (extract(epoch FROM p.finished_at - p.submitted_at) * 1000)::bigint
                             - coalesce(p.wait_ms, 0)) END AS capture_ms, p.wait_ms,
       a.id AS archive_id, a.wacz_complete, a.wacz_problem, a.missing_body_count, a.truncated_urls,
       a.incomplete_reason, a.missing_body_urls, a.bucket, a.object_key,
       f.bytes, f.sha256, f.title, f.http_status, f.content_type, f.screenshot_bucket, f.screenshot_key,
       s.manifest_key, a.source_url, """ + FACTS_COLUMNS + """
FROM crawl_pages p
-- the task id as uuid (an index lookup; a text comparison would read every archive per page)
LEFT JOIN LATERAL (SELECT * FROM archives a WHERE a.task_id = (CASE WHEN p.task_id ~* '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$'
                   THEN p.task_id::uuid END) ORDER BY a.created_at LIMIT 1) a ON true
LEFT JOIN archive_files f ON f.archive_id = a.id
LEFT JOIN capture_submissions s ON s.task_id = a.task_id AND f.archive_id IS NULL""" + FACTS_JOIN + """
WHERE p.crawl_id = %s AND p.id > %s AND (%s::text IS NULL OR p.state = %s::text)
ORDER BY p.id LIMIT %s
"""


def capture_incomplete(reason: str, missing_body_urls: list[str] | None) -> str:
    """The capture server's ``incomplete.reason`` in words (docs/capture-server.md extension 14):
    ``captured at the page-load deadline, still loading <first URL without a body>``."""
    if reason != "page-load-deadline":
        return reason
    pending = (missing_body_urls or [])[:1]
    return "captured at the page-load deadline, still loading" + (f" {pending[0]}" if pending else "")


def incomplete_reason(row: dict) -> str | None:
    """Why a captured page's archive is incomplete, in one line, or None when it is complete
    (or unknown): captured at the page-load deadline (extension 14), the WACZ check's problem,
    bodies cut by the size limit, bodies missing."""
    if row.get("wacz_complete") is not False:
        return None
    parts = []
    if row.get("incomplete_reason"):
        parts.append(capture_incomplete(row["incomplete_reason"], row.get("missing_body_urls")))
    if row.get("wacz_problem"):
        parts.append(row["wacz_problem"])
    if row.get("truncated_urls"):
        parts.append(f"{len(row['truncated_urls'])} cut by the size limit ({row['truncated_urls'][0]})")
    if row.get("missing_body_count"):
        parts.append(f"{row['missing_body_count']} without a body")
    return "archive incomplete: " + ("; ".join(parts) if parts else "see `waggle archives --missing`")


THUMBNAIL_EXPIRY_S = 300


def page_row(row: dict, s3: Any = None) -> dict:
    """One API row (camelCase) of a ``crawl_pages`` row read by :data:`_PAGES`; a captured
    page whose archive is incomplete says why in ``reason`` (``archiveComplete`` false)."""
    reason = row["skip_reason"] if row["state"] != "captured" else incomplete_reason(row)
    shot = row.get("screenshot_key")
    thumbnail = s3.presign_get(shot, THUMBNAIL_EXPIRY_S, bucket=row.get("screenshot_bucket")) \
        if shot and s3 is not None and row.get("archive_id") else None
    return dict(
        url=row["url"], finalUrl=row["final_url"], depth=row["depth"], state=row["state"],
        failureClass=row["failure_class"], reason=reason, captureMs=row["capture_ms"], waitMs=row["wait_ms"],
        archiveId=str(row["archive_id"]) if row["archive_id"] else None,
        archiveComplete=row["wacz_complete"] if row["archive_id"] else None,
        **_contents(row), thumbnailUrl=thumbnail,
        links=row.get("links"),  # {discovered, kept, dropped: {reason: n}} or None (decision 232)
    )


def _contents(row: dict) -> dict:
    """``title, httpStatus, contentType, revisit, bytes`` of a page's archive: its facts from
    admission (decision 341), else what the collection's measure read (decision 155). A revisit's
    content type is its original's (None when the original is not known); ``revisit`` marks it."""
    measured_type = row.get("content_type")
    measured_revisit = measured_type == REVISIT_MIME
    if row.get("facts_read"):
        return dict(title=row["facts_title"], httpStatus=row["facts_http_status"],
                    contentType=row["facts_content_type"], revisit=bool(row["facts_revisit"]),
                    bytes=row["facts_bytes"] if row["facts_bytes"] is not None else row.get("bytes"))
    return dict(title=row.get("title"), httpStatus=row.get("http_status"),
                contentType=None if measured_revisit else measured_type,
                revisit=measured_revisit if row.get("archive_id") and measured_type else None, bytes=row.get("bytes"))


async def list_pages(pool: Any, crawl_id: uuid.UUID, *, state: str | None, limit: int,
                     after: int, s3: Any = None) -> dict | None:
    """``{"pages": [...], "nextCursor": str | None}`` for pages with ``id > after``, or None
    when the crawl does not exist. ``nextCursor`` is set when the page came back full. With
    ``s3``: unmeasured archives of these pages are measured, screenshots signed."""
    async with pool.connection() as conn:
        cur = await conn.execute("SELECT 1 FROM crawls WHERE id = %s", (crawl_id,))
        if await cur.fetchone() is None:
            return None
        cur = await conn.execute(_PAGES, (crawl_id, after, state, state, limit))
        rows = await cur.fetchall()
    unread = [r for r in rows if r["archive_id"] and not r["facts_read"]]
    if unread and s3 is not None and await backfill(pool, s3, unread):  # archives older than decision 341
        async with pool.connection() as conn:
            rows = await (await conn.execute(_PAGES, (crawl_id, after, state, state, limit))).fetchall()
    unmeasured = [{**r, "url": r["final_url"] or r["url"]} for r in rows if r["archive_id"] and r["sha256"] is None]
    if unmeasured and s3 is not None:
        measured = await measure_missing(pool, s3, unmeasured)
        rows = [{**r, **measured.get(str(r["archive_id"]), {})} for r in rows]
    pages = [page_row(r, s3) for r in rows]
    return {"pages": pages, "nextCursor": str(rows[-1]["id"]) if len(rows) == limit else None}
