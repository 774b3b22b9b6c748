"""The runner's OpenFlow semantics on a probe flow (its own --root): JSON-round-tripped args with
missing → null and Python defaults, for-each in iterator order with at most ``parallelism`` at
once, per-module retry, and the failure module receiving ``error`` with the inner ``step_id``."""

from __future__ import annotations

import os
import textwrap
from pathlib import Path

import pytest

from tests.flow.conftest import start_runner, stop_runner

PROBE = '''
# /// script
# requires-python = ">=3.11"
# dependencies = []
# ///
import os
import time


def main(name: str, sleep_ms: int = 0, fail_times: int = 0, missing: str = "dflt", absent: dict = None, nodefault: str = None):
    counter = os.path.join(os.environ["PROBE_DIR"], f"{name}.count")
    count = int(open(counter).read()) + 1 if os.path.exists(counter) else 1
    open(counter, "w").write(str(count))
    start = time.time()
    time.sleep(sleep_ms / 1000)
    if count <= fail_times:
        raise RuntimeError(f"planned failure {count} of {name}")
    return {"name": name, "start": start, "end": time.time(), "missing": missing, "absent": absent,
            "nodefault": nodefault, "attempt": count, "step": os.environ.get("WM_FLOW_STEP_ID"),
            "ws": os.environ.get("WM_WORKSPACE")}
'''

CATCH = '''
def main(error: dict, items: list):
    return {"got": error, "items": items}
'''

FLOW = '''
summary: probe
value:
  modules:
    - id: prep
      value:
        type: script
        path: f/t/probe
        input_transforms:
          name: {type: static, value: prep}
          missing: {type: javascript, expr: flow_input.nothing}
          nodefault: {type: javascript, expr: flow_input.nothing}
    - id: loop
      value:
        type: forloopflow
        iterator: {type: javascript, expr: flow_input.items}
        parallel: true
        parallelism: {type: javascript, expr: flow_input.width}
        skip_failures: false
        modules:
          - id: work
            value:
              type: script
              path: f/t/probe
              input_transforms:
                name: {type: javascript, expr: flow_input.iter.value}
                sleep_ms: {type: static, value: 700}
                fail_times: {type: javascript, expr: "flow_input.iter.value == 'bad' ? 99 : (flow_input.iter.index == 1 ? 1 : 0)"}
            retry:
              constant: {attempts: 1, seconds: 1}
  failure_module:
    id: failure
    value:
      type: script
      path: f/t/catch
      input_transforms:
        error: {type: javascript, expr: error}
        items: {type: javascript, expr: flow_input.items}
'''


@pytest.fixture(scope="module")
def probe_runner(tmp_path_factory):
    root = tmp_path_factory.mktemp("probe-root")
    (root / "f" / "t" / "loop.flow").mkdir(parents=True)
    (root / "f" / "t" / "probe.py").write_text(textwrap.dedent(PROBE))
    (root / "f" / "t" / "catch.py").write_text(textwrap.dedent(CATCH))
    (root / "f" / "t" / "loop.flow" / "flow.yaml").write_text(FLOW)
    counters = tmp_path_factory.mktemp("counters")
    os.environ["PROBE_DIR"] = str(counters)  # inherited by the runner and its steps
    try:
        runner = start_runner(tmp_path_factory.mktemp("probe-state"), ["--root", str(root)])
    finally:
        del os.environ["PROBE_DIR"]
    yield runner
    stop_runner(runner)


def run(runner, args):
    r = runner.client.post(runner.api("/jobs/run/f/f/t/loop"), json=args)
    assert r.status_code == 201, r.text
    return runner.wait(r.text)


def test_loop_order_parallelism_retry_and_null_args(probe_runner):
    job = run(probe_runner, {"items": ["a", "b", "c", "d"], "width": 2})
    assert job["success"] is True, probe_runner.logs(job["id"])
    results = job["result"]
    assert [r["name"] for r in results] == ["a", "b", "c", "d"]  # iterator order
    assert [r["attempt"] for r in results] == [1, 2, 1, 1]          # b failed once and was retried
    assert all(r["step"] == "work" and r["ws"] == "waggle" for r in results)
    spans = [(r["start"], r["end"]) for r in results]
    overlap = max(sum(1 for s, e in spans if s <= t < e) for t, _ in spans)
    assert overlap == 2  # never more than `parallelism` iterations at once, and really parallel
    prep = job["flow_status"]["modules"][0]["result"]
    # undefined → null → the Python default; a parameter without default receives None
    assert prep["missing"] == "dflt" and prep["absent"] is None and prep["nodefault"] is None
    assert "retry 1/1" in probe_runner.logs(job["id"])


def test_failure_module_gets_the_inner_step_id(probe_runner):
    job = run(probe_runner, {"items": ["x", "bad"], "width": 1})
    assert job["success"] is False and job["canceled"] is False
    got = job["result"]["got"]
    assert got["step_id"] == "work" and got["name"] == "RuntimeError"
    assert got["message"].startswith("planned failure") and "stack" in got
    assert job["result"]["items"] == ["x", "bad"]
    assert [m["type"] for m in job["flow_status"]["modules"]] == ["Success", "Failure"]
    assert job["flow_status"]["failure_module"]["type"] == "Success"


def test_unknown_flow_and_bad_body(probe_runner):
    r = probe_runner.client.post(probe_runner.api("/jobs/run/f/f/t/none"), json={})
    assert r.status_code == 404 and "flow not found" in r.text
    r = probe_runner.client.post(probe_runner.api("/jobs/run/f/f/t/loop"), content=b"{nope",
                                 headers={"content-type": "application/json"})
    assert r.status_code == 400
