"""``GET /api/me`` and ``GET /healthz``."""

from __future__ import annotations

from fastapi import APIRouter, Request

from ledger.api.authorize import may_submit
from ledger.api.identity import authenticate

router = APIRouter()


@router.get("/healthz")
async def healthz() -> dict:
    """Liveness only: 200 ``{"status":"ok"}`` without touching the database or OpenFGA."""
    return {"status": "ok"}


@router.get("/api/me")
async def me(request: Request) -> dict:
    """200 ``{subject, organizations, canSubmit}`` (never 404 for lack of permission); 401 without identity."""
    identity = await authenticate(request)
    return {
        "subject": identity.subject,
        "organizations": list(identity.organizations),
        "canSubmit": await may_submit(request, identity),
    }
