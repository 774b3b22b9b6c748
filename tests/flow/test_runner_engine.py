"""The runner's OpenFlow semantics on a probe flow (its own --root): JSON-round-tripped args with
missing → null and Python defaults, for-each in iterator order with at most ``parallelism`` at
once, per-module retry, and the failure module receiving ``error`` with the inner ``step_id``."""

from __future__ import annotations

import json
import os
import textwrap
from pathlib import Path

import httpx
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

# Per-job isolation (windmill.md §7: every job is a fresh Python process) and the warm
# forkserver's TLS contexts: distinct, untouched, same trust store as a context built now.
TLS = '''
import ssl
import sys

import httpx

CALLS = []  # module state: a fresh process per job must start it empty


def main():
    CALLS.append(1)
    from devstack.windmill import warm

    before = warm.pooled()
    clients = [httpx.Client(), httpx.Client()]
    contexts = [c._transport._pool._ssl_context for c in clients]
    reference = warm._real_create_default_context(cafile=warm.bundles()[0])
    return {"calls": len(CALLS), "before": before, "after": warm.pooled(), "bundle": warm.bundles()[0],
            "distinct": contexts[0] is not contexts[1],
            "required": all(c.verify_mode == ssl.CERT_REQUIRED and c.check_hostname for c in contexts),
            "cas": [len(c.get_ca_certs()) for c in contexts], "reference_cas": len(reference.get_ca_certs()),
            "preloaded": "httpx" in sys.modules}
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
    (root / "f" / "t" / "tls.py").write_text(textwrap.dedent(TLS))
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


def test_step_timing_in_the_log(probe_runner):
    job = run(probe_runner, {"items": ["t1"], "width": 1})
    assert job["success"] is True, probe_runner.logs(job["id"])
    line = next(x for x in probe_runner.logs(job["id"]).splitlines() if x.startswith("--- step work (f/t/probe) exit 0"))
    timing = json.loads(line[line.index("{"):])
    assert set(timing) == {"start_s", "import_s", "main_s", "exit_s"}
    assert timing["main_s"] >= 0.69  # the probe sleeps 700 ms inside main
    assert all(v >= 0 for v in timing.values())
    wall = float(line.split(" after ")[1].split("s ")[0])
    assert sum(timing.values()) <= wall + 0.02  # the parts fit in the step's wall time (2 decimals)


def test_each_job_is_a_fresh_process_with_its_own_warm_tls_contexts(probe_runner):
    runs = []
    for _ in range(2):
        r = probe_runner.client.post(probe_runner.api("/jobs/run/p/f/t/tls"), json={})
        assert r.status_code == 201, r.text
        job = probe_runner.wait(r.text)
        assert job["success"] is True, probe_runner.logs(job["id"])
        runs.append(job["result"])
    for got in runs:
        assert got["calls"] == 1  # module state never survives a job
        bundle = got["bundle"]
        # two clients took two preloaded contexts; the next job starts with a full pool again
        assert got["after"][bundle] == got["before"][bundle] - 2
        assert got["distinct"] and got["required"] and got["preloaded"]
        assert got["cas"] == [got["reference_cas"]] * 2 and got["reference_cas"] > 0
    assert runs[0]["before"] == runs[1]["before"]


WARM_CHECK = '''
import json, os, ssl
from devstack.windmill import warm
bundle = os.environ["SSL_CERT_FILE"]
out = {"pooled": warm.pooled()[bundle], "size": warm.POOL_SIZE}
taken = [ssl.create_default_context(cafile=bundle) for _ in range(warm.POOL_SIZE)]
out["left"] = warm.pooled()[bundle]
extra = ssl.create_default_context(cafile=bundle)  # pool empty: built as before
out["all_distinct"] = len({id(c) for c in taken + [extra]}) == warm.POOL_SIZE + 1
warm.preload(1)
os.utime(bundle, ns=(0, 0))  # the file changed after the preload: never served from the pool
changed = ssl.create_default_context(cafile=bundle)
out["after_change"] = warm.pooled()[bundle]
out["other_args"] = [ssl.create_default_context(ssl.Purpose.CLIENT_AUTH, cafile=bundle) is not None,
                     warm.pooled()[bundle]]
out["same_store"] = len(changed.get_ca_certs()) == len(taken[0].get_ca_certs()) > 0
print(json.dumps(out))
'''


def test_warm_pool_serves_only_httpx_default_and_falls_back(tmp_path):
    import shutil
    import subprocess
    import sys

    import certifi

    bundle = tmp_path / "bundle.pem"
    shutil.copy(certifi.where(), bundle)
    env = {k: v for k, v in os.environ.items() if k not in ("SSLKEYLOGFILE", "SSL_CERT_DIR")}
    env.update(SSL_CERT_FILE=str(bundle), PYTHONPATH=str(Path(__file__).resolve().parents[2]))
    done = subprocess.run([sys.executable, "-c", WARM_CHECK], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["pooled"] == out["size"] > 0 and out["left"] == 0 and out["all_distinct"]
    assert out["after_change"] == 1  # still there: the changed file was loaded afresh
    assert out["other_args"] == [True, 1] and out["same_store"]



# -- input transforms: the Python property-path shortcut answers exactly like V8 -----------------
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from devstack.windmill.expr import ExpressionError, evaluate, transform  # noqa: E402

KEYS = st.sampled_from(["a", "b", "host", "length", "constructor", "toString", "__proto__", "valueOf", "$x", "_y"])
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-2**60, 2**60) | st.text(max_size=5)
    # JSON has no NaN/Infinity (flow inputs and results arrive as JSON); with one anywhere in the
    # context, V8 refuses the whole context while the shortcut reads an unrelated path fine.
    | st.floats(allow_nan=False, allow_infinity=False) | st.sampled_from([1.0, -0.0, 2.5, 1e22]),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(KEYS, inner, max_size=4),
    max_leaves=12,
)


def _outcome(fn):
    try:
        return ("ok", repr(fn()))
    except ExpressionError:
        return ("error", None)


@settings(max_examples=100, deadline=None)
@given(flow_input=st.dictionaries(KEYS, JSON_VALUES, max_size=4), results=st.dictionaries(KEYS, JSON_VALUES, max_size=3),
       root=st.sampled_from(["flow_input", "results", "previous_result", "missing"]),
       path=st.lists(KEYS, max_size=4), spaced=st.booleans())
def test_property_path_transforms_match_v8(flow_input, results, root, path, spaced):
    context = {"flow_input": flow_input, "results": results, "previous_result": None}
    expr = (" . " if spaced else ".").join([root, *path])
    fast = _outcome(lambda: transform({"type": "javascript", "expr": expr}, context))
    v8 = _outcome(lambda: evaluate(expr, context))
    assert fast == v8, expr


def test_token_guard(probe_runner):
    url = probe_runner.url
    assert httpx.get(f"{url}/api/version").status_code == 200  # open, for health checks
    assert httpx.get(f"{url}/api/w/waggle/variables/list").text.startswith("Unauthorized")
    assert httpx.get(f"{url}/api/w/waggle/variables/list", headers={"authorization": "Bearer x"}).status_code == 401
    assert httpx.get(f"{url}/api/w/waggle/variables/list?token=runner-test-token").status_code == 200
    other = probe_runner.client.get("/api/w/elsewhere/variables/list")
    assert other.status_code == 404 and "this runner serves waggle" in other.text
    assert probe_runner.client.get(probe_runner.api("/variables/list")).status_code == 200


def test_spare_step_process_serves_one_job_then_more_are_forked(tmp_path):
    from devstack.windmill.engine import _STEPS
    from devstack.windmill.spares import Spares

    (tmp_path / "f" / "u").mkdir(parents=True)
    (tmp_path / "f" / "u" / "who.py").write_text("import os\n\ndef main(tag: str):\n"
                                                 "    return {'pid': os.getpid(), 'sid': os.getsid(0), 'tag': tag,\n"
                                                 "            'env': os.environ.get('ONLY_THIS_JOB')}\n")
    spares = Spares(_STEPS, 1)
    spares.fill()  # synchronous here: one spare forked and waiting
    [(idle, _)] = list(spares._ready)

    def launch(tag: str):
        work = tmp_path / tag
        work.mkdir()
        (work / "args.json").write_text(json.dumps({"tag": tag}))
        env = {"PYTHONPATH": str(tmp_path), "ONLY_THIS_JOB": tag}
        proc = spares.launch(("f/u/who", str(work / "args.json"), str(work / "result.json"), str(work / "log"), env,
                              str(tmp_path), str(tmp_path / "pycache")), f"step-{tag}")
        proc.join(60)
        assert proc.exitcode == 0, (work / "log").read_text()
        return proc, json.loads((work / "result.json").read_text())

    try:
        first, got = launch("one")
        assert first is idle and got["pid"] == idle.pid  # the spare ran it ...
        assert got["sid"] == got["pid"] and got["env"] == "one"  # ... in its own session and environment
        second, again = launch("two")
        assert again["pid"] != got["pid"] and again["env"] == "two"  # one job per process, never reused
        spares.fill()
        waiting = [proc for proc, _ in list(spares._ready)]
        assert waiting and all(p.is_alive() for p in waiting)
    finally:
        spares.close()
    for proc in waiting:  # an idle spare exits once the runner closes its pipe
        proc.join(30)
        assert proc.exitcode == 0
