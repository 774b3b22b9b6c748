"""Crawl workflow routes (issue 27 item 2, decision 201): saved crawls, run now or on a schedule.

``GET/POST /api/workflows``, ``GET/PATCH/DELETE /api/workflows/{id}``, ``POST
/api/workflows/{id}/run``, ``GET /api/workflows/{id}/history``. JSON camelCase, unknown keys →
400, validation before authorization; who may view, run and edit is an OpenFGA Check on
``workflow:<id>`` (the caller's organizations as contextual ``member`` tuples); a denial is a
404. Registered with the crawl routes (a run starts a crawl).
"""

from __future__ import annotations

import logging
import uuid
from typing import Annotated

from fastapi import APIRouter, BackgroundTasks, Request
from fastapi.responses import JSONResponse
from pydantic import Field, ValidationError, field_validator

from ledger.api.crawls import CrawlRequest, _Strict, check_limits, launch
from ledger.api.errors import NotPermitted, describe_validation
from ledger.api.identity import Identity, authenticate
from ledger.authz.fga import now_iso
from ledger.authz.outbox import drain_all
from ledger.crawl import schedule_reconcile, workflow_grants
from ledger.crawl import workflow_schedule as schedules
from ledger.crawl import workflows as store
from ledger.crawl.errors import Refused

log = logging.getLogger("waggle.workflows")
router = APIRouter()

NAME_MAX = 200
NOTES_MAX = 10_000


class Schedule(_Strict):
    """``cron``: 5 fields (minute hour day-of-month month day-of-week); ``timeZone``: IANA."""

    cron: Annotated[str, Field(min_length=1, max_length=200)]
    timeZone: Annotated[str, Field(min_length=1, max_length=64)] = "UTC"


class WorkflowFields(_Strict):
    name: Annotated[str, Field(min_length=1, max_length=NAME_MAX)] | None = None
    notes: Annotated[str, Field(max_length=NOTES_MAX)] | None = None
    options: CrawlRequest | None = None  # exactly what POST /api/crawls takes
    schedule: Schedule | None = None  # null (in an edit): no schedule any more

    @field_validator("name")
    @classmethod
    def _name(cls, value: str | None) -> str | None:
        if value is not None and not value.strip():
            raise ValueError("name must not be blank")
        return value.strip() if value is not None else None


class NewWorkflow(WorkflowFields):
    name: Annotated[str, Field(min_length=1, max_length=NAME_MAX)]
    options: CrawlRequest
    organization: Annotated[str, Field(min_length=1, max_length=200)] | None = None


class RunBody(_Strict):
    trigger: str = "manual"

    @field_validator("trigger")
    @classmethod
    def _trigger(cls, value: str) -> str:
        if value not in ("manual", "schedule"):
            raise ValueError('trigger must be "manual" or "schedule"')
        return value


def _options_json(options: CrawlRequest) -> dict:
    """The JSON kept for a workflow: the fields the caller set, as the model normalized them
    (defaults apply at each run, so a changed default reaches saved workflows)."""
    return options.model_dump(mode="json", exclude_unset=True)


def _schedule(given: Schedule | None) -> tuple[str | None, str | None]:
    if given is None:
        return None, None
    return schedules.check(given.cron, given.timeZone), given.timeZone


async def _may(request: Request, identity: Identity, relation: str, workflow_id: uuid.UUID) -> bool:
    authz = request.app.state.services.authz
    members = [{"user": f"user:{identity.subject}", "relation": "member", "object": f"organization:{o}"}
               for o in dict.fromkeys(identity.organizations) if o]
    return await authz.check(f"user:{identity.subject}", relation, f"workflow:{workflow_id}",
                             contextual=members or None, context={"current_time": now_iso()})


async def _allowed(request: Request, relation: str, workflow_id: uuid.UUID) -> tuple[Identity, dict]:
    """Authenticate, Check ``relation`` on the workflow (404 when denied or gone); its row."""
    identity = await authenticate(request)
    if not identity.subject or not await _may(request, identity, relation, workflow_id):
        raise NotPermitted()
    async with request.app.state.services.pool.connection() as conn:
        row = await store.get(conn, workflow_id)
    if row is None:
        raise NotPermitted()
    return identity, row


async def _deliver_tuples(request: Request) -> None:
    """Deliver the outbox now (the worker would, within its period) so the creator's next Check
    finds the workflow's tuples; OpenFGA down → the worker retries, the workflow is saved."""
    services = request.app.state.services
    try:
        await drain_all(services.pool, services.authz)
    except Exception as exc:  # noqa: BLE001 — the outbox keeps the tuples until OpenFGA takes them
        log.warning("workflow tuples left to the outbox worker: %s", exc)


def _full_view(row: dict, *, can_run: bool | None = None, can_edit: bool | None = None) -> dict:
    out = store.view(row)
    if row["schedule_cron"]:
        out["schedule"]["nextRuns"] = schedules.next_runs(row["schedule_cron"], row["schedule_tz"])
        if warning := schedules.frequency_warning(row["schedule_cron"], row["schedule_tz"]):
            out["schedule"]["warning"] = warning  # saved as given (decision 403)
    if can_run is not None:
        out["canRun"], out["canEdit"] = can_run, can_edit
    return out


@router.get("/api/workflows")
async def list_workflows(request: Request) -> dict:
    """Every workflow the caller may view (OpenFGA ListObjects), by name, with its last crawl."""
    identity = await authenticate(request)
    services = request.app.state.services
    ids = sorted(await services.authz.list_viewable(identity, type="workflow"))
    async with services.pool.connection() as conn:
        rows = await store.list_in(conn, ids)
    return {"workflows": [store.view(r) for r in rows]}


@router.post("/api/workflows", status_code=201)
async def create_workflow(body: NewWorkflow, request: Request) -> JSONResponse:
    """Save a workflow → 201 (the workflow). A schedule that may start crawls less than an hour
    apart is saved with ``schedule.warning`` (a sentence; decision 403). 400 names a bad option,
    an unusable seed, a cron expression or time zone; 409 a name the organization already uses;
    503 when Windmill does not take the schedule (nothing saved). Needs ``can_submit`` on the organization (default: the caller's first)."""
    check_limits(request, body.options)
    cron, tz = _schedule(body.schedule)
    identity = await authenticate(request)
    org = body.organization or (identity.organizations[0] if identity.organizations else None)
    services = request.app.state.services
    if org is None or org not in identity.organizations or not await services.authz.check(
            f"user:{identity.subject}", "can_submit", f"organization:{org}"):
        raise NotPermitted()
    async with services.pool.connection() as conn:
        async with conn.transaction():  # Windmill last; a commit failing after it: decision 352's reconciler
            await schedule_reconcile.hold_shared(conn)
            row = await store.create(conn, org_id=org, name=body.name, notes=body.notes or "",
                                     options=_options_json(body.options), cron=cron, tz=tz, creator=identity.subject)
            if cron:
                path = await schedules.put(services.http, services.settings, row["id"], row["name"], cron, tz)
                row = await store.update(conn, row["id"], {"windmill_schedule": path})
    await _deliver_tuples(request)
    log.info("Workflow %s %r created by %s for %s", row["id"], row["name"], identity.subject, org)
    return JSONResponse(_full_view(row), status_code=201)


@router.get("/api/workflows/{workflow_id}")
async def get_workflow(workflow_id: uuid.UUID, request: Request) -> dict:
    """The workflow (``can_view``) with ``canRun``/``canEdit``, its schedule's next 3 runs and
    its ``grants`` (``[{user, role, grantedBy, grantedAt}]``, decision 351)."""
    identity, row = await _allowed(request, "can_view", workflow_id)
    out = _full_view(row, can_run=await _may(request, identity, "can_run", workflow_id),
                     can_edit=await _may(request, identity, "can_edit", workflow_id))
    async with request.app.state.services.pool.connection() as conn:
        out["grants"] = await workflow_grants.listed(conn, workflow_id)
    return out


@router.patch("/api/workflows/{workflow_id}")
async def edit_workflow(workflow_id: uuid.UUID, body: WorkflowFields, request: Request) -> dict:
    """Change the fields given (``can_edit``): ``options`` replaces the saved options whole;
    ``schedule: null`` removes the schedule (and its Windmill schedule). Errors as creating."""
    given = body.model_fields_set
    if "options" in given and body.options is None:
        raise Refused(400, "options cannot be null: send the crawl's options", fields={"options": "required"})
    if "name" in given and body.name is None:
        raise Refused(400, "name cannot be null", fields={"name": "required"})
    if body.options is not None:
        check_limits(request, body.options)
    cron, tz = _schedule(body.schedule)
    _, row = await _allowed(request, "can_edit", workflow_id)
    services = request.app.state.services
    changes: dict = {}
    if body.name is not None:
        changes["name"] = body.name
    if "notes" in given:
        changes["notes"] = body.notes or ""
    if body.options is not None:
        changes["options"] = _options_json(body.options)
    if "schedule" in given:
        changes.update(schedule_cron=cron, schedule_tz=tz)
    async with services.pool.connection() as conn:
        async with conn.transaction():  # Windmill last: a name clash changes nothing there
            await schedule_reconcile.hold_shared(conn)
            row = await store.update(conn, workflow_id, changes)
            if "schedule" in given and cron:
                path = await schedules.put(services.http, services.settings, workflow_id, row["name"], cron, tz)
                row = await store.update(conn, workflow_id, {"windmill_schedule": path})
            elif "schedule" in given and row["windmill_schedule"]:
                await schedules.remove(services.http, services.settings, row["windmill_schedule"])
                row = await store.update(conn, workflow_id, {"windmill_schedule": None})
    return _full_view(row)


@router.delete("/api/workflows/{workflow_id}")
async def delete_workflow(workflow_id: uuid.UUID, request: Request) -> dict:
    """Delete the workflow (``can_edit``) and its Windmill schedule; its crawls and their
    archives stay (no longer linked to it). → ``{deleted, crawlsKept}``."""
    await _allowed(request, "can_edit", workflow_id)
    services = request.app.state.services
    async with services.pool.connection() as conn:
        async with conn.transaction():  # Windmill last: its refusal keeps the workflow whole
            await schedule_reconcile.hold_shared(conn)
            cur = await conn.execute("SELECT count(*) AS n FROM crawls WHERE workflow_id = %s", (workflow_id,))
            kept = (await cur.fetchone())["n"]
            row = await store.delete(conn, workflow_id)
            if row is not None and (row["windmill_schedule"] or row["schedule_cron"]):
                await schedules.remove(services.http, services.settings,
                                       row["windmill_schedule"] or schedules.path_of(workflow_id))
    await _deliver_tuples(request)
    return {"deleted": str(workflow_id), "crawlsKept": kept}


@router.post("/api/workflows/{workflow_id}/run", status_code=202)
async def run_workflow(workflow_id: uuid.UUID, request: Request, background: BackgroundTasks,
                       body: RunBody | None = None) -> JSONResponse:
    """Start a crawl with the saved options (``can_run``) → 202 ``{crawlId, workflowId}``.
    409 ``{error, runningCrawl}`` while one of its crawls runs or is paused: the run is skipped,
    not queued, and recorded so. A saved option that no longer validates, or any other refusal
    of the crawl (400, 429), is recorded as ``refused`` with its reason and answered as is."""
    trigger = (body or RunBody()).trigger
    identity, row = await _allowed(request, "can_run", workflow_id)
    pool = request.app.state.services.pool
    try:
        try:
            options = CrawlRequest.model_validate(row["options"])
        except ValidationError as exc:
            from fastapi.exceptions import RequestValidationError

            why = describe_validation(RequestValidationError(exc.errors()))
            raise Refused(400, f"the workflow's saved options no longer validate ({why}); edit the workflow") from None
        check_limits(request, options)
        crawl = await launch(request, options, background, subject=identity.subject, org_id=row["org_id"],
                             workflow_id=workflow_id)
    except Refused as exc:
        outcome = "skipped" if exc.status == 409 and "runningCrawl" in exc.extra else "refused"
        await store.record_run(pool, workflow_id, trigger=trigger, requested_by=identity.subject,
                               outcome=outcome, reason=exc.error)
        log.info("Workflow %s run %s (%s): %s", workflow_id, outcome, trigger, exc.error)
        raise
    await store.record_run(pool, workflow_id, trigger=trigger, requested_by=identity.subject,
                           outcome="started", crawl_id=crawl["id"])
    return JSONResponse({"crawlId": str(crawl["id"]), "workflowId": str(workflow_id)}, status_code=202,
                        background=background)


@router.get("/api/workflows/{workflow_id}/history")
async def workflow_history(workflow_id: uuid.UUID, request: Request, limit: int = 50) -> dict:
    """The workflow's runs (``can_view``), newest first, ``limit`` 1–500: started ones with their
    crawl, skipped and refused ones with the reason."""
    if not 1 <= limit <= 500:
        raise Refused(400, "limit must be between 1 and 500")
    await _allowed(request, "can_view", workflow_id)
    async with request.app.state.services.pool.connection() as conn:
        runs = await store.history(conn, workflow_id, limit)
    return {"workflowId": str(workflow_id), "runs": runs}
