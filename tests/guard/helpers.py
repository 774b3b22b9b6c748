"""Helpers for the guard/health/watchdog tests: an ASGI app in a thread, crawl rows, services.

``WindmillJobs`` answers Windmill's job routes exactly as docs/internals.md "Windmill runner
REST" states (``GET /api/w/{ws}/jobs_u/get/{id}``, ``POST /api/w/{ws}/jobs_u/queue/cancel/{id}``);
it stands in for the job *store* only, so tests can put a job in any end state at will.
"""

from __future__ import annotations

import asyncio
import socket
import threading
import time
import uuid
from types import SimpleNamespace

import httpx
import uvicorn
from psycopg_pool import AsyncConnectionPool
from psycopg.rows import dict_row
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse
from starlette.routing import Route

from ledger.settings import Settings


class ThreadServer:
    """Run an ASGI app with uvicorn on 127.0.0.1 (OS-chosen port) in a daemon thread."""

    def __init__(self, app):
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        sock.listen(64)
        self.port = sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off"))
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [sock]}, daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 10
        while not self.server.started:
            if time.monotonic() > deadline:
                raise RuntimeError("server did not start")
            time.sleep(0.01)

    def stop(self):
        self.server.should_exit = True
        self.thread.join(10)


class WindmillJobs:
    """Job store with Windmill's REST shape. ``jobs[id] = body``; ``cancels`` records cancels."""

    def __init__(self, token: str = "wm-token"):
        self.token = token
        self.jobs: dict[str, dict] = {}
        self.cancels: list[tuple[str, dict]] = []
        self.requests = 0

        async def get(request: Request):
            self.requests += 1
            if request.headers.get("authorization") != f"Bearer {self.token}":
                return PlainTextResponse("Unauthorized", 401)
            job = self.jobs.get(request.path_params["id"])
            if job is None:
                return PlainTextResponse(f"Not found: job {request.path_params['id']}", 404)
            return JSONResponse(job)

        async def cancel(request: Request):
            if request.headers.get("authorization") != f"Bearer {self.token}":
                return PlainTextResponse("Unauthorized", 401)
            job_id = request.path_params["id"]
            body = await request.json()
            self.cancels.append((job_id, body))
            job = self.jobs.get(job_id)
            if job is None or job["type"] != "QueuedJob":
                return PlainTextResponse("queued job not found", 404)
            self.jobs[job_id] = completed(job_id, canceled=True, canceled_by="waggle", reason=body.get("reason"))
            return PlainTextResponse(job_id)

        self.app = Starlette(routes=[
            Route("/api/w/{ws}/jobs_u/get/{id}", get, methods=["GET"]),
            Route("/api/w/{ws}/jobs_u/queue/cancel/{id}", cancel, methods=["POST"]),
        ])


def queued(job_id: str, running: bool = True) -> dict:
    return {"id": job_id, "type": "QueuedJob", "running": running, "canceled": False, "success": None, "result": None}


def completed(job_id: str, *, success: bool = False, canceled: bool = False, canceled_by: str | None = None,
              reason: str | None = None, result=None) -> dict:
    return {"id": job_id, "type": "CompletedJob", "running": False, "success": success, "canceled": canceled,
            "canceled_by": canceled_by, "canceled_reason": reason, "result": result}


def make_settings(**overrides) -> Settings:
    return Settings(_env_file=None, **overrides)


def insert_crawl(conn, *, job_id: str | None = None, job_depth: int | None = 0, depth: int = 0,
                 idle_s: float = 0.0, state: str = "running") -> uuid.UUID:
    """A crawl row (sync psycopg connection); ``idle_s`` back-dates ``last_progress_at``."""
    crawl_id = uuid.uuid4()
    conn.execute(
        "INSERT INTO crawls (id, seeds, scope, max_depth, max_pages, per_host_delay_ms, host_parallelism,"
        " org_id, requested_by, state, finished_at, last_job_id, last_job_depth, current_depth, last_progress_at)"
        " VALUES (%s, ARRAY['https://example.org/'], 'same-host', 2, 10, 1000, 1, 'acme', 'alice', %s,"
        " CASE WHEN %s = 'running' THEN NULL ELSE now() END, %s, %s, %s, now() - make_interval(secs => %s))",
        (crawl_id, state, state, job_id, job_depth if job_id else None, depth, idle_s),
    )
    return crawl_id


def crawl_row(conn, crawl_id) -> dict:
    cur = conn.cursor(row_factory=dict_row)
    return cur.execute("SELECT * FROM crawls WHERE id = %s", (crawl_id,)).fetchone()


async def open_services(db_url: str, settings: Settings, s3=None) -> SimpleNamespace:
    pool = AsyncConnectionPool(db_url, min_size=1, max_size=4, kwargs={"row_factory": dict_row}, open=False)
    await pool.open(wait=True, timeout=10)
    return SimpleNamespace(settings=settings, pool=pool, http=httpx.AsyncClient(), s3=s3, authz=None)


async def close_services(services) -> None:
    await services.http.aclose()
    await services.pool.close()


def run(coro):
    return asyncio.run(coro)
