"""The client against the real ledger over HTTP: JWTs from the dev issuer, real Postgres, the
OpenFGA stand-in, the S3 stand-in, and a fake flow behind the webhook that reports levels back
the way f/waggle/crawl_level does (captures written to S3 as manifest + WACZ + links)."""

from __future__ import annotations

import re
import signal
import subprocess
import threading
import time
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse
from starlette.routing import Route
from typer.testing import CliRunner

from ledger.cli import app
from tests.archive.helpers import manifest, put_json
from tests.client.test_cli import Proc
from tests.fixtures.ledger import ServerThread

runner = CliRunner()
COMPILED = {"typescript": "6.0.3", "hostTypes": "v0.2.0", "scripts": []}


def now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


@dataclass
class FakeFlow:
    """Answers the ledger's webhook like Windmill, then (in a thread) reports the level back.

    ``/broken`` pages fail (http 500); every captured page gets a WACZ, a manifest and, at
    depth 0, a ``.links.json`` naming ``/one`` and ``/broken``. ``hold`` = never report.
    """

    s3: Any
    token: str = ""
    ledger_url: str = ""
    hold: bool = False
    delay_s: float = 0.3
    wacz: dict[str, bytes] = field(default_factory=dict)  # object key → bytes
    jobs: dict[str, bool] = field(default_factory=dict)  # job id → finished

    def capture(self, crawl_id: str, url: str, depth: int) -> dict:
        if url.endswith("/broken"):
            return {"url": url, "status": "failed", "skipReason": "http: 500 Internal Server Error"}
        task = str(uuid.uuid4())
        key = f"{task}_{crawl_id}"
        body = f"PK\x03\x04 wacz of {url}".encode()
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
            if not self.hold:
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
    url: str
    flow: FakeFlow
    env: dict[str, str]


@pytest.fixture(scope="module")
def real_ledger(create_database, migrated_template, ledger_fga, s3_server, dev_issuer):
    from ledger.api.app import create_app
    from ledger.settings import Settings

    flow = FakeFlow(s3_server, token=dev_issuer.mint("waggle-flow", ["acme"]))
    flow_server = ServerThread(flow.app(), lifespan="off").start()
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
    server.start()
    flow.ledger_url = server.url
    env = {"WAGGLE_API_URL": server.url, "WAGGLE_TOKEN": dev_issuer.mint("alice", ["acme"]), "COLUMNS": "200"}
    try:
        yield RealLedger(server.url, flow, env)
    finally:
        server.stop()
        flow_server.stop()


@pytest.fixture
def ledger_env(real_ledger: RealLedger, monkeypatch, tmp_path) -> RealLedger:
    monkeypatch.setenv("WAGGLE_STATE_DIR", str(tmp_path))
    for k, v in real_ledger.env.items():
        monkeypatch.setenv(k, v)
    real_ledger.flow.hold = False
    yield real_ledger
    # never leave a crawl running for the next test
    httpx.get(real_ledger.url + "/healthz")
    crawls = httpx.get(real_ledger.url + "/api/crawls", headers={"Authorization": f"Bearer {real_ledger.env['WAGGLE_TOKEN']}"}).json()
    for c in crawls["crawls"]:
        if c["state"] == "running":
            httpx.post(f"{real_ledger.url}/api/crawls/{c['crawlId']}/failed", json={"reason": "test cleanup"},
                       headers={"Authorization": f"Bearer {real_ledger.env['WAGGLE_TOKEN']}"})


def test_crawl_to_the_end_with_archives_and_downloads(ledger_env: RealLedger, tmp_path):
    dest = tmp_path / "wacz"
    result = runner.invoke(app, ["crawl", "http://site-a.example/", "--depth", "1", "--delay-ms", "0", "--no-scripts",
                                 "--poll-interval", "0.05", "--archive-wait", "20", "--download", str(dest)],
                           catch_exceptions=False)
    out = result.output
    assert result.exit_code == 0, out
    crawl_id = re.search(r"crawl (\S+) started", out).group(1)
    # progress went through both levels, then the summary of the real ledger
    assert re.search(rf"crawl {crawl_id} running: level 0", out), out
    assert re.search(rf"crawl {crawl_id} succeeded: level 1 · captured 2", out), out
    assert "max_depth" in out
    assert "http://site-a.example/broken" in out and "http: 500 Internal Server Error" in out
    assert "archives (2)" in out
    assert len(re.findall(r"X-Amz-Signature=", out)) == 2
    saved = {p.name: p.read_bytes() for p in dest.glob("*.wacz")}
    assert saved == {k: v for k, v in ledger_env.flow.wacz.items() if crawl_id in k}
    assert len(saved) == 2

    listing = runner.invoke(app, ["crawls"], catch_exceptions=False)
    assert listing.exit_code == 0 and crawl_id in listing.output


def test_running_crawl_409_then_fail_it(ledger_env: RealLedger):
    ledger_env.flow.hold = True  # the level never reports: the crawl stays running
    first = runner.invoke(app, ["crawl", "http://site-a.example/", "--no-scripts", "--detach"], catch_exceptions=False)
    assert first.exit_code == 0, first.output
    running = re.search(r"crawl (\S+) started", first.output).group(1)
    second = runner.invoke(app, ["crawl", "http://site-b.example/", "--no-scripts"], catch_exceptions=False)
    assert second.exit_code == 1
    assert f"crawl {running} is already running (started 20" in second.output
    failed = runner.invoke(app, ["crawls", running, "--fail", "--reason", "not today"], catch_exceptions=False)
    assert failed.exit_code == 0 and "failed." in failed.output
    shown = runner.invoke(app, ["crawls", running, "--archive-wait", "0"], catch_exceptions=False)
    assert shown.exit_code == 1 and "not today" in shown.output


def test_sigint_without_terminal_fails_the_real_crawl(ledger_env: RealLedger):
    ledger_env.flow.hold = True
    proc = Proc(ledger_env.env, "crawl", "http://site-a.example/", "--no-scripts", "--poll-interval", "0.05",
                stdin=subprocess.DEVNULL)
    try:
        proc.wait_for(" running: level 0")
        proc.proc.send_signal(signal.SIGINT)
        code = proc.finish()
    finally:
        proc.kill()
    crawl_id = re.search(r"crawl (\S+) started", proc.text).group(1)
    assert code == 130, proc.text
    view = httpx.get(f"{ledger_env.url}/api/crawls/{crawl_id}",
                     headers={"Authorization": f"Bearer {ledger_env.env['WAGGLE_TOKEN']}"}).json()
    assert view["state"] == "failed" and view["stopReason"] == "failed"
    assert view["error"] == "stopped by the user (Ctrl-C in `waggle crawl`)"


def test_outsider_token_is_refused_with_a_clear_message(ledger_env: RealLedger, dev_issuer, monkeypatch):
    monkeypatch.setenv("WAGGLE_TOKEN", dev_issuer.mint("mallory", ["evil"]))
    result = runner.invoke(app, ["crawl", "http://site-a.example/", "--no-scripts"], catch_exceptions=False)
    assert result.exit_code == 1
    assert "not found" in result.output  # a denial is a 404, never a stack trace
    assert "Traceback" not in result.output
    # and its archive listing is empty
    listing = runner.invoke(app, ["archives"], catch_exceptions=False)
    assert listing.exit_code == 0 and "archives (0)" in listing.output
