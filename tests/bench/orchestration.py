"""Orchestration overhead of ``f/waggle/crawl_level`` on the local Windmill runner (issue 8 item 3).

No Chromium: the runner (``python -m devstack.windmill``, started like the flow tests start it)
runs the real flow against loopback stand-ins from ``tests/flow`` — a BrowserHive fake whose
capture takes 0 ms, the ts-compile fake, a ledger fake (answers ``/pages``, ``/progress``, ``/index``) and one
site serving ``robots.txt``. Each level is one host with one URL, ``per_host_delay_ms = 0`` and
one TypeScript script, so the level's wall time is all orchestration: plan (robots fetch),
compile, one crawl_host step, report, index, and the runner between them.

Measures, per level (sequential levels, the next one queued as soon as the previous completed):

* **overhead per level** = job ``created_at`` → completion (``started_at`` + ``duration_ms``)
  − capture time (the fake's own timer); target ≤ 1 s;
* **scheduling latency** = ``created_at`` → ``started_at`` of the flow job;
* **step wall** per module (the runner's ``--- step … after Ns`` log line: process start →
  result read), and **flow bookkeeping** = job duration − Σ step walls (the runner's own work
  between steps: expressions, job records, forking);
* the step-internal split when the runner reports it (``timing`` in its log line: fork → child
  running, import of the script, ``main``);
* **empty step**: a flow of 5 steps whose ``main`` returns at once (its own ``--root``) — the
  runner's fixed cost per step; and **variable read**: ``GET variables/get_value`` round trip
  and ``wmill.get_variable`` in a fresh client (what each step pays per variable).

The machine is shared: compare runs made under the same load (recorded at start and end).
"""

from __future__ import annotations

import json
import re
import statistics
import tempfile
import textwrap
import time
from datetime import datetime
from pathlib import Path

import httpx

from tests.bench.harness import Context, summary

TARGET_S = 1.0
STEP_LINE = re.compile(r"^--- step (\S+) \((\S+)\) exit (-?\d+) after ([0-9.]+)s(?: (\{.*\}))?$", re.M)
FORMATS = {"png": False, "webp": False, "html": False, "links": True, "mhtml": False, "wacz": True}
TS_SCRIPT = {"id": "autoscroll", "version": 3, "phase": "behavior", "source": "let steps: number = 3;",
             "sha256": "a" * 64, "options": {"maxSteps": 60}}

EMPTY_STEP = "def main(n: int = 0):\n    return n\n"
EMPTY_FLOW = "summary: empty steps\nvalue:\n  modules:\n" + "".join(
    f"    - id: s{i}\n      value:\n        type: script\n        path: f/t/empty\n"
    f"        input_transforms:\n          n: {{type: static, value: {i}}}\n" for i in range(5))


def _epoch(iso: str) -> float:
    return datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()


def _job_times(job: dict) -> tuple[float, float, float]:
    """(created, started, completed) epoch seconds of a completed job record."""
    created = _epoch(job["created_at"])
    started = _epoch(job["started_at"])
    return created, started, started + job["duration_ms"] / 1000


def _steps(log: str) -> list[dict]:
    out = []
    for label, path, code, secs, extra in STEP_LINE.findall(log):
        row = {"step": label, "path": path, "exit": int(code), "wall_s": float(secs)}
        if extra:
            row.update(json.loads(extra))
        out.append(row)
    return out


def _run(runner, path: str, args: dict, timeout: float = 120) -> dict:
    r = runner.client.post(runner.api(f"/jobs/run/f/{path}"), json=args)
    r.raise_for_status()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        job = runner.job(r.text)
        if job["type"] == "CompletedJob":
            return job
        time.sleep(0.1)  # the metrics come from the job record, not from this poll; polling faster loads the runner
    raise RuntimeError(f"job {r.text} did not finish in {timeout}s")


def _level_rows(runner, hive, site, ledger, n: int) -> list[dict]:
    rows = []
    for depth in range(n):
        before = len(hive.captures)
        args = {"crawl_id": "bench", "depth": depth,
                "frontier": [{"url": f"{site.url}/p{depth}", "host": site.authority, "lastFinishedAt": None}],
                "per_host_delay_ms": 0, "host_parallelism": 1, "capture_formats": FORMATS, "signing": False,
                "scripts": [TS_SCRIPT], "artifact_sink": {"url": f"{ledger.url}/api/sink/bench", "token": "t"}}
        job = _run(runner, "f/waggle/crawl_level", args)
        if not job["success"]:
            raise RuntimeError(f"level {depth} failed: {job['result']}\n{runner.logs(job['id'])}")
        created, started, completed = _job_times(job)
        capture_s = sum(c["end"] - c["start"] for c in hive.captures[before:])
        steps = _steps(runner.logs(job["id"]))
        step_sum = sum(s["wall_s"] for s in steps)
        rows.append({"depth": depth, "overhead_s": completed - created - capture_s,
                     "scheduling_s": started - created, "duration_s": job["duration_ms"] / 1000,
                     "capture_s": capture_s, "bookkeeping_s": job["duration_ms"] / 1000 - step_sum,
                     "steps": steps})
    return rows


def _variable_reads(runner, n: int) -> dict:
    """REST round trip of one variable read, and a fresh ``wmill`` client's first read (ms)."""
    import wmill

    rest, fresh = [], []
    path = runner.api("/variables/get_value/u/admin/waggle_api_url")
    for _ in range(n):
        t0 = time.perf_counter()
        runner.client.get(path).raise_for_status()
        rest.append((time.perf_counter() - t0) * 1000)
    from tests.flow.conftest import RUNNER_TOKEN, WORKSPACE

    for _ in range(max(3, n // 10)):
        t0 = time.perf_counter()
        client = wmill.Windmill(base_url=runner.url, token=RUNNER_TOKEN, workspace=WORKSPACE)
        client.get_variable("u/admin/waggle_api_url")
        fresh.append((time.perf_counter() - t0) * 1000)
        client.client.close()
    return {"rest_ms": summary(rest), "fresh_wmill_client_ms": summary(fresh)}


def orchestration(ctx: Context) -> None:
    """Per-level orchestration overhead of crawl_level on the local runner (no Chromium), its split
    into scheduling, steps and bookkeeping; fixed cost of an empty step; variable reads."""
    from tests.flow.conftest import FakeBrowserHive, FakeLedger, start_runner, stop_runner, ts_compile_handler
    from tests.flow.fakes import HttpFake

    levels = 3 if ctx.quick else 10
    with tempfile.TemporaryDirectory(prefix="waggle-bench-orch-") as tmp:
        tmp_path = Path(tmp)
        root = tmp_path / "root"
        (root / "f" / "t" / "empty.flow").mkdir(parents=True)
        (root / "f" / "t" / "empty.py").write_text(textwrap.dedent(EMPTY_STEP))
        (root / "f" / "t" / "empty.flow" / "flow.yaml").write_text(EMPTY_FLOW)
        (tmp_path / "s1").mkdir()
        (tmp_path / "s2").mkdir()
        hive = FakeBrowserHive(capture_s=0.0)
        ts = HttpFake(ts_compile_handler)
        ledger = FakeLedger()
        site = HttpFake(lambda r: (200, {}, "User-agent: *\nAllow: /\n") if r.path == "/robots.txt" else (404, {}, ""))
        runner = start_runner(tmp_path / "s1")
        empty = start_runner(tmp_path / "s2", ["--root", str(root)])
        try:
            for path, value, secret in (
                ("u/admin/waggle_api_url", ledger.url, False), ("u/admin/waggle_token", "flow-jwt", True),
                ("u/admin/browserhive_endpoints", json.dumps([hive.url + "/"]), False),
                ("u/admin/browserhive_tls_ca", "", False), ("u/admin/ts_compile_url", ts.url, False),
                ("u/admin/waggle_allow_private_hosts", "1", False),
            ):
                runner.set_variable(path, value, secret)
            _level_rows(runner, hive, site, ledger, 1)  # warm-up (first fork, page cache), not counted
            rows = _level_rows(runner, hive, site, ledger, levels)

            _run(empty, "f/t/empty", {})  # warm-up
            empty_rows = []
            for _ in range(3 if ctx.quick else 8):
                job = _run(empty, "f/t/empty", {})
                created, started, completed = _job_times(job)
                steps = _steps(empty.logs(job["id"]))
                empty_rows.append({"per_step_s": (completed - started) / len(steps),
                                   "step_wall_s": [s["wall_s"] for s in steps],
                                   "scheduling_s": started - created,
                                   "bookkeeping_s": job["duration_ms"] / 1000 - sum(s["wall_s"] for s in steps),
                                   "steps": steps})
            reads = _variable_reads(runner, 20 if ctx.quick else 100)
        finally:
            stop_runner(runner)
            stop_runner(empty)
            for fake in (hive, ts, ledger, site):
                fake.close()

    med = statistics.median
    per_level = [r["overhead_s"] for r in rows]
    ctx.metric("orchestration overhead per level (median)", med(per_level), "s", TARGET_S, "<=",
               note=f"{levels} levels, 1 host × 1 URL, 0 ms capture, 0 ms delay", key="overhead_per_level_median_s")
    ctx.metric("orchestration overhead per level (max)", max(per_level), "s", TARGET_S, "<=")
    ctx.metric("flow scheduling latency (created → started), median", med(r["scheduling_s"] for r in rows) * 1000, "ms")
    ctx.metric("flow bookkeeping per level (duration − Σ step walls), median",
               med(r["bookkeeping_s"] for r in rows) * 1000, "ms")
    by_step: dict[str, list[dict]] = {}
    for r in rows:
        for s in r["steps"]:
            by_step.setdefault(s["step"], []).append(s)
    for step, seq in by_step.items():
        note = ""
        if all("main_s" in s for s in seq):
            note = (f"fork→running {med(s['start_s'] for s in seq) * 1000:.0f} ms, import "
                    f"{med(s['import_s'] for s in seq) * 1000:.0f} ms, main {med(s['main_s'] for s in seq) * 1000:.0f} ms")
        ctx.metric(f"step {step} wall, median", med(s["wall_s"] for s in seq) * 1000, "ms", note=note)
    ctx.metric("empty step: runner cost per step, median", med(r["per_step_s"] for r in empty_rows) * 1000, "ms",
               note="5 sequential steps whose main returns at once")
    ctx.metric("variable read over REST, median", reads["rest_ms"]["median"], "ms")
    ctx.metric("fresh wmill client + first variable read, median", reads["fresh_wmill_client_ms"]["median"], "ms",
               note="in this process: a step without the forkserver's preloaded TLS contexts pays this")
    ctx.detail("levels", rows)
    ctx.detail("empty_flow", empty_rows)
    ctx.detail("variable_reads", reads)
    ctx.detail("overhead_s", summary(per_level))
