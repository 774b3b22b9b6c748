"""The crawl as one collection (issue 25; docs/decisions/151-crawl-collection.md).

* ``GET /api/crawls/{id}/collection`` and its twin ``…/collection.json`` (ReplayWeb.page picks
  the loader by the name's extension) — the crawl's admitted archives the caller may view as one
  multi-WACZ collection (``ledger.crawl.collection``), each member's ``path`` a ledger path.
  Authorization as every crawl route (``can_submit`` and the crawl's organization; else 404),
  or ``?ticket=``.
* ``GET|HEAD /api/crawls/{id}/members/{archive id}.wacz`` (with a ticket:
  ``…/collection/t/{ticket}/members/{archive id}.wacz``) → 302 to the member's S3 object signed
  now for ``WAGGLE_COLLECTION_URL_EXPIRY_S`` (300 s), after a Check ``can_view``; 404 otherwise
  (decision 371). A player reading a member at any time of its session gets a fresh URL.
* ``POST /api/crawls/{id}/download`` → 200 ``{"url", "expiresIn", "name", "bytes", "members",
  "originals", "missingCount"}`` (``originals``: how many of the members are earlier crawls' archives
  holding the originals of this crawl's revisits, so the file stands alone) (a signed GET of the crawl's combined WACZ, saved as ``name``) once built, 202
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
from fastapi.responses import JSONResponse, Response

from ledger.api.authorize import may_submit, submitter
from ledger.api.errors import NotPermitted
from ledger.api.identity import Identity
from ledger.crawl import crawls as crawl_store
from ledger.crawl import tickets
from ledger.crawl import download
from ledger.crawl import replay_pages
from ledger.crawl.collection import collection_json, member_location, viewable_members
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
    token = request.query_params.get("ticket")
    extra = None
    if token is not None:  # the player's form: it looks pages up by URL; members through the ticket
        base = str(request.base_url).rstrip("/")
        extra = lambda members: replay_pages.player_keys(base, str(crawl_id), token, members)  # noqa: E731
    body = await collection_json(services, identity, crawl_id, expiry_s=services.settings.collection_url_expiry_s,
                                 ticket=token, extra=extra)
    if body is None:
        raise Refused(404, "not found")
    # no signature inside (members are ledger paths), but who may view what changes: never kept
    return Response(body, media_type="application/json", headers={"Cache-Control": "no-store"})


async def _member(crawl_id: uuid.UUID, archive_id: uuid.UUID, request: Request, ticket: str | None) -> Response:
    """302 to the member's S3 object, signed now for ``WAGGLE_COLLECTION_URL_EXPIRY_S`` — after
    the crawl route's rule (404 for an outsider), the archive's membership of the crawl and a
    Check ``can_view`` (404 when any fails). The ledger never streams the bytes."""
    identity = await _caller(request, crawl_id, ticket)
    services = request.app.state.services
    if services.s3 is None:
        raise Refused(503, "S3 is not configured on this ledger (WAGGLE_S3_*): nothing can be signed")
    aid = str(archive_id)
    where = await member_location(services, crawl_id, aid)
    if where is None or not await services.authz.can_view(identity, aid):
        raise Refused(404, "not found")
    url = services.s3.presign_get(where[1], services.settings.collection_url_expiry_s, bucket=where[0])
    return Response(status_code=302, headers={"Location": url, "Cache-Control": "no-store"})


@router.api_route("/api/crawls/{crawl_id}/members/{archive_id}.wacz", methods=["GET", "HEAD"])
async def get_member(crawl_id: uuid.UUID, archive_id: uuid.UUID, request: Request) -> Response:
    """302 to a freshly signed S3 GET of one member of the crawl's collection; 404 for an
    outsider, an archive that is not the crawl's member, or one the caller may not view."""
    return await _member(crawl_id, archive_id, request, None)


@router.api_route("/api/crawls/{crawl_id}/collection/t/{ticket}/members/{archive_id}.wacz", methods=["GET", "HEAD"],
                  include_in_schema=False)
async def get_member_with_ticket(crawl_id: uuid.UUID, ticket: str, archive_id: uuid.UUID, request: Request) -> Response:
    """The same for the replay origin's player: the ticket in the path, as for its page lookup."""
    return await _member(crawl_id, archive_id, request, ticket)


@router.get("/api/crawls/{crawl_id}/collection")
async def get_collection(crawl_id: uuid.UUID, request: Request) -> Any:
    """200 the multi-WACZ collection (see ``ledger.crawl.collection``); 401 without identity;
    404 for an outsider, an unknown crawl or a bad ticket."""
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
    got = await viewable_members(services, identity, crawl_id)
    if got is None:
        raise Refused(404, "not found")
    head, members, missing = got
    if not members:
        raise Refused(409, "this crawl has no archive you may view yet: nothing to download", missingCount=len(missing))
    state, key, size = await download.prepare(services, head, members, missing)
    if state == "building":
        return JSONResponse({"state": "building", "retryAfterS": 2}, status_code=202, headers={"Retry-After": "2"})
    if state == "failed":
        return JSONResponse({"error": key}, status_code=502)
    name = download.file_name(head)
    url = services.s3.presign_get(key, expiry, download_name=name)
    return JSONResponse({"url": url, "expiresIn": expiry, "name": name, "bytes": size,
                         "members": len(members), "originals": sum(m.original for m in members),
                         "missingCount": len(missing)},
                        headers={"Cache-Control": "no-store"})
