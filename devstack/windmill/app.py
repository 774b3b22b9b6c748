"""REST routes of the local Windmill runner (the subset of Windmill's API waggle uses).

Jobs: ``POST /api/w/{ws}/jobs/run/f/{path}`` (flow) and ``…/jobs/run/p/{path}`` (script)
→ 201 with the job uuid as plain text; ``GET /api/w/{ws}/jobs_u/get/{id}``;
``GET /api/w/{ws}/jobs_u/completed/get_result_maybe/{id}``; ``GET /api/w/{ws}/jobs_u/get_logs/{id}``;
``POST /api/w/{ws}/jobs_u/queue/cancel/{id}`` (kills the step processes).
Variables (Windmill's own routes, so ``wmill`` and the variable tools work unchanged):
``GET variables/get_value/{path}`` (a JSON string), ``GET variables/get/{path}``,
``GET variables/exists/{path}``, ``GET variables/list``, ``POST variables/create``,
``POST variables/update/{path}``, ``DELETE variables/delete/{path}``.
Schedules (``devstack.windmill.schedules``): ``POST schedules/create``, ``POST schedules/update/{path}``,
``DELETE schedules/delete/{path}``, ``GET schedules/get/{path}``, ``GET schedules/exists/{path}``,
``GET schedules/list``, ``POST schedules/setenabled/{path}``; and the local-runner test hook
``POST schedules_local/tick`` ``{"now": ISO 8601}`` → the jobs it fired.
Every route but ``GET /api/version`` needs ``Authorization: Bearer <token>``.
"""

from __future__ import annotations

import hmac
import json
from contextlib import asynccontextmanager

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, PlainTextResponse, Response

from devstack.windmill.engine import Engine, NotFound
from devstack.windmill.schedules import BadSchedule, Schedules
from devstack.windmill.store import Store

VERSION = "CE v1.850.0 (waggle local runner)"


class TokenGuard:
    """Every route but ``GET /api/version`` needs the bearer token (or ``?token=``); ``/api/w/{ws}``
    must name this runner's workspace. A plain ASGI middleware: Starlette's ``BaseHTTPMiddleware``
    costs an extra task and body stream per request, and every step reads its variables here."""

    def __init__(self, app, *, token: str, workspace: str) -> None:
        self.app = app
        self.token = token
        self.workspace = workspace

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http" or scope["path"] == "/api/version":
            await self.app(scope, receive, send)
            return
        request = Request(scope)
        header = request.headers.get("authorization", "")
        given = header[7:].strip() if header.lower().startswith("bearer ") else request.query_params.get("token", "")
        refused = None
        if not given or not hmac.compare_digest(given, self.token):
            refused = PlainTextResponse("Unauthorized: missing or wrong bearer token", status_code=401)
        elif scope["path"].startswith("/api/w/"):
            ws = scope["path"].split("/")[3]
            if ws != self.workspace:
                refused = PlainTextResponse(f"workspace {ws} not found (this runner serves {self.workspace})",
                                            status_code=404)
        await (refused or self.app)(scope, receive, send)


def create_app(engine: Engine, store: Store, *, token: str, workspace: str,
               schedules: Schedules | None = None) -> FastAPI:
    """The runner's FastAPI app over ``engine`` and ``store``; ``schedules`` fire on the clock
    (a thread ticking once a second) while the app runs."""
    if schedules is None:
        schedules = Schedules(store.dir, lambda is_flow, path, args: (
            engine.start_flow if is_flow else engine.start_script)(path, args),
            lambda path: (store.get_variable(path) or {}).get("value"))

    @asynccontextmanager
    async def lifespan(_app: FastAPI):
        import threading

        threading.Thread(target=schedules.run_forever, daemon=True, name="schedules").start()
        yield
        schedules.stop()
        engine.shutdown()  # cancel running jobs: no step process outlives the runner

    app = FastAPI(title="waggle local Windmill runner", docs_url=None, redoc_url=None, openapi_url=None,
                  lifespan=lifespan)

    def text(status: int, body: str) -> PlainTextResponse:
        return PlainTextResponse(body, status_code=status)

    app.add_middleware(TokenGuard, token=token, workspace=workspace)

    @app.get("/api/version")
    async def version() -> PlainTextResponse:
        return text(200, VERSION)

    @app.get("/api/users/whoami")
    @app.get("/api/w/{ws}/users/whoami")
    async def whoami(ws: str | None = None) -> dict:
        return {"email": "admin@windmill.dev", "username": "admin", "is_admin": True, "is_super_admin": True}

    async def read_args(request: Request) -> dict | Response:
        raw = await request.body()
        if not raw.strip():
            return {}
        try:
            payload = json.loads(raw)
        except ValueError:
            return text(400, "the body must be JSON (the flow arguments as one object)")
        return payload if isinstance(payload, dict) else {"body": payload}

    @app.post("/api/w/{ws}/jobs/run/f/{path:path}")
    async def run_flow(ws: str, path: str, request: Request) -> Response:
        args = await read_args(request)
        if isinstance(args, Response):
            return args
        try:
            job_id = engine.start_flow(path, args)
        except NotFound as exc:
            return text(404, str(exc))
        return text(201, job_id)

    @app.post("/api/w/{ws}/jobs/run/p/{path:path}")
    async def run_script(ws: str, path: str, request: Request) -> Response:
        args = await read_args(request)
        if isinstance(args, Response):
            return args
        try:
            job_id = engine.start_script(path, args)
        except NotFound as exc:
            return text(404, str(exc))
        return text(201, job_id)

    @app.get("/api/w/{ws}/jobs_u/get/{job_id}")
    async def get_job(ws: str, job_id: str) -> Response:
        record = engine.get(job_id)
        if record is None:
            return text(404, f"Job {job_id} not found")
        return JSONResponse(record)

    @app.get("/api/w/{ws}/jobs_u/completed/get_result_maybe/{job_id}")
    async def result_maybe(ws: str, job_id: str) -> Response:
        record = engine.get(job_id)
        if record is None:
            return text(404, f"Job {job_id} not found")
        done = record["type"] == "CompletedJob"
        return JSONResponse({"completed": done, "success": record["success"] if done else None,
                             "started": record["running"] or done, "result": record["result"] if done else None})

    @app.get("/api/w/{ws}/jobs_u/get_logs/{job_id}")
    async def logs(ws: str, job_id: str) -> Response:
        if engine.get(job_id) is None:
            return text(404, f"Job {job_id} not found")
        return text(200, store.read_log(job_id))

    @app.post("/api/w/{ws}/jobs_u/queue/cancel/{job_id}")
    async def cancel(ws: str, job_id: str, request: Request) -> Response:
        reason = None
        raw = await request.body()
        if raw.strip():
            try:
                body = json.loads(raw)
                reason = body.get("reason") if isinstance(body, dict) else None
            except ValueError:
                pass
        record = engine.get(job_id)
        if record is None:
            return text(404, f"Job {job_id} not found")
        if not engine.cancel(job_id, reason):
            return text(400, f"Job {job_id} is not running (already completed)")
        return text(200, f"{job_id} canceled")

    # -- variables -------------------------------------------------------------------
    @app.get("/api/w/{ws}/variables/get_value/{path:path}")
    async def get_value(ws: str, path: str) -> Response:
        found = store.get_variable(path)
        if found is None:
            return text(404, f"Not found: Variable not found at name {path}")
        return JSONResponse(found["value"])

    @app.get("/api/w/{ws}/variables/get/{path:path}")
    async def get_variable(ws: str, path: str) -> Response:
        found = store.get_variable(path)
        if found is None:
            return text(404, f"Not found: Variable not found at name {path}")
        return JSONResponse(found)

    @app.get("/api/w/{ws}/variables/exists/{path:path}")
    async def exists(ws: str, path: str) -> Response:
        return JSONResponse(store.get_variable(path) is not None)

    @app.get("/api/w/{ws}/variables/list")
    async def list_variables(ws: str) -> Response:
        return JSONResponse([{**v, "value": None if v["is_secret"] else v["value"]} for v in store.list_variables()])

    @app.post("/api/w/{ws}/variables/create")
    async def create_variable(ws: str, request: Request) -> Response:
        try:
            body = json.loads(await request.body())
        except ValueError:
            return text(400, "the body must be JSON {path, value, is_secret, description}")
        if not isinstance(body, dict) or not isinstance(body.get("path"), str) or not isinstance(body.get("value"), str):
            return text(400, "path and value (strings) are required")
        if store.get_variable(body["path"]) is not None:
            return text(400, f"Variable {body['path']} already exists")
        store.put_variable(body["path"], body["value"], bool(body.get("is_secret")), str(body.get("description") or ""))
        return text(201, body["path"])

    @app.post("/api/w/{ws}/variables/update/{path:path}")
    async def update_variable(ws: str, path: str, request: Request) -> Response:
        found = store.get_variable(path)
        if found is None:
            return text(404, f"Not found: Variable not found at name {path}")
        try:
            body = json.loads(await request.body())
        except ValueError:
            return text(400, "the body must be JSON")
        if not isinstance(body, dict) or ("value" in body and not isinstance(body["value"], str)):
            return text(400, "value must be a string")
        new_path = body.get("path") or path
        store.put_variable(
            new_path,
            body.get("value", found["value"]),
            bool(body.get("is_secret", found["is_secret"])),
            str(body.get("description", found["description"]) or ""),
        )
        if new_path != path:
            store.delete_variable(path)
        return text(200, f"variable {new_path} updated")

    @app.delete("/api/w/{ws}/variables/delete/{path:path}")
    async def delete_variable(ws: str, path: str) -> Response:
        if not store.delete_variable(path):
            return text(404, f"Not found: Variable not found at name {path}")
        return text(200, f"variable {path} deleted")

    # -- schedules -------------------------------------------------------------------
    async def read_json(request: Request) -> dict | Response:
        try:
            body = json.loads(await request.body())
        except ValueError:
            return text(400, "the body must be JSON")
        return body if isinstance(body, dict) else text(400, "the body must be a JSON object")

    @app.post("/api/w/{ws}/schedules/create")
    async def create_schedule(ws: str, request: Request) -> Response:
        body = await read_json(request)
        if isinstance(body, Response):
            return body
        try:
            return text(201, schedules.create(body))
        except BadSchedule as exc:
            return text(400, f"Bad request: {exc}")

    @app.post("/api/w/{ws}/schedules/update/{path:path}")
    async def update_schedule(ws: str, path: str, request: Request) -> Response:
        body = await read_json(request)
        if isinstance(body, Response):
            return body
        try:
            found = schedules.update(path, body)
        except BadSchedule as exc:
            return text(400, f"Bad request: {exc}")
        return text(200, path) if found else text(404, f"Not found: schedule {path}")

    @app.post("/api/w/{ws}/schedules/setenabled/{path:path}")
    async def enable_schedule(ws: str, path: str, request: Request) -> Response:
        body = await read_json(request)
        if isinstance(body, Response):
            return body
        found = schedules.set_enabled(path, bool(body.get("enabled")))
        return text(200, path) if found else text(404, f"Not found: schedule {path}")

    @app.delete("/api/w/{ws}/schedules/delete/{path:path}")
    async def delete_schedule(ws: str, path: str) -> Response:
        return text(200, f"schedule {path} deleted") if schedules.delete(path) else text(
            404, f"Not found: schedule {path}")

    @app.get("/api/w/{ws}/schedules/get/{path:path}")
    async def get_schedule(ws: str, path: str) -> Response:
        found = schedules.get(path)
        return JSONResponse(found) if found else text(404, f"Not found: schedule {path}")

    @app.get("/api/w/{ws}/schedules/exists/{path:path}")
    async def schedule_exists(ws: str, path: str) -> Response:
        return JSONResponse(schedules.get(path) is not None)

    @app.get("/api/w/{ws}/schedules/list")
    async def list_schedules(ws: str, path_start: str = "", page: int = 1, per_page: int = 1000) -> Response:
        """Windmill's ``path_start`` filter and ``page``/``per_page`` pages (the ledger's
        schedule reconciler pages through them, decision 352)."""
        page, per_page = max(1, page), max(1, min(per_page, 10_000))
        items = [s for s in schedules.list() if s["path"].startswith(path_start)]
        return JSONResponse(items[(page - 1) * per_page:page * per_page])

    @app.post("/api/w/{ws}/schedules_local/tick")
    async def tick(ws: str, request: Request) -> Response:
        """Test hook (not Windmill's): fire what is due at ``now`` as if the clock said so."""
        from datetime import datetime

        body = await read_json(request)
        if isinstance(body, Response):
            return body
        try:
            now = datetime.fromisoformat(str(body.get("now")))
            if now.tzinfo is None:
                raise ValueError("no offset")
        except ValueError:
            return text(400, "now must be an ISO 8601 time with its offset, e.g. 2026-12-02T04:00:00+00:00")
        return JSONResponse(schedules.tick(now))

    @app.get("/api/w/{ws}/flows/exists/{path:path}")
    async def flow_exists(ws: str, path: str) -> Response:
        try:
            engine.flow_file(path)
            return JSONResponse(True)
        except NotFound:
            return JSONResponse(False)

    return app
