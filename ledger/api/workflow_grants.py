"""Grants on a crawl workflow (decision 351): who else may view, run or edit it.

``GET /api/workflows/{id}/grants`` (``can_view``) → ``{workflowId, grants: [{user, role,
grantedBy, grantedAt}]}``; ``PUT /api/workflows/{id}/grants`` ``{user, role}`` (role ``viewer``,
``runner`` or ``editor``; a user's new role replaces the old) and ``DELETE
/api/workflows/{id}/grants/{user}`` need ``can_edit`` (an editor of the workflow or an admin of
its organization). Who may not see the workflow gets 404 as on every route; who may see it but
not edit it gets 403 saying who may. The tuples go through ``fga_outbox`` in the grant's
transaction and are delivered right after the commit (the worker retries if OpenFGA is down).
"""

from __future__ import annotations

import uuid
from typing import Annotated

from fastapi import APIRouter, Request
from pydantic import Field

from ledger.api.crawls import _Strict
from ledger.api.workflows import _allowed, _deliver_tuples, _may
from ledger.crawl import workflow_grants as grants
from ledger.crawl.errors import Refused

router = APIRouter()


class GrantBody(_Strict):
    user: Annotated[str, Field(min_length=1, max_length=205)]
    role: str


async def _editor(request: Request, workflow_id: uuid.UUID):
    """The caller's identity when it may edit the workflow: 404 when it may not even see it,
    403 (with who may) when it may see it only."""
    identity, _ = await _allowed(request, "can_view", workflow_id)
    if not await _may(request, identity, "can_edit", workflow_id):
        raise Refused(403, "only an editor of this workflow or an admin of its organization may change who may"
                           " view, run or edit it; ask one of them (`waggle workflows grants` lists its editors)")
    return identity


async def _listed(request: Request, workflow_id: uuid.UUID) -> dict:
    async with request.app.state.services.pool.connection() as conn:
        return {"workflowId": str(workflow_id), "grants": await grants.listed(conn, workflow_id)}


@router.get("/api/workflows/{workflow_id}/grants")
async def list_grants(workflow_id: uuid.UUID, request: Request) -> dict:
    """The workflow's grants (``can_view``), editors first."""
    await _allowed(request, "can_view", workflow_id)
    return await _listed(request, workflow_id)


@router.put("/api/workflows/{workflow_id}/grants")
async def put_grant(workflow_id: uuid.UUID, body: GrantBody, request: Request) -> dict:
    """Give ``user`` ``role`` → ``{grant, previousRole, grants}``. 400 names a bad user or role."""
    subject, role = grants.check_subject(body.user), grants.check_role(body.role)
    identity = await _editor(request, workflow_id)
    async with request.app.state.services.pool.connection() as conn:
        grant, previous = await grants.put(conn, workflow_id, subject, role, identity.subject)
    await _deliver_tuples(request)
    return {"grant": grant, "previousRole": previous, **await _listed(request, workflow_id)}


@router.delete("/api/workflows/{workflow_id}/grants/{user:path}")
async def revoke_grant(workflow_id: uuid.UUID, user: str, request: Request) -> dict:
    """Take back ``user``'s grant → ``{revoked: {user, role}, grants}``; 404 naming the user
    when it has none. The organization's admins and submitters keep what the organization gives them."""
    subject = grants.check_subject(user)
    await _editor(request, workflow_id)
    async with request.app.state.services.pool.connection() as conn:
        async with conn.transaction():
            role = await grants.revoke(conn, workflow_id, subject)
    if role is None:
        raise Refused(404, f"user {subject!r} has no grant on this workflow (its organization's members may"
                           " still view it, submitters run it, admins edit it)")
    await _deliver_tuples(request)
    return {"revoked": {"user": subject, "role": role}, **await _listed(request, workflow_id)}


