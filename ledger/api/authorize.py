"""Route-side authorization helpers (the Check itself lives in ``ledger.authz.fga``)."""

from __future__ import annotations

from fastapi import Request

from ledger.api.errors import NotPermitted
from ledger.api.identity import Identity, authenticate


async def may_submit(request: Request, identity: Identity) -> bool:
    """``can_submit`` on any of the caller's organizations (no organizations → False, no call)."""
    if not identity.organizations:
        return False
    return bool(await request.app.state.services.authz.can_submit(identity))


async def submitter(request: Request) -> Identity:
    """Authenticate (401) and require ``can_submit`` (404 ``{"error":"not found"}``)."""
    identity = await authenticate(request)
    if not await may_submit(request, identity):
        raise NotPermitted()
    return identity
