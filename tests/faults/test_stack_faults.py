"""Faults against the whole local stack (``local_stack``: ledger, Windmill runner, 2 capture
servers with Chromium, ts-compile, S3, OpenFGA, issuer): each test breaks one part, runs a
small crawl of a loopback site, and asserts that nothing is lost and no crawl is left running.
Every part a test stops is started again (``devstack.stack.up`` is idempotent) before the next.

Bounded: each crawl has a deadline; sites are a few static pages on 127.0.0.1.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from concurrent.futures import ThreadPoolExecutor

from devstack.stack import Stack, config_from_state
from devstack.supervisor import Supervisor
from tests.e2e.site import Site

pytestmark = pytest.mark.fault

CRAWL_DEADLINE_S = 240.0


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Iterator[Site]:
    root = tmp_path_factory.mktemp("fault-site")
    for i in range(4):
        links = "".join(f'<a href="/p{j}.html">page {j}</a> ' for j in range(4) if j != i)
        (root / f"p{i}.html").write_text(f"<!doctype html><title>p{i}</title><h1>page {i}</h1>{links}")
    s = Site(root, "User-agent: *\nAllow: /\n")
    yield s
    s.stop()


def _restart(local_stack, *names: str) -> None:
    """Start the named services of the stack again (only those; in parallel)."""
    stack = Stack(config_from_state(local_stack.state_dir))
    services = {s.name: s for s in stack.services()}
    services["ledger"] = stack.ledger_service(local_stack.info["database_url"])
    services["windmill"] = stack.windmill_service()
    with ThreadPoolExecutor(max_workers=len(names) or 1) as pool:
        list(pool.map(lambda n: stack.sup.start(services[n]), names))


@pytest.fixture
def stack(local_stack):
    """The session stack; every service a test stopped is started again afterwards."""
    yield local_stack
    sup = Supervisor(local_stack.state_dir)
    expected = [s.name for s in Stack(config_from_state(local_stack.state_dir)).services()] + ["windmill", "ledger"]
    stopped = [n for n in expected if sup.record(n) is None]
    if stopped:
        _restart(local_stack, *stopped)


def _api(stack) -> httpx.Client:
    return httpx.Client(base_url=stack.api_url, headers={"Authorization": f"Bearer {stack.token()}"}, timeout=30)


def _start(api: httpx.Client, seeds: list[str], **extra) -> str:
    body = {"seeds": seeds, "maxDepth": 0, "perHostDelayMs": 0, "scripts": [], **extra}
    deadline = time.monotonic() + 60
    while True:  # earlier tests' crawls may still be closing (the organization's running-crawl limit)
        r = api.post("/api/crawls", json=body)
        if r.status_code not in (409, 429) or time.monotonic() > deadline:
            break
        time.sleep(1)
    assert r.status_code == 202, r.text
    return r.json()["crawlId"]


def _wait_done(api: httpx.Client, crawl_id: str, timeout_s: float = CRAWL_DEADLINE_S) -> dict:
    deadline = time.monotonic() + timeout_s
    while True:
        view = api.get(f"/api/crawls/{crawl_id}").json()
        if view["state"] != "running":
            return view
        assert time.monotonic() < deadline, f"crawl still running after {timeout_s} s: {view}"
        time.sleep(0.5)


def _no_crawl_running(api: httpx.Client) -> None:
    crawls = api.get("/api/crawls").json()
    items = crawls["crawls"] if isinstance(crawls, dict) else crawls
    assert all(c["state"] != "running" for c in items), items


def test_ts_compile_422_the_crawl_fails_naming_the_type_error(stack, site):
    with _api(stack) as api:
        crawl_id = _start(api, [f"{site.url}/p0.html"], scripts=[
            {"name": "fault-typo", "phase": "behavior", "source": "const n: number = 'not a number';"}])
        view = _wait_done(api, crawl_id)
        assert view["state"] == "failed", view
        assert "TS2322" in view["error"] or "422" in view["error"], view["error"]
        assert view["pagesCaptured"] == 0
        _no_crawl_running(api)


def test_capture_servers_down_one_then_all(stack, site):
    """One down: the other does the work. All down: the level fails with a reason, promptly."""
    sup = Supervisor(stack.state_dir)
    sup.stop("capture-1")
    with _api(stack) as api:
        seeds = [f"{site.url}/p0.html", f"{site.url}/p1.html"]
        view = _wait_done(api, _start(api, seeds))
        assert view["state"] == "succeeded", view
        assert view["pagesCaptured"] == 2

        sup.stop("capture-2")
        started = time.monotonic()
        view = _wait_done(api, _start(api, [f"{site.url}/p2.html"]))
        assert view["state"] == "failed", view
        error = view["error"].lower()
        assert "browserhive" in error and ("unreachable" in error or "unavailable" in error), view["error"]
        assert time.monotonic() - started < CRAWL_DEADLINE_S
        _no_crawl_running(api)


def test_all_capture_servers_busy_the_crawl_waits_and_completes(stack, site):
    """Both browsers busy with slow captures (operationDelayMs): the flow gets 429 Busy from
    each, waits 0.5–1.5 s and goes round again; its page is captured once one is free."""
    import threading

    captures = [stack.info["services"][n] for n in ("capture-1", "capture-2")]
    formats = {"png": False, "webp": False, "html": True, "links": False, "mhtml": False, "wacz": False}
    done: list[float] = []

    def occupy(url: str) -> None:
        httpx.post(f"{url}/captures", json={"url": f"{site.url}/p3.html", "captureFormats": formats,
                                            "operationDelayMs": 2500},
                   headers={"accept": "application/json"}, timeout=180)
        done.append(time.monotonic())

    threads = [threading.Thread(target=occupy, args=(u,), daemon=True) for u in captures]
    for t in threads:
        t.start()
    deadline = time.monotonic() + 60
    while not all(httpx.get(f"{u}/status", timeout=10).json().get("busy") for u in captures):
        assert time.monotonic() < deadline, "capture servers never became busy"
        time.sleep(0.1)
    with _api(stack) as api:
        view = _wait_done(api, _start(api, [f"{site.url}/p1.html"]))
        finished = time.monotonic()
    for t in threads:
        t.join(180)
    assert view["state"] == "succeeded", view
    assert view["pagesCaptured"] == 1
    assert done and finished >= min(done)  # the crawl's page waited for a free browser


def test_ts_compile_down_the_crawl_fails_with_a_reason(stack, site):
    Supervisor(stack.state_dir).stop("tscompile")
    with _api(stack) as api:
        crawl_id = _start(api, [f"{site.url}/p3.html"], scripts=[
            {"name": "fault-probe", "phase": "behavior", "source": "const n: number = 1; void n;"}])
        view = _wait_done(api, crawl_id)
        assert view["state"] == "failed", view
        assert "compile" in view["error"].lower(), view["error"]
        _no_crawl_running(api)


def test_ledger_restarted_mid_level_the_crawl_completes_with_correct_totals(stack, site):
    with _api(stack) as api:
        seeds = [f"{site.url}/p{i}.html" for i in range(3)]
        crawl_id = _start(api, seeds, perHostDelayMs=3000)  # one host: ≥ 6 s of gaps in the level
        time.sleep(2)
        Supervisor(stack.state_dir).stop("ledger")
        time.sleep(3)
        _restart(stack, "ledger")  # the flow's report retries while the ledger is away
    with _api(stack) as api:
        view = _wait_done(api, crawl_id)
        assert view["state"] == "succeeded", view
        assert view["pagesCaptured"] == 3 and view["stopReason"] in ("completed", "max_depth")
        _no_crawl_running(api)


def test_windmill_job_cancelled_mid_level_the_watchdog_closes_the_crawl(stack, site):
    info = stack.info
    wm_token = json.loads((Path(stack.state_dir) / "secrets.json").read_text())["windmill_token"]
    with _api(stack) as api:
        seeds = [f"{site.url}/p{i}.html" for i in range(3)]
        crawl_id = _start(api, seeds, perHostDelayMs=5000)
        deadline = time.monotonic() + 30
        while not (job := api.get(f"/api/crawls/{crawl_id}").json().get("lastJob")):
            assert time.monotonic() < deadline, "no job recorded"
            time.sleep(0.2)
        time.sleep(1)
        r = httpx.post(f"{info['services']['windmill']}/api/w/{info['workspace']}/jobs_u/queue/cancel/{job['id']}",
                       json={"reason": "fault test"}, headers={"Authorization": f"Bearer {wm_token}"}, timeout=10)
        assert r.status_code < 300, r.text
        cancelled_at = time.monotonic()
        view = _wait_done(api, crawl_id, timeout_s=60)
        assert view["state"] == "failed", view
        assert "cancel" in view["error"].lower(), view["error"]
        assert time.monotonic() - cancelled_at < 45  # watchdog interval (15 s) plus margin
        _no_crawl_running(api)


def _kept_child(keeper_pid: int) -> int:
    kids = Path(f"/proc/{keeper_pid}/task/{keeper_pid}/children").read_text().split()
    assert kids, f"keeper {keeper_pid} runs no capture server"
    return int(kids[0])


def test_a_capture_server_that_dies_is_restarted_and_counted(stack, site):
    """Issue 24 item 9: capture-1's process killed (SIGKILL, as a crash): its keeper starts it again
    on the same port, `waggle dev status` shows restarts 1, and a crawl afterwards uses it."""
    import os
    import signal
    import subprocess
    import sys

    from devstack.stack import status

    sup = Supervisor(stack.state_dir)
    keeper = sup.record("capture-1")["pid"]
    before = sup.restarts("capture-1")
    dead = _kept_child(keeper)
    os.kill(dead, signal.SIGKILL)
    deadline = time.monotonic() + 120  # Chromium's launch on a loaded machine
    while True:
        row = next(r for r in status(stack.state_dir) if r["name"] == "capture-1")
        if row["healthy"] and row["restarts"] == before + 1:
            break
        assert time.monotonic() < deadline, row
        time.sleep(0.5)
    assert sup.record("capture-1")["pid"] == keeper and _kept_child(keeper) != dead
    done = subprocess.run([sys.executable, "-c", "import sys; sys.argv[0]='waggle'; from waggle.cli import main; main()",
                           "dev", "status", "--state-dir", str(stack.state_dir)], capture_output=True, text=True,
                          timeout=60)
    line = next(ln for ln in done.stdout.splitlines() if "capture-1" in ln)
    assert "restarts" in done.stdout and line.rstrip(" │|").split()[-1] == str(before + 1), done.stdout
    with _api(stack) as api:
        view = _wait_done(api, _start(api, [f"{site.url}/p0.html", f"{site.url}/p1.html"]))
    assert view["state"] == "succeeded" and view["pagesCaptured"] == 2, view
