"""Fixtures of the flow tests: the local Windmill runner (session) and fake services on 127.0.0.1."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest

from tests.flow.fakes import HttpFake, Req, capture_reply

ROOT = Path(__file__).resolve().parents[2]
RUNNER_TOKEN = "runner-test-token"
WORKSPACE = "waggle"


@dataclass
class Runner:
    """A running ``python -m devstack.windmill`` and a client for its REST API."""

    url: str
    proc: subprocess.Popen
    state: Path
    client: httpx.Client = field(init=False)

    def __post_init__(self) -> None:
        self.client = httpx.Client(base_url=self.url, headers={"authorization": f"Bearer {RUNNER_TOKEN}"}, timeout=30)

    def api(self, path: str) -> str:
        return f"/api/w/{WORKSPACE}{path}"

    def set_variable(self, path: str, value: str, secret: bool = False) -> None:
        r = self.client.post(self.api("/variables/create"), json={"path": path, "value": value, "is_secret": secret, "description": ""})
        if r.status_code == 400 and "already exists" in r.text:
            r = self.client.post(self.api(f"/variables/update/{path}"), json={"value": value})
        assert r.status_code in (200, 201), r.text

    def delete_variable(self, path: str) -> None:
        self.client.delete(self.api(f"/variables/delete/{path}"))

    def run_flow(self, args: dict) -> str:
        r = self.client.post(self.api("/jobs/run/f/f/waggle/crawl_level"), json=args)
        assert r.status_code == 201, r.text
        return r.text

    def job(self, job_id: str) -> dict:
        r = self.client.get(self.api(f"/jobs_u/get/{job_id}"))
        assert r.status_code == 200, r.text
        return r.json()

    def wait(self, job_id: str, timeout: float = 60) -> dict:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            job = self.job(job_id)
            if job["type"] == "CompletedJob":
                return job
            time.sleep(0.05)
        raise AssertionError(f"job {job_id} did not finish within {timeout}s; logs:\n{self.logs(job_id)}")

    def logs(self, job_id: str) -> str:
        return self.client.get(self.api(f"/jobs_u/get_logs/{job_id}")).text


def start_runner(state: Path, extra: list[str] = ()) -> Runner:
    proc = subprocess.Popen(
        [sys.executable, "-m", "devstack.windmill", "--host", "127.0.0.1", "--port", "0", "--state", str(state),
         "--token", RUNNER_TOKEN, "--retry-scale", "0.01", *extra],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert "listening on " in line, line
    url = line.split("listening on ")[1].split()[0]
    threading.Thread(target=lambda: [None for _ in proc.stdout], daemon=True).start()  # drain
    runner = Runner(url, proc, state)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{url}/api/version", timeout=2).status_code == 200:
                return runner
        except httpx.HTTPError:
            time.sleep(0.1)
    raise AssertionError("runner did not answer /api/version")


def stop_runner(runner: Runner) -> None:
    runner.client.close()
    runner.proc.terminate()
    try:
        runner.proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        runner.proc.kill()
        runner.proc.wait()


@pytest.fixture(scope="session")
def windmill_runner(tmp_path_factory) -> Runner:
    """The local Windmill runner for the session (retry delays scaled by 0.01)."""
    runner = start_runner(tmp_path_factory.mktemp("windmill"))
    yield runner
    stop_runner(runner)


# -- fake services -------------------------------------------------------------------------------

class FakeBrowserHive:
    """A BrowserHive v12 stand-in: one capture at a time (429 Busy otherwise), fixed capture time."""

    def __init__(self, capture_s: float = 0.05) -> None:
        self.capture_s = capture_s
        self.captures: list[dict] = []  # {url, start, end, body}
        self._busy = threading.Lock()
        self.fake = HttpFake(self.handle)
        self.url = self.fake.url

    def handle(self, req: Req):
        if req.method == "GET" and req.path == "/status":
            return 200, {}, {"busy": self._busy.locked()}
        if req.method != "POST" or req.path != "/captures":
            return 404, {"x-amzn-errortype": "UnknownOperationException"}, {}
        if not self._busy.acquire(blocking=False):
            return 429, {"x-amzn-errortype": "Busy"}, {"message": "a capture is already running on this browser"}
        try:
            start = time.monotonic()
            time.sleep(self.capture_s)
            body = req.json()
            self.captures.append({"url": body["url"], "start": start, "end": time.monotonic(), "body": body})
            return 200, {}, capture_reply(body["url"], self.url)
        finally:
            self._busy.release()

    def close(self) -> None:
        self.fake.close()


def ts_compile_handler(req: Req):
    """ts-compile stand-in: 200 with "use strict" JS and re-hashed sources; 422 for a type error."""
    scripts = req.json()["scripts"]
    if any("TYPE_ERROR" in s["source"] for s in scripts):
        return 422, {"x-amzn-errortype": "CompileFailed"}, {
            "message": "1 type error", "typescript": "6.0.3",
            "diagnostics": [{"file": "broken.ts", "line": 1, "col": 5, "code": "TS2322",
                             "message": "Type 'string' is not assignable to type 'number'."}]}
    out = []
    for s in scripts:
        js = '"use strict";\n' + s["source"].replace(": number", "") + "\n"
        out.append({**s, "source": js, "sha256": hashlib.sha256(js.encode()).hexdigest()})
    return 200, {}, {"typescript": "6.0.3", "hostTypes": "v0.2.0", "cached": False, "scripts": out}


class FakeLedger:
    """Records /pages, /progress, /index and /failed; answers like the ledger (index: 404, no search;
    /politeness: no other crawl on these hosts; /read-token: a read token for the capture servers)."""

    def __init__(self) -> None:
        self.pages: list[dict] = []
        self.progress: list[dict] = []
        self.failed: list[dict] = []
        self.index: list[Req] = []
        self.read_tokens = 0
        self.fake = HttpFake(self.handle)
        self.url = self.fake.url

    def handle(self, req: Req):
        if req.headers.get("authorization") != "Bearer flow-jwt":
            return 401, {}, {"error": "unauthenticated"}
        if req.path.endswith("/pages"):
            self.pages.append(req.json())
            return 200, {}, {"next": [], "stopReason": "completed"}
        if req.path.endswith("/progress"):  # one event, or a batch of them (f/waggle/progress.py)
            body = req.json()
            self.progress.extend(body.get("events", [body]))
            if "events" in body:
                return 200, {}, {"results": [{"recorded": True} for _ in body["events"]]}
            return 200, {}, {"recorded": True}
        if req.path.endswith("/index"):
            self.index.append(req)
            return 404, {}, {"error": "not found"}
        if req.path.endswith("/failed"):
            self.failed.append(req.json())
            return 200, {}, {"closed": True}
        if req.path.partition("?")[0].endswith("/politeness"):  # no other crawl shares these hosts: nothing to raise
            return 200, {}, {"hosts": {}}
        if req.method == "POST" and req.path.endswith("/read-token"):  # the capture servers' token (decision 405)
            self.read_tokens += 1
            return 201, {}, {"token": "wgr_" + "t" * 43, "crawlId": req.path.split("/")[-2]}
        return 404, {}, {"error": "not found"}

    def close(self) -> None:
        self.fake.close()


@pytest.fixture
def services(windmill_runner):
    """Fake BrowserHive ×2, ts-compile and ledger; the runner's variables point at them."""
    hives = [FakeBrowserHive(), FakeBrowserHive()]
    ts = HttpFake(ts_compile_handler)
    ledger = FakeLedger()
    r = windmill_runner
    r.set_variable("u/admin/waggle_api_url", ledger.url)
    r.set_variable("u/admin/waggle_token", "flow-jwt", secret=True)
    r.set_variable("u/admin/browserhive_endpoints", json.dumps([h.url + "/" for h in hives]))
    r.set_variable("u/admin/browserhive_tls_ca", "")
    r.set_variable("u/admin/ts_compile_url", ts.url)
    r.set_variable("u/admin/waggle_allow_private_hosts", "1")
    yield {"hives": hives, "ts": ts, "ledger": ledger, "runner": r}
    for h in hives:
        h.close()
    ts.close()
    ledger.close()
