"""``GET /api/scripts``: the default page-script set a crawl without ``scripts`` would pin
(identities only: id, version, phase, sha256 — never source or options)."""

from __future__ import annotations

from fastapi import APIRouter, Request

from ledger.api.authorize import submitter
from ledger.crawl.scripts import default_set, identity

router = APIRouter()


@router.get("/api/scripts")
async def list_scripts(request: Request) -> dict:
    """200 ``{"scripts": [{id, version, phase, sha256}]}``; 401 / 404 as every submitter route."""
    await submitter(request)
    async with request.app.state.services.pool.connection() as conn:
        scripts = await default_set(conn)
    return {"scripts": [identity(s) for s in scripts]}
