"""Archive routes (reference/ledger.md §6.4–§6.5).

* ``GET /api/archives[?before=<date-time>][&crawl=<crawl id>][&url=<text>]`` — ``crawl``: only
  archives captured by that crawl (its pages' task ids); ``url``: only source URLs containing
  the text (case-insensitive). Newest first by ``captured_at``, 50 rows per
  page in SQL, then filtered with one BatchCheck ``can_view`` (so a page may hold fewer than
  50 rows, even none, while older rows exist). ``before`` is a strict cursor (``captured_at <
  before``, millisecond precision). Rows: ``id, taskId, sourceUrl, labels, waczComplete,
  capturedAt, objectKey, crawlId`` (bucket is not returned; ``crawlId``: the crawl that captured
  it, null when none), and why an archive is incomplete, as its
  manifest said (issue 17 item 3; null when it did not say): ``missingBodyUrls`` (≤ 20 URLs the
  page requested that have no response body in the archive), ``missingBodyCount`` (all of
  them), ``truncatedUrls`` (≤ 20 bodies a size cap dropped), ``incompleteReason``
  (``page-load-deadline``: captured at the page-load deadline, docs/capture-server.md extension 14);
  ``revisits`` ``{count, bytesSaved}``: the WACZ's revisit records and the body bytes they did
  not store again (decision 181).
  ``nextBefore``: the ``before`` of the next page (the last SQL row's ``capturedAt``) when this
  page was full before the filter, else null — no older rows: a list is done when it is null.
* ``GET /api/archives/count[?crawl=…][&url=…]`` — ``{"count": N}``: how many archives the
  list with the same filters holds for this caller, exactly (every matching id is checked:
  :meth:`ledger.authz.fga.Fga.viewable`, ListObjects past one page); the web page's
  "50 of 1,234" (issue 30 item 4, decision 263).
* ``POST /api/archives/{id}/url`` — the only enforcement point: Check ``can_view`` with the
  caller's organizations as contextual ``member`` tuples and ``current_time``; denied or not
  in the ledger → 404 ``{"error":"not found"}``; else a presigned S3 GET valid 300 s:
  ``{"url", "expiresIn": 300}``. Downloads never pass through the ledger's origin (case C12).

Validation precedes authentication: a malformed ``before`` or id is 400 even anonymously.
"""

from __future__ import annotations

import logging
import re
import uuid
from datetime import datetime, timezone
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from ledger.api.errors import NotPermitted
from ledger.archive import facts
from ledger.api.identity import authenticate

log = logging.getLogger("waggle.archives")
router = APIRouter()

PAGE_SIZE = 50
URL_EXPIRY_S = 300


def iso_ms(value: datetime) -> str:
    """ISO 8601 UTC with milliseconds and ``Z`` (e.g. ``2026-09-19T14:53:36.759Z``)."""
    return value.astimezone(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _bad(message: str) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=400)


def parse_before(values: list[str]) -> datetime | None | JSONResponse:
    """The ``before`` cursor, or a 400 response saying what to send instead."""
    if not values:
        return None
    if len(values) > 1:
        return _bad("before may be given once (the capturedAt of the last row you have)")
    # an unencoded "+hh:mm" offset arrives as " hh:mm" (form decoding): read it as meant
    raw = re.sub(r" (\d{2}:?\d{2})$", r"+\1", values[0].strip())
    try:
        when = datetime.fromisoformat(raw)
    except ValueError:
        when = None
    if when is None or when.tzinfo is None or "T" not in raw.upper():
        return _bad("before must be a date-time with a time zone offset, e.g. 2026-09-19T14:53:36.759Z")
    return when


def parse_filters(params: Any) -> tuple[str | None, str | None] | JSONResponse:
    """``(crawl id, url text)`` of the query, or a 400 response."""
    crawl = params.get("crawl") or None
    text = params.get("url") or None
    if crawl is not None:
        try:
            crawl = str(uuid.UUID(crawl))
        except ValueError:
            return _bad("crawl must be a crawl id (UUID), e.g. 3f2b8c1e-8d0a-4d59-9f5e-0c6a1b2d3e4f")
    if text is not None and len(text) > 2000:
        return _bad("url filter is longer than 2,000 characters")
    return crawl, text


def _like(text: str) -> str:
    return "%" + text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"


def row_json(r: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": str(r["id"]),
        "taskId": str(r["task_id"]),
        "sourceUrl": r["source_url"],
        "labels": list(r["labels"] or []),
        "waczComplete": r["wacz_complete"],
        "capturedAt": iso_ms(r["captured_at"]),
        "objectKey": r["object_key"],
        "missingBodyUrls": None if r["missing_body_urls"] is None else list(r["missing_body_urls"]),
        "missingBodyCount": r["missing_body_count"],
        "truncatedUrls": None if r["truncated_urls"] is None else list(r["truncated_urls"]),
        "incompleteReason": r.get("incomplete_reason"),
        # revisit records in the WACZ and the body bytes they did not store (decision 181)
        "revisits": {"count": r.get("revisit_count") or 0, "bytesSaved": r.get("revisit_bytes_saved") or 0},
        # wacz-auth signature as the ledger found it at admission (None: not signed / not checked)
        "signed": r.get("signed"),
        "signatureDomain": r.get("signature_domain"),
        "signatureVerified": r.get("signature_verified"),
        # the crawl that captured it (its correlation id names an existing crawl), else null
        "crawlId": str(r["crawl_id"]) if r.get("crawl_id") else None,
        # what is in it (issue 25 item 5, decision 341): read at admission (older archives: the
        # first time a list shows them); null only where the archive does not say
        "bytes": r.get("facts_bytes") if r.get("facts_bytes") is not None else r.get("bytes"),
        "title": r.get("facts_title") if r.get("facts_read") else r.get("title"),
    }


@router.get("/api/archives")
async def list_archives(request: Request) -> Any:
    """200 ``{"archives": [...], "nextBefore"}`` — the caller's viewable rows of one page and the
    next page's cursor (null at the end); 400 for a bad ``before``; 401 without identity."""
    before = parse_before(request.query_params.getlist("before"))
    if isinstance(before, JSONResponse):
        return before
    filters = parse_filters(request.query_params)
    if isinstance(filters, JSONResponse):
        return filters
    crawl, text = filters
    identity = await authenticate(request)
    services = request.app.state.services
    async with services.pool.connection() as conn:
        rows = await (await conn.execute(
            """
            SELECT id, task_id, source_url, labels, wacz_complete, captured_at, object_key,
                   missing_body_urls, missing_body_count, truncated_urls, incomplete_reason,
                   revisit_count, revisit_bytes_saved, signed, signature_domain, signature_verified,
                   (SELECT c.id FROM crawls c WHERE c.id = CASE WHEN a.correlation_id
                      ~* '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$'
                      THEN a.correlation_id::uuid END) AS crawl_id,
                   f.bytes, f.title, a.bucket, """ + facts.FACTS_COLUMNS + """
            FROM archives a
            LEFT JOIN archive_files f ON f.archive_id = a.id """ + facts.FACTS_JOIN + """
            WHERE (%(before)s::timestamptz IS NULL OR captured_at < %(before)s::timestamptz)
              AND (%(url)s::text IS NULL OR source_url ILIKE %(url)s::text)
              AND (%(crawl)s::uuid IS NULL OR a.task_id::text IN (
                    SELECT p.task_id FROM crawl_pages p WHERE p.crawl_id = %(crawl)s::uuid AND p.task_id IS NOT NULL))
            ORDER BY captured_at DESC, id DESC
            LIMIT %(limit)s
            """,
            {"before": before, "limit": PAGE_SIZE, "crawl": crawl, "url": _like(text) if text else None},
        )).fetchall()
    if not rows:
        return {"archives": [], "nextBefore": None}
    allowed = await services.authz.viewable(identity, [str(r["id"]) for r in rows])
    # the cursor comes from the unfiltered page: rows hidden from this caller still move it on
    next_before = iso_ms(rows[-1]["captured_at"]) if len(rows) == PAGE_SIZE else None
    shown = [r for r in rows if str(r["id"]) in allowed]
    unread = [r for r in shown if not r["facts_read"]]
    if unread:  # archives admitted before their facts were kept at admission (decision 341)
        read = await facts.backfill(services.pool, services.s3, unread)
        shown = [{**r, **facts.facts_columns(read.get(str(r["id"])))} for r in shown]
    return {"archives": [row_json(r) for r in shown], "nextBefore": next_before}


@router.get("/api/archives/count")
async def count_archives(request: Request) -> Any:
    """200 ``{"count": N}`` — the caller's viewable archives under the list's ``crawl``/``url``
    filters; 400 for a bad filter; 401 without identity."""
    filters = parse_filters(request.query_params)
    if isinstance(filters, JSONResponse):
        return filters
    crawl, text = filters
    identity = await authenticate(request)
    services = request.app.state.services
    async with services.pool.connection() as conn:
        rows = await (await conn.execute(
            """
            SELECT a.id FROM archives a
            WHERE (%(url)s::text IS NULL OR source_url ILIKE %(url)s::text)
              AND (%(crawl)s::uuid IS NULL OR a.task_id::text IN (
                    SELECT p.task_id FROM crawl_pages p WHERE p.crawl_id = %(crawl)s::uuid AND p.task_id IS NOT NULL))
            """,
            {"crawl": crawl, "url": _like(text) if text else None},
        )).fetchall()
    if not rows:
        return {"count": 0}
    return {"count": len(await services.authz.viewable(identity, [str(r["id"]) for r in rows]))}


@router.post("/api/archives/{archive_id}/url")
async def sign_url(archive_id: str, request: Request) -> Any:
    """200 ``{"url": <presigned GET>, "expiresIn": 300}``; 400 for a non-UUID id; 401 without
    identity; 404 ``{"error":"not found"}`` when denied or unknown."""
    try:
        aid = str(uuid.UUID(archive_id))
    except ValueError:
        return _bad("the archive id must be a UUID, e.g. 3f2b8c1e-8d0a-4d59-9f5e-0c6a1b2d3e4f")
    identity = await authenticate(request)
    services = request.app.state.services
    if not await services.authz.can_view(identity, aid):
        raise NotPermitted()
    async with services.pool.connection() as conn:
        # one statement: autocommit saves the BEGIN and COMMIT round trips of an implicit
        # transaction (the connection goes back to the pool as it came)
        was = conn.autocommit
        await conn.set_autocommit(True)
        try:
            row = await (await conn.execute(
                "SELECT bucket, object_key FROM archives WHERE id = %s", (aid,))).fetchone()
        finally:
            await conn.set_autocommit(was)
    if row is None:
        log.warning("Check allowed an archive that is not in the ledger", extra={"archiveId": aid})
        raise NotPermitted()
    name = row["object_key"].rsplit("/", 1)[-1]
    url = services.s3.presign_get(row["object_key"], URL_EXPIRY_S, bucket=row["bucket"], download_name=name)
    log.info("Signed URL issued", extra={"archiveId": aid})
    return {"url": url, "expiresIn": URL_EXPIRY_S}
