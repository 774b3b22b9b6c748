"""The capture servers' read access to one crawl (decision 405, ``ledger.crawl.read_tokens``).

``POST /api/crawls/{crawl_id}/read-token`` (the flow's token: ``can_submit`` and the crawl in one
of its organizations; 404 otherwise; 409 when the crawl is not running) → 201 ``{token,
expiresAt, crawlId, routes}``. :func:`crawl_reader` is the authorization of the three routes that
take it — and only they do: the token is no JWT, so every other route answers 401.
"""

from __future__ import annotations

import uuid

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from ledger.api.authorize import submitter
from ledger.api.identity import Unauthenticated
from ledger.crawl import read_tokens
from ledger.crawl.errors import Refused
from ledger.crawl.running import require_running
from ledger.crawl.times import iso_ms

router = APIRouter()

READ_ROUTES = ("POST /api/crawls/{id}/digests", "POST /api/crawls/{id}/previous", "GET /api/crawls/{id}/politeness")


def _bearer(request: Request) -> str | None:
    value = request.headers.get("authorization") or ""
    return value[len("Bearer "):] if value.startswith("Bearer ") else None


async def crawl_reader(request: Request, crawl_id: uuid.UUID) -> str:
    """The organization of ``crawl_id`` for a caller of one of :data:`READ_ROUTES`: a read token
    of that crawl (401 when it is not a live one of this crawl), or a submitter of the crawl's
    organization (401 / 404 as every crawl route; another organization's crawl is as absent as
    an unknown one)."""
    pool = request.app.state.services.pool
    token = _bearer(request)
    if read_tokens.looks_like(token):
        org = await read_tokens.organization_of(pool, crawl_id, token)  # type: ignore[arg-type]
        if org is None:
            raise Unauthenticated()
        return org
    identity = await submitter(request)
    async with pool.connection() as conn:
        row = await (await conn.execute("SELECT org_id FROM crawls WHERE id = %s AND org_id = ANY(%s)",
                                        (crawl_id, list(identity.organizations)))).fetchone()
    if row is None:
        raise Refused(404, "not found")
    return row["org_id"]


@router.post("/api/crawls/{crawl_id}/read-token", status_code=201)
async def issue_read_token(crawl_id: uuid.UUID, request: Request) -> JSONResponse:
    """A read token of the running crawl for its capture servers → 201 ``{token, expiresAt,
    crawlId, routes}`` (see the module docstring)."""
    identity = await submitter(request)
    pool = request.app.state.services.pool
    async with pool.connection() as conn:
        row = await (await conn.execute("SELECT 1 FROM crawls WHERE id = %s AND org_id = ANY(%s)",
                                        (crawl_id, list(identity.organizations)))).fetchone()
        if row is None:
            raise Refused(404, "not found")
        await require_running(conn, crawl_id, "its capture servers read nothing more")
    token, expires = await read_tokens.issue(pool, crawl_id, identity.subject)
    return JSONResponse({"token": token, "expiresAt": iso_ms(expires), "crawlId": str(crawl_id),
                         "routes": [r.replace("{id}", str(crawl_id)) for r in READ_ROUTES]}, status_code=201)
