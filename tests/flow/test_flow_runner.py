"""The whole flow ``f/waggle/crawl_level`` on the local Windmill runner, against fake
BrowserHive, ts-compile and ledger HTTP servers and real robots.txt servers on 127.0.0.1."""

from __future__ import annotations

import json
import re
import shutil
import time
from pathlib import Path

import pytest

from f.waggle.common import parse_iso
from tests.flow.conftest import start_runner, stop_runner
from tests.flow.fakes import HttpFake

FORMATS = {"png": False, "webp": False, "html": False, "links": True, "mhtml": False, "wacz": True}
TS_SCRIPT = {"id": "autoscroll", "version": 3, "phase": "behavior", "source": "let steps: number = 3;",
             "sha256": "a" * 64, "options": {"maxSteps": 60}}


@pytest.fixture
def sites():
    made: list[HttpFake] = []

    def make(robots: str | None):
        fake = HttpFake(lambda r: (404, {}, "") if robots is None or r.path != "/robots.txt" else (200, {}, robots))
        made.append(fake)
        return fake

    yield make
    for fake in made:
        fake.close()


def frontier(site, *paths, last=None):
    return [{"url": f"{site.url}{p}", "host": site.authority, "lastFinishedAt": last} for p in paths]


def all_captures_started(hives) -> bool:
    return any(h._busy.locked() for h in hives)


def all_captures(hives):
    return sorted((c for h in hives for c in h.captures), key=lambda c: c["start"])


def test_one_level_end_to_end(services, sites):
    runner, ledger, hives = services["runner"], services["ledger"], services["hives"]
    a = sites("User-agent: *\nDisallow: /hidden\n")
    b = sites(None)
    args = {
        "crawl_id": "c-1", "depth": 0,
        "frontier": frontier(a, "/1", "/hidden", "/2", "/3") + frontier(b, "/x"),
        "per_host_delay_ms": 300, "host_parallelism": 4,
        "capture_formats": FORMATS, "signing": False, "scripts": [TS_SCRIPT],
        "artifact_sink": {"url": f"{ledger.url}/api/sink/c-1", "token": "one-time"},
    }
    job = runner.wait(runner.run_flow(args))
    assert job["success"] is True, runner.logs(job["id"])
    assert job["result"] == {"indexed": 0, "pages": 0, "skipped": True}
    assert [m["type"] for m in job["flow_status"]["modules"]] == ["Success"] * 5

    # the level report: host results in group order, then the robots skip
    [report] = ledger.pages
    assert report["depth"] == 0
    assert [(r["url"], r["status"]) for r in report["results"]] == [
        (f"{a.url}/1", "captured"), (f"{a.url}/2", "captured"), (f"{a.url}/3", "captured"),
        (f"{b.url}/x", "captured"), (f"{a.url}/hidden", "skipped")]
    assert report["results"][-1] == {"url": f"{a.url}/hidden", "status": "skipped", "failureClass": "permanent",
                                     "skipReason": "robots: robots.txt lines 1–2: `User-agent: *` … `Disallow: /hidden`"}
    # each capture's start and end reached the ledger as progress events (issue 15)
    done = [(e["url"], e["status"]) for e in ledger.progress if e["phase"] == "done"]
    assert sorted(done) == sorted((r["url"], r["status"]) for r in report["results"][:4])
    assert sum(e["phase"] == "started" for e in ledger.progress) == 4
    assert ledger.read_tokens == 2  # one per host job: the capture servers' read token (decision 405)
    # no expected-404 noise (issue 17 item 5): neither the missing /index nor absent optional variables
    logs = runner.logs(job["id"])
    # a 404 status, not a random port such as 40437
    assert not re.search(r"(?<!\d)404(?!\d)", logs) and "no index endpoint" not in logs, logs
    assert all(r["correlationId"] == "c-1" and r["manifestLocation"] for r in report["results"][:4])
    js_hash = report["compiled"]["scripts"][0]["sha256"]
    assert report["compiled"] == {"typescript": "6.0.3", "hostTypes": "v0.2.0",
                                  "scripts": [{"id": "autoscroll", "version": 3, "sha256": js_hash}]}
    assert len(ledger.index) == 1 and ledger.index[0].body == b"" and ledger.failed == []

    # BrowserHive got the JavaScript (never the TypeScript), the sink and no page robots forbids
    captures = all_captures(hives)
    assert f"{a.url}/hidden" not in [c["url"] for c in captures]
    body = captures[0]["body"]
    assert body["behaviors"] == [{"id": "autoscroll", "source": '"use strict";\nlet steps = 3;\n',
                                  "sha256": js_hash, "options": {"maxSteps": 60}}]
    assert body["artifactSink"] == {"url": f"{ledger.url}/api/sink/c-1", "token": "one-time"}
    assert [r.path for r in a.requests] == ["/robots.txt"]
    # the robots.txt outcomes plan_level fetched went to the ledger (the crawl's cache), in normal
    # form with each rule's source lines (decision 104)
    assert [(e["host"], e["state"], e["body"]) for e in report["robots"]] == [
        (a.authority, "allowed", "user-agent: *\ndisallow: /hidden #L2 g1 n1 u0 s1\n"), (b.authority, "unavailable", None)]

    # politeness: within host a, each submission ≥ 300 ms after the previous capture ended
    on_a = [c for c in captures if c["url"].startswith(a.url)]
    assert [c["url"] for c in on_a] == [f"{a.url}/1", f"{a.url}/2", f"{a.url}/3"]
    assert all(n["start"] - p["end"] >= 0.29 for p, n in zip(on_a, on_a[1:]))
    # hosts ran in parallel: b's page was captured while a was still in its gaps
    on_b = [c for c in captures if c["url"].startswith(b.url)]
    assert on_b[0]["start"] < on_a[-1]["start"]


def test_next_level_with_a_minimal_ledger_body_waits_the_rest_of_the_gap(services, sites):
    """Level 0, then level 1 with only the required keys (as a webhook run gets them): robots is
    still read, null inputs take their defaults (2000 ms gap, no sink), and the first capture of
    level 1 waits for the gap since the host's last capture of level 0."""
    runner, ledger, hives = services["runner"], services["ledger"], services["hives"]
    a = sites("User-agent: *\nDisallow: /no\n")
    required = {"capture_formats": FORMATS, "signing": False, "scripts": []}
    job = runner.wait(runner.run_flow({**required, "crawl_id": "c-2", "depth": 0, "frontier": frontier(a, "/0")}))
    assert job["success"] is True, runner.logs(job["id"])
    finished = ledger.pages[0]["results"][0]["finishedAt"]
    level0_end = all_captures(hives)[-1]["end"]

    job = runner.wait(runner.run_flow({**required, "crawl_id": "c-2", "depth": 1,
                                       "frontier": frontier(a, "/no", "/yes", last=finished)}))
    assert job["success"] is True, runner.logs(job["id"])
    results = ledger.pages[1]["results"]
    assert [(r["url"], r["status"]) for r in results] == [(f"{a.url}/yes", "captured"), (f"{a.url}/no", "skipped")]
    assert [r.path for r in a.requests] == ["/robots.txt", "/robots.txt"]  # once per host per level
    level1 = [c for c in all_captures(hives) if c["url"].endswith("/yes")][0]
    assert level1["start"] - level0_end >= 1.95  # default gap (2000 ms) across the level boundary
    assert parse_iso(results[0]["submittedAt"]) - parse_iso(finished) >= 1.95
    plan = job["flow_status"]["modules"][0]["result"]
    assert plan["groups"][0]["delayMs"] == 2000 and 0 <= plan["groups"][0]["initialDelayMs"] <= 2000
    assert plan["parallelism"] == 2  # host_parallelism null → 4, no sleeping host: 2 endpoints
    body = level1["body"]
    assert "artifactSink" not in body and "behaviors" not in body and "preload" not in body
    assert ledger.pages[1]["compiled"]["scripts"] == []


def test_next_level_with_the_cached_robots_reads_no_robots_txt(services, sites):
    """The ledger sends level 0's robots outcomes with level 1 (flow input ``robots``): the
    site sees one robots.txt request for both levels and its rules still apply."""
    runner, ledger = services["runner"], services["ledger"]
    a = sites("User-agent: *\nDisallow: /no\n")
    required = {"capture_formats": FORMATS, "signing": False, "scripts": [], "per_host_delay_ms": 100}
    job = runner.wait(runner.run_flow({**required, "crawl_id": "c-3", "depth": 0, "frontier": frontier(a, "/0")}))
    assert job["success"] is True, runner.logs(job["id"])
    cached = ledger.pages[0]["robots"]
    job = runner.wait(runner.run_flow({**required, "crawl_id": "c-3", "depth": 1, "robots": cached,
                                       "frontier": frontier(a, "/no", "/yes",
                                                            last=ledger.pages[0]["results"][0]["finishedAt"])}))
    assert job["success"] is True, runner.logs(job["id"])
    assert [r.path for r in a.requests] == ["/robots.txt"]
    assert [(r["url"], r["status"]) for r in ledger.pages[1]["results"]] == [
        (f"{a.url}/yes", "captured"), (f"{a.url}/no", "skipped")]
    assert "robots" not in ledger.pages[1]  # nothing fetched, nothing to cache
    assert "1 host(s) cached, 0 fetched" in runner.logs(job["id"])


def test_server_unavailable_ends_in_fail_crawl(services, sites):
    runner, ledger = services["runner"], services["ledger"]
    runner.set_variable("u/admin/browserhive_endpoints", json.dumps(["http://127.0.0.1:1", "http://127.0.0.1:2"]))
    a = sites(None)
    args = {"crawl_id": "c-4", "depth": 0, "frontier": frontier(a, "/1"), "capture_formats": FORMATS,
            "signing": False, "scripts": []}
    job = runner.wait(runner.run_flow(args))
    assert job["success"] is False and job["canceled"] is False
    assert job["result"] == {"closed": True}
    assert ledger.pages == []  # no report, no index
    [failed] = ledger.failed
    assert failed["reason"].startswith("[cap] BrowserHive unreachable: http://127.0.0.1:1, http://127.0.0.1:2")
    statuses = {m["id"]: m["type"] for m in job["flow_status"]["modules"]}
    assert statuses["hosts"] == "Failure" and statuses["report"] == "WaitingForPriorSteps"
    assert job["flow_status"]["failure_module"]["type"] == "Success"
    logs = runner.logs(job["id"])
    assert "retry 1/2" in logs and "retry 2/2" in logs  # the cap module's retry ran (delays scaled)
    assert logs.count("[cap] [") >= 3 or logs.count("BrowserHive unreachable") >= 3


def test_compile_failure_ends_in_fail_crawl(services, sites):
    runner, ledger, hives = services["runner"], services["ledger"], services["hives"]
    a = sites(None)
    broken = dict(TS_SCRIPT, id="broken", source="let n: number = 'x'; // TYPE_ERROR")
    args = {"crawl_id": "c-5", "depth": 0, "frontier": frontier(a, "/1"), "capture_formats": FORMATS,
            "signing": False, "scripts": [broken]}
    job = runner.wait(runner.run_flow(args))
    assert job["success"] is False
    [failed] = ledger.failed
    assert failed["reason"].startswith("[compile] compile 422 CompileFailed") and "TS2322" in failed["reason"]
    assert all_captures(hives) == [] and ledger.pages == []


def test_missing_variable_fails_the_step_naming_it(services):
    runner = services["runner"]
    runner.delete_variable("u/admin/browserhive_tls_ca")
    job_id = runner.client.post(runner.api("/jobs/run/p/f/waggle/crawl_host"), json={
        "crawl_id": "c-6", "host": "h", "urls": ["http://h/"], "per_host_delay_ms": 0,
        "capture_formats": FORMATS, "signing": False, "scripts": []}).text
    job = runner.wait(job_id)
    assert job["success"] is False
    assert job["result"]["error"]["name"] == "VariableError"
    assert "u/admin/browserhive_tls_ca" in job["result"]["error"]["message"]
    assert all_captures(services["hives"]) == []


def _step_pids(runner, job_id: str) -> list[int]:
    """Live step processes of a job, as the runner reports them (checked against /proc)."""
    steps = runner.job(job_id).get("running_steps") or {}
    return [s["pid"] for s in steps.values() if Path(f"/proc/{s['pid']}").exists()]


def test_cancel_kills_the_steps_and_skips_the_failure_module(services, sites):
    runner, ledger, hives = services["runner"], services["ledger"], services["hives"]
    for h in hives:
        h.capture_s = 3.0
    a = sites(None)
    args = {"crawl_id": "c-7", "depth": 0, "frontier": frontier(a, "/1", "/2"), "per_host_delay_ms": 0,
            "capture_formats": FORMATS, "signing": False, "scripts": []}
    job_id = runner.run_flow(args)
    deadline = time.monotonic() + 30
    while not all_captures_started(hives):
        assert time.monotonic() < deadline, runner.logs(job_id)
        time.sleep(0.05)
    assert runner.job(job_id)["flow_status"]["modules"][2]["type"] == "InProgress"
    pids = _step_pids(runner, job_id)
    assert len(pids) == 1  # crawl_host, blocked in a 3 s capture
    r = runner.client.post(runner.api(f"/jobs_u/queue/cancel/{job_id}"), json={"reason": "S5: cancel check"})
    assert r.status_code == 200, r.text
    job = runner.wait(job_id, timeout=10)
    assert job["canceled"] is True and job["success"] is False
    assert job["result"]["error"]["name"] == "Canceled" and "S5: cancel check" in job["result"]["error"]["message"]
    time.sleep(0.2)
    assert not any(Path(f"/proc/{pid}").exists() and "Z" not in Path(f"/proc/{pid}/stat").read_text().split()[2]
                   for pid in pids)  # the step process was killed (gone or a zombie being reaped)
    assert all(len(h.captures) == 0 for h in hives)  # the capture in flight never completed a second page
    assert ledger.failed == [] and ledger.pages == []  # the crawl stays running, as on Windmill
    assert runner.client.post(runner.api(f"/jobs_u/queue/cancel/{job_id}"), json={}).status_code == 400


def test_rest_contract(windmill_runner):
    r = windmill_runner
    assert r.client.get("/api/version").status_code == 200
    import httpx
    assert httpx.get(f"{r.url}/api/w/waggle/variables/list").status_code == 401
    assert httpx.get(f"{r.url}/api/w/waggle/variables/list", headers={"authorization": "Bearer nope"}).status_code == 401
    assert r.client.post(r.api("/jobs/run/f/f/waggle/nothing"), json={}).status_code == 404
    assert r.client.get(r.api("/jobs_u/get/00000000-0000-0000-0000-000000000000")).status_code == 404
    assert r.client.get("/api/w/other/variables/list").status_code == 404
    # Windmill's own variable routes, as scripts/windmill-variables and wmill.set_variable use them
    r.set_variable("u/admin/probe", "one")
    assert r.client.get(r.api("/variables/create"), params={}).status_code in (404, 405)
    assert r.client.post(r.api("/variables/create"), json={"path": "u/admin/probe", "value": "x"}).status_code == 400
    assert r.client.get(r.api("/variables/exists/u/admin/probe")).json() is True
    r.set_variable("u/admin/probe", "two")
    assert r.client.get(r.api("/variables/get_value/u/admin/probe")).json() == "two"
    assert r.client.get(r.api("/variables/get_value/u/admin/absent")).status_code == 404
    # the real wmill client (as the steps use it) reads and writes through the same routes
    import wmill

    client = wmill.Windmill(base_url=r.url, token="runner-test-token", workspace="waggle")
    client.set_variable("u/admin/from_wmill", "three")
    client.set_variable("u/admin/from_wmill", "four")
    assert client.get_variable("u/admin/from_wmill") == "four"
    with pytest.raises(Exception, match=": 404,"):
        client.get_variable("u/admin/never_set")


def test_state_persists_for_a_restarted_runner(windmill_runner, tmp_path):
    r = windmill_runner
    r.set_variable("u/admin/persisted", "kept", secret=True)
    r.delete_variable("u/admin/waggle_api_url")  # fail_crawl then fails at once, naming it
    job_id = r.client.post(r.api("/jobs/run/p/f/waggle/fail_crawl"), json={"crawl_id": "c", "error": "x"}).text
    assert r.wait(job_id)["type"] == "CompletedJob"
    state = tmp_path / "state"
    shutil.copytree(r.state, state, ignore=shutil.ignore_patterns("steps-*", "runner.json"))
    # a job the previous process was running when it stopped
    lost = dict(r.job(job_id), id="11111111-1111-1111-1111-111111111111", type="QueuedJob", running=True,
                success=None, result=None)
    (state / "jobs" / f"{lost['id']}.json").write_text(json.dumps(lost))
    again = start_runner(state)
    try:
        assert again.client.get(again.api("/variables/get_value/u/admin/persisted")).json() == "kept"
        listed = {v["path"]: v for v in again.client.get(again.api("/variables/list")).json()}
        assert listed["u/admin/persisted"]["value"] is None  # secrets are not listed in clear
        assert again.job(job_id)["type"] == "CompletedJob"
        ended = again.job(lost["id"])  # a lost job is reported ended and failed (the watchdog's cue)
        assert ended["type"] == "CompletedJob" and ended["success"] is False and ended["running"] is False
    finally:
        stop_runner(again)


def test_plan_level_main_guards_robots_fetches_unless_opted_out(services, sites):
    """plan_level's main reads the optional opt-out variable with the real wmill client: absent →
    the private-host guard refuses a loopback robots.txt (host skipped, nothing fetched)."""
    runner = services["runner"]
    a = sites("User-agent: *\nAllow: /\n")
    args = {"candidates": frontier(a, "/1"), "per_host_delay_ms": None, "respect_robots": None, "host_parallelism": None}

    def plan_job():
        job_id = runner.client.post(runner.api("/jobs/run/p/f/waggle/plan_level"), json=args).text
        job = runner.wait(job_id)
        assert job["success"] is True, runner.logs(job_id)
        return job["result"]

    runner.delete_variable("u/admin/waggle_allow_private_hosts")
    refused = plan_job()
    assert refused["groups"] == [] and refused["skipped"] == [{"url": f"{a.url}/1", "reason": "robots-unreachable",
                                                                  "failureClass": "transient"}]
    assert a.requests == []
    runner.set_variable("u/admin/waggle_allow_private_hosts", "1")
    allowed = plan_job()
    assert allowed["groups"][0]["urls"] == [f"{a.url}/1"] and allowed["groups"][0]["delayMs"] == 2000
    assert [r.path for r in a.requests] == ["/robots.txt"]
