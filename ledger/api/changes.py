"""``GET /api/crawls/{id}/changes?since={otherId}`` — what changed between two crawls (issue 27
item 3; ``ledger.crawl.changes``, docs/decisions/211-what-changed-between-two-crawls.md).

Authorization as every crawl route: ``can_submit`` and the crawl in one of the caller's
organizations, else 404 — for **both** crawls (an outsider's ``since`` is as absent as an
unknown id). ``since`` omitted: the previous finished crawl of the same workflow, else of the
same seeds (``ledger.crawl.changes.default_since``); none → 409 saying to give ``since``.
"""

from __future__ import annotations

import uuid

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from ledger.api.authorize import submitter
from ledger.crawl import crawls as crawl_store
from ledger.crawl.changes import changes, default_since
from ledger.crawl.errors import Refused

router = APIRouter()


NO_EARLIER = "this crawl has no earlier finished crawl of the same workflow or the same seeds to compare with"
NOT_YOURS = "the earlier crawl of this workflow is not one of your organizations'"


async def _default(request: Request, crawl_id: uuid.UUID, organizations: list[str]) -> tuple[uuid.UUID | None, str]:
    """``(since, how)`` when there is a default crawl to compare with, else ``(None, why not)``."""
    services = request.app.state.services
    found = await default_since(services.pool, crawl_id)
    if found is None:
        return None, NO_EARLIER
    if not await crawl_store.crawl_in_orgs(services.pool, uuid.UUID(found[0]), organizations):
        return None, NOT_YOURS
    return uuid.UUID(found[0]), found[1]


@router.get("/api/crawls/{crawl_id}/changes/since")
async def get_default_since(crawl_id: uuid.UUID, request: Request) -> JSONResponse:
    """The crawl ``changes`` compares with by default, asked without an error when there is none
    (decision 354): 200 ``{crawlId, since, sinceChosen, reason}`` — ``since`` a crawl id and
    ``sinceChosen`` ``workflow``/``same-seeds``, or both null and ``reason`` saying why. 404 as
    every crawl route."""
    identity = await submitter(request)
    if not await crawl_store.crawl_in_orgs(request.app.state.services.pool, crawl_id, identity.organizations):
        raise Refused(404, "not found")
    since, how = await _default(request, crawl_id, identity.organizations)
    return JSONResponse({"crawlId": str(crawl_id), "since": str(since) if since else None,
                         "sinceChosen": how if since else None, "reason": None if since else how},
                        headers={"Cache-Control": "no-store"})


@router.get("/api/crawls/{crawl_id}/changes")
async def get_changes(crawl_id: uuid.UUID, request: Request, since: str | None = None) -> JSONResponse:
    """200 the comparison (see ``ledger.crawl.changes.changes``); 400 a ``since`` that is not a
    crawl id or is the crawl itself; 404 either crawl unknown or another organization's; 409 no
    earlier crawl to compare with (``GET …/changes/since`` asks that without an error); 503
    without S3 (the archives' indexes are read from it)."""
    identity = await submitter(request)
    services = request.app.state.services
    if not await crawl_store.crawl_in_orgs(services.pool, crawl_id, identity.organizations):
        raise Refused(404, "not found")
    if since is not None:
        try:
            since_id = uuid.UUID(since.strip())
        except ValueError:
            raise Refused(400, f"since must be a crawl id (a UUID, as `waggle crawls` shows), not {since[:80]!r}") from None
        if since_id == crawl_id:
            raise Refused(400, "since is this crawl itself: give an earlier crawl's id")
        if not await crawl_store.crawl_in_orgs(services.pool, since_id, identity.organizations):
            raise Refused(404, "not found")
        how = "given"
    else:
        found, how = await _default(request, crawl_id, identity.organizations)
        if found is None:
            raise Refused(409, f"{how}: give since=<crawl id>", noEarlierCrawl=how)
        since_id = found
    if services.s3 is None:
        raise Refused(503, "S3 is not configured on this ledger (WAGGLE_S3_*): the archives cannot be read")
    body = await changes(services, identity, crawl_id, since_id, how)
    if body is None:
        raise Refused(404, "not found")
    return JSONResponse(body, headers={"Cache-Control": "no-store"})
