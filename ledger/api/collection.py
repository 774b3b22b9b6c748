"""The crawl as one collection (issue 25; docs/decisions/151-crawl-collection.md).

* ``GET /api/crawls/{id}/collection`` and its twin ``…/collection.json`` (ReplayWeb.page picks
  the loader by the name's extension) — the crawl's admitted archives the caller may view as one
  multi-WACZ collection (``ledger.crawl.collection``), each member signed for
  ``WAGGLE_COLLECTION_URL_EXPIRY_S`` (300 s); asking again signs again. Authorization as every
  crawl route (``can_submit`` and the crawl's organization; else 404), or ``?ticket=``.
* ``POST /api/crawls/{id}/download`` → 200 ``{"url", "expiresIn", "name", "bytes", "members",
  "missingCount"}`` (a signed GET of the crawl's combined WACZ, saved as ``name``) once built, 202
  ``{"state": "building", "retryAfterS"}`` while it is built (first request for this set of
  members), 502 ``{"error"}`` when the build failed (the next request tries again); 409 when the
  caller may view no archive of the crawl (``ledger.crawl.download``).
* ``POST /api/crawls/{id}/collection/ticket`` → 201 ``{"path": "/api/crawls/{id}/collection.json?ticket=…",
  "expiresAt"}``: a read-only ticket for the replay origin's player (``ledger.crawl.tickets``),
  valid ``WAGGLE_COLLECTION_TICKET_TTL_S`` (8 h).
"""

from __future__ import annotations

import uuid
from typing import Any

from fastapi import APIRouter, Request
import orjson
from fastapi.responses import JSONResponse, Response

from ledger.api.authorize import may_submit, submitter
from ledger.api.errors import NotPermitted
from ledger.api.identity import Identity
from ledger.crawl import crawls as crawl_store
from ledger.crawl import tickets
from ledger.crawl import download
from ledger.crawl import replay_pages
from ledger.crawl.collection import collection
from ledger.crawl.errors import Refused

router = APIRouter()


async def _caller(request: Request, crawl_id: uuid.UUID, token: str | None = None) -> Identity:
    """The ticket's holder (``token``, else ``?ticket=``) or the authenticated submitter, who
    must belong to the crawl's organization; 404 otherwise, as for every crawl route."""
    services = request.app.state.services
    token = token if token is not None else request.query_params.get("ticket")
    if token is not None:
        identity = await tickets.holder(services.pool, crawl_id, token)
        if identity is None or not await may_submit(request, identity):
            raise NotPermitted()
    else:
        identity = await submitter(request)
    if not await crawl_store.crawl_in_orgs(services.pool, crawl_id, identity.organizations):
        raise Refused(404, "not found")
    return identity


async def _answer(crawl_id: uuid.UUID, request: Request) -> Any:
    identity = await _caller(request, crawl_id)
    services = request.app.state.services
    if services.s3 is None:
        raise Refused(503, "S3 is not configured on this ledger (WAGGLE_S3_*): nothing can be signed")
    body = await collection(services, identity, crawl_id, expiry_s=services.settings.collection_url_expiry_s)
    if body is None:
        raise Refused(404, "not found")
    token = request.query_params.get("ticket")
    if token is not None:  # the player's form: it looks pages up by URL, and re-signs members lazily
        base = str(request.base_url).rstrip("/")
        body["pagesQueryUrl"] = f"{base}/api/crawls/{crawl_id}/collection/t/{token}/pages"
        body["initialPages"] = replay_pages.initial(body)
        body["totalPages"] = len(replay_pages.own(body))
    # signed URLs inside: no cache may keep them past their expiry. orjson: the stdlib encoder
    # was a fifth of the answer's CPU at 10,000 members (the same compact UTF-8 JSON)
    return Response(orjson.dumps(body), media_type="application/json", headers={"Cache-Control": "no-store"})


@router.get("/api/crawls/{crawl_id}/collection")
async def get_collection(crawl_id: uuid.UUID, request: Request) -> Any:
    """200 the multi-WACZ collection (see ``ledger.crawl.collection``); 401 without identity;
    404 for an outsider, an unknown crawl or a bad ticket; 503 without S3."""
    return await _answer(crawl_id, request)


@router.get("/api/crawls/{crawl_id}/collection.json", include_in_schema=False)
async def get_collection_json(crawl_id: uuid.UUID, request: Request) -> Any:
    return await _answer(crawl_id, request)


@router.get("/api/crawls/{crawl_id}/collection/t/{ticket}/pages", include_in_schema=False)
async def get_pages_query(crawl_id: uuid.UUID, ticket: str, request: Request) -> Any:
    """The player's page lookup (wabac.js ``pagesQueryUrl``): ``?url=`` (exact) or ``?search=``
    (prefix), ``pageSize`` ≤ 100 → ``{"items": [{id, url, ts, title, filename, status, mime,
    depth, isSeed}], "total"}`` of the viewable members; the ticket is in the path because the
    player appends its own query."""
    identity = await _caller(request, crawl_id, ticket)
    q = request.query_params
    try:
        size = max(1, min(100, int(q.get("pageSize") or 25)))
    except ValueError:
        raise Refused(400, "pageSize must be a whole number from 1 to 100") from None
    exact, prefix = q.get("url"), q.get("search")
    if not exact and not prefix:
        raise Refused(400, "give url (a page's URL) or search (the start of one)")
    found = await replay_pages.lookup(request.app.state.services, identity, crawl_id, exact or prefix,
                                      exact=bool(exact), limit=size)
    return JSONResponse(found, headers={"Cache-Control": "no-store"})


@router.post("/api/crawls/{crawl_id}/collection/ticket", status_code=201)
async def post_ticket(crawl_id: uuid.UUID, request: Request) -> JSONResponse:
    """201 ``{"path", "expiresAt"}`` — the collection's path with a ticket for the replay origin;
    404 for an outsider (same rule as ``GET``)."""
    identity = await submitter(request)
    services = request.app.state.services
    if not await crawl_store.crawl_in_orgs(services.pool, crawl_id, identity.organizations):
        raise Refused(404, "not found")
    token, expires = await tickets.issue(services.pool, crawl_id, identity, services.settings.collection_ticket_ttl_s)
    when = expires.isoformat(timespec="milliseconds").replace("+00:00", "Z")
    return JSONResponse({"path": f"/api/crawls/{crawl_id}/collection.json?ticket={token}", "expiresAt": when},
                        status_code=201)


@router.post("/api/crawls/{crawl_id}/download")
async def post_download(crawl_id: uuid.UUID, request: Request) -> JSONResponse:
    """The crawl as one WACZ of the archives the caller may view: signed URL (200), building
    (202, ask again), failed (502), nothing viewable (409); 404 for an outsider."""
    identity = await _caller(request, crawl_id)
    services = request.app.state.services
    if services.s3 is None:
        raise Refused(503, "S3 is not configured on this ledger (WAGGLE_S3_*): nothing can be signed")
    expiry = services.settings.collection_url_expiry_s
    body = await collection(services, identity, crawl_id, expiry_s=expiry, with_rows=True)
    if body is None:
        raise Refused(404, "not found")
    if not body["resources"]:
        raise Refused(409, "this crawl has no archive you may view yet: nothing to download", missingCount=body["missingCount"])
    state, key, size = await download.prepare(services, body)
    if state == "building":
        return JSONResponse({"state": "building", "retryAfterS": 2}, status_code=202, headers={"Retry-After": "2"})
    if state == "failed":
        return JSONResponse({"error": key}, status_code=502)
    name = download.file_name(body)
    url = services.s3.presign_get(key, expiry, download_name=name)
    return JSONResponse({"url": url, "expiresIn": expiry, "name": name, "bytes": size,
                         "members": len(body["resources"]), "missingCount": body["missingCount"]},
                        headers={"Cache-Control": "no-store"})
