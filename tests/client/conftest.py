"""Fixtures of the client tests: a fake ledger (documented API shapes) served on loopback."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse
from starlette.routing import Route

from tests.archive.helpers import manifest, put_json, wacz_bytes
from tests.client.fake_ledger import FakeLedger
from tests.client.servers import serve_in_thread
from tests.fixtures.ledger import ServerThread

COMPILED = {"typescript": "6.0.3", "hostTypes": "v0.2.0", "scripts": []}


def now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


@pytest.fixture
def fake_ledger() -> Iterator[FakeLedger]:
    """A fresh :class:`FakeLedger` served on 127.0.0.1 (``.base_url``), one per test."""
    fake = FakeLedger()
    with serve_in_thread(fake.app) as url:
        fake.base_url = url
        yield fake


@pytest.fixture
def client_env(fake_ledger: FakeLedger, tmp_path, monkeypatch) -> dict[str, str]:
    """Environment that points the CLI at the fake ledger (no stack.json anywhere)."""
    env = {
        "WAGGLE_API_URL": fake_ledger.base_url,
        "WAGGLE_TOKEN": fake_ledger.token,
        "WAGGLE_STATE_DIR": str(tmp_path / "no-stack"),
        "COLUMNS": "200",
    }
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    return env


@dataclass
class FakeFlow:
    """Answers the ledger's webhook like Windmill, then (in a thread) reports the level back.

    ``/broken`` pages fail (http 500); every captured page gets a WACZ, a manifest and, at
    depth 0, a ``.links.json`` naming ``/one`` and ``/broken``. ``hold`` = never report;
    ``hold_from`` = never report the levels of that depth or deeper.
    """

    s3: Any
    token: str = ""
    ledger_url: str = ""
    hold: bool = False
    hold_from: int | None = None
    delay_s: float = 0.3
    wacz: dict[str, bytes] = field(default_factory=dict)  # object key → bytes
    jobs: dict[str, bool] = field(default_factory=dict)  # job id → finished

    def capture(self, crawl_id: str, url: str, depth: int) -> dict:
        if url.endswith("/broken"):
            return {"url": url, "status": "failed", "skipReason": "http: 500 Internal Server Error",
                    "failureClass": "transient"}
        task = str(uuid.uuid4())
        key = f"{task}_{crawl_id}"
        body = wacz_bytes(url)  # a whole WACZ: the ledger checks it before calling it complete
        self.s3.client().put_object(Bucket=self.s3.bucket, Key=f"{key}.wacz", Body=body)
        self.wacz[f"{key}.wacz"] = body
        put_json(self.s3, f"{key}.result.json",
                 manifest(task, wacz_key=f"{key}.wacz", url=url, timestamp=now_iso(), correlationId=crawl_id))
        result = {"url": url, "status": "captured", "taskId": task, "correlationId": crawl_id,
                  "submittedAt": now_iso(), "finishedAt": now_iso(),
                  "manifestLocation": f"s3://{self.s3.bucket}/{key}.result.json"}
        if depth == 0:
            origin = url.rstrip("/")
            put_json(self.s3, f"{key}.links.json", {"taskId": task, "url": url, "finalUrl": url, "labels": [],
                                                    "capturedAt": now_iso(),
                                                    "links": [{"href": f"{origin}/one", "text": "one", "rel": None},
                                                              {"href": f"{origin}/broken", "text": "b", "rel": None}]})
            result["linksLocation"] = f"s3://{self.s3.bucket}/{key}.links.json"
        return result

    def run_level(self, job: str, body: dict) -> None:
        time.sleep(self.delay_s)  # a level takes a moment: the client sees it running
        results = [self.capture(body["crawl_id"], f["url"], body["depth"]) for f in body["frontier"]]
        httpx.post(f"{self.ledger_url}/api/crawls/{body['crawl_id']}/pages",
                   json={"depth": body["depth"], "results": results, "compiled": COMPILED},
                   headers={"Authorization": f"Bearer {self.token}"}, timeout=30)
        self.jobs[job] = True

    def app(self) -> Starlette:
        async def run(request: Request) -> Any:
            body = await request.json()
            job = str(uuid.uuid4())
            self.jobs[job] = False
            if not self.hold and (self.hold_from is None or body["depth"] < self.hold_from):
                threading.Thread(target=self.run_level, args=(job, body), daemon=True).start()
            return PlainTextResponse(job, status_code=201)

        async def get_job(request: Request) -> Any:
            job = request.path_params["job"]
            done = self.jobs.get(job, False)
            return JSONResponse({"id": job, "type": "CompletedJob" if done else "QueuedJob",
                                 "running": not done, "success": done or None, "canceled": False, "result": None})

        return Starlette(routes=[
            Route("/api/w/{ws}/jobs/run/f/{path:path}", run, methods=["POST"]),
            Route("/api/w/{ws}/jobs_u/get/{job}", get_job, methods=["GET"]),
        ])


@dataclass
class RealLedger:
    """The real ledger on loopback (JWT mode, crawl routes on) and its fake flow."""

    url: str
    flow: FakeFlow
    env: dict[str, str]  # WAGGLE_API_URL + WAGGLE_TOKEN of alice (submitter of acme)
    settings: Any


@pytest.fixture(scope="session")
def real_ledger(create_database, migrated_template, ledger_fga, s3_server, dev_issuer):
    from ledger.api.app import create_app
    from ledger.settings import Settings

    import contextlib

    with contextlib.ExitStack() as stack:  # whatever started is stopped, even if setup fails half-way
        flow = FakeFlow(s3_server, token=dev_issuer.mint("waggle-flow", ["acme"]))
        flow_server = ServerThread(flow.app(), lifespan="off")
        stack.callback(flow_server.stop)
        flow_server.start()
        settings = Settings(
            _env_file=None,
            database_url=create_database(template=migrated_template),
            oidc_issuer=dev_issuer.issuer, oidc_audience=dev_issuer.audience,
            fga_api_url=ledger_fga.api_url, fga_store_id=ledger_fga.store_id, fga_model_id=ledger_fga.model_id,
            s3_endpoint=s3_server.endpoint, s3_bucket=s3_server.bucket, s3_region=s3_server.region,
            s3_access_key_id=s3_server.access_key_id, s3_secret_access_key=s3_server.secret_access_key,
            crawl_webhook_url=f"{flow_server.url}/api/w/waggle/jobs/run/f/f/waggle/crawl_level",
            crawl_webhook_token="wm-token", allow_private_hosts=True,
            drain_interval_s=0.1, reconcile_interval_s=3600.0, watchdog_interval_s=3600.0, crawl_stall_s=3600.0,
        )
        server = ServerThread(None)
        settings.api_port = server.port
        server.app = server.server.config.app = create_app(settings)
        stack.callback(server.stop)
        server.start(timeout_s=60)
        flow.ledger_url = server.url
        env = {"WAGGLE_API_URL": server.url, "WAGGLE_TOKEN": dev_issuer.mint("alice", ["acme"]), "COLUMNS": "200"}
        yield RealLedger(server.url, flow, env, settings)


@pytest.fixture
def ledger_env(real_ledger: RealLedger, monkeypatch, tmp_path) -> RealLedger:
    monkeypatch.setenv("WAGGLE_STATE_DIR", str(tmp_path))
    for k, v in real_ledger.env.items():
        monkeypatch.setenv(k, v)
    real_ledger.flow.hold, real_ledger.flow.hold_from = False, None
    yield real_ledger
    # never leave a crawl running for the next test
    crawls = httpx.get(real_ledger.url + "/api/crawls", headers={"Authorization": f"Bearer {real_ledger.env['WAGGLE_TOKEN']}"}).json()
    for c in crawls["crawls"]:
        if c["state"] == "running":
            httpx.post(f"{real_ledger.url}/api/crawls/{c['crawlId']}/failed", json={"reason": "test cleanup"},
                       headers={"Authorization": f"Bearer {real_ledger.env['WAGGLE_TOKEN']}"})
