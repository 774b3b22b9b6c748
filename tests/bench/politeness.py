"""Politeness precision, browser utilization and orchestration overhead (issue 8 items 1–3).

Everything runs through the whole local stack (``devstack.stack.up``, 2 capture servers, the
Windmill runner executing ``f/waggle/crawl_level``, the ledger dispatching each level). The
crawled site is :mod:`tests.bench.site`: 4 hosts (distinct loopback ports), 3 levels of a
binary tree each (7 pages per host); host 0's robots.txt asks ``Crawl-delay: 20`` (so it finishes each level last);
host 1's ``/b`` drops its first two connections (one failed capture attempt, which the flow
retries after the gap).

Two benchmarks, ``politeness-500`` and ``politeness-2000`` (d in ms), each two crawls one after
the other on one stack: as shipped, and as the **baseline** with the cross-level remaining-gap rule disabled: the
runner is restarted on a patched copy of ``f/`` (:func:`baseline_flow_root`: ``plan_level.main``
drops ``lastFinishedAt`` from the frontier), then back on the checkout. The product has no switch
for it. ``WAGGLE_BENCH_NO_BASELINE=1`` runs the as-shipped crawl only (A/B runs in
half the time; not a result to record).

Measures, per crawl:

* **gaps** (server-felt): per host, last request of one capture → first request of the next,
  from the site's own log; split into within-level, level-boundary and after-retry gaps;
  overshoot = gap − effective delay (max(d, Crawl-delay)). Targets: no gap below the
  effective delay; within-level median overshoot ≤ 50 ms, p99 ≤ 250 ms.
* **utilization**: ``GET /status`` of each capture server sampled every 100 ms; the fraction
  of samples ``busy`` inside each level's capture window and over the whole crawl (a capture
  waiting for its ``startAfterMs`` holds its browser, so it counts as busy).
* **seal lag / start lag** (within levels): the flow's ``gapFrom`` − the site's last request of
  a capture, and the next capture's first request − (``gapFrom`` + delay); their sum ≈ overshoot.
* **makespan vs ideal**: per level, makespan = last finish − first submission (the flow's own
  ``submittedAt``/``finishedAt`` in ``crawl_pages``); ideal lower bound = max(max over hosts of
  own wait + the host's chain, Σ capture times / servers); target ideal/makespan ≥ 0.85. A host's
  chain = Σ (gapFrom − submittedAt) + (n−1)·delay + its last capture's tail: with pipelined
  captures (issue 11) a capture's tail overlaps the next one, so Σ capture times + (n−1)·delay
  (kept as ``host_bound_sequential_s``) is no longer a lower bound. "Own wait" = how long after the level's first submission the cross-level rule lets the
  host start (its previous finish + delay); it was missing before 2026-11-29 23:00 UTC, which
  made a level led by the 20 s Crawl-delay host look 0.63–0.84 of ideal although that host ran
  back to back; the old ratio is still reported (``ideal_over_makespan_no_wait``).
* **orchestration overhead** per level = level wall time (this level's job created → next
  level's job created, or → crawl finished) − makespan − the deliberate wait before the first
  capture (the earliest moment any host's gap allowed it: the delay after its last capture of an
  earlier level, from ``gapFrom``, or after the level's own robots.txt request — before
  2026-12-01 the robots.txt gap was counted as overhead, 1.97 s at d = 2000); target ≤ 1 s. Module durations
  (plan, compile, hosts, report, index) are observed by polling the runner's job record (±0.2 s).
"""

from __future__ import annotations

import contextlib
import json
import os
import statistics
import tempfile
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import httpx
import psycopg

from f.waggle.pipeline import START_LEAD_MS
from tests.bench.harness import Context, percentile, summary
from tests.bench.site import Host
from tests.e2e.site import captures

HOSTS = 4
LEVELS = 3
# Longer than C2's 10 s on purpose: the slow host must finish each level last (its pages are 20 s
# apart while the other three share the second browser), so the gap at the boundary is only the
# orchestration between levels — exactly what the cross-level rule must stretch back to 20 s.
CRAWL_DELAY_S = 20.0
SLOW_HOST = 0  # first seed: first in the for-each, so it starts each level at once
FLAKY_HOST = 1
ROBOTS_SLOW = f"User-agent: *\nAllow: /\nCrawl-delay: {CRAWL_DELAY_S:g}\n"
# The line of f/waggle/plan_level.py main() the baseline copy patches (before it, the frontier loses
# lastFinishedAt, so every initialDelayMs is 0: the cross-level remaining-gap rule is off).
PLAN_CALL = "    return plan(candidates, per_host_delay_ms, respect_robots, host_parallelism,"
BASELINE_LINE = ('    candidates = [{k: v for k, v in c.items() if k != "lastFinishedAt"} for c in candidates or []]'
                 "  # benchmark baseline copy\n")
WORKSPACE = "waggle"


def _wall_to_mono(iso: str | None, offset: float) -> float | None:
    """ISO wall-clock time → this process's monotonic clock (same machine)."""
    if not iso:
        return None
    return datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp() - offset


@dataclass
class Monitor:
    """Background sampler: capture servers' busy flag, the crawl's last job, job module states."""

    captures: list[str]
    ledger: str
    windmill: str
    wm_token: str
    api_token: str
    crawl_id: str | None = None
    busy: dict[str, list[tuple[float, bool]]] = field(default_factory=dict)
    jobs: dict[str, dict] = field(default_factory=dict)  # job id → {depth, first_seen, modules: {id: [(t, type)]}}
    _stop: threading.Event = field(default_factory=threading.Event)

    def start(self) -> "Monitor":
        self.busy = {c: [] for c in self.captures}
        self._threads = [threading.Thread(target=self._captures_loop, daemon=True),
                         threading.Thread(target=self._jobs_loop, daemon=True)]
        for t in self._threads:
            t.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(5)

    def _captures_loop(self) -> None:
        with httpx.Client(timeout=2) as http:
            while not self._stop.is_set():
                t = time.monotonic()
                for c in self.captures:
                    try:
                        b = bool(http.get(f"{c}/status").json().get("busy"))
                    except (httpx.HTTPError, ValueError):
                        continue
                    self.busy[c].append((time.monotonic(), b))
                self._stop.wait(max(0.0, 0.1 - (time.monotonic() - t)))

    def _jobs_loop(self) -> None:
        api = httpx.Client(base_url=self.ledger, headers={"Authorization": f"Bearer {self.api_token}"}, timeout=5)
        wm = httpx.Client(base_url=self.windmill, headers={"Authorization": f"Bearer {self.wm_token}"}, timeout=5)
        with api, wm:
            while not self._stop.is_set():
                if self.crawl_id:
                    try:
                        last = api.get(f"/api/crawls/{self.crawl_id}").json().get("lastJob")
                    except (httpx.HTTPError, ValueError):
                        last = None
                    if last and last.get("id") and last["id"] not in self.jobs:
                        self.jobs[last["id"]] = {"depth": last.get("depth"), "first_seen": time.monotonic(),
                                                 "modules": {}, "record": None}
                    for job_id, info in list(self.jobs.items()):
                        if info["record"] and info["record"].get("type") == "CompletedJob":
                            continue
                        try:
                            rec = wm.get(f"/api/w/{WORKSPACE}/jobs_u/get/{job_id}").json()
                        except (httpx.HTTPError, ValueError):
                            continue
                        info["record"] = rec
                        now = time.monotonic()
                        for m in (rec.get("flow_status") or {}).get("modules", []):
                            seen = info["modules"].setdefault(m["id"], [])
                            if not seen or seen[-1][1] != m["type"]:
                                seen.append((now, m["type"]))
                self._stop.wait(0.2)


def _stack(ctx: Context, state: Path):
    from devstack.stack import StackConfig, up
    from tests.fixtures.stack import stack_ports

    t0 = time.monotonic()
    info = up(StackConfig(state_dir=state, captures=2, ports=stack_ports(2)))
    ctx.detail("stack_up_s", round(time.monotonic() - t0, 1))
    return info


def baseline_flow_root(where: Path) -> Path:
    """A copy of the checkout's ``f/`` under ``where`` whose ``plan_level.main`` drops
    ``lastFinishedAt`` (the cross-level rule off); returns ``where``. Raises RuntimeError when
    plan_level no longer has the line the patch anchors on (update PLAN_CALL)."""
    import shutil

    from devstack.layout import REPO

    shutil.copytree(REPO / "f", where / "f", dirs_exist_ok=True)
    script = where / "f" / "waggle" / "plan_level.py"
    text = script.read_text()
    if text.count(PLAN_CALL) != 1:
        raise RuntimeError(f"cannot patch the baseline: {PLAN_CALL.strip()!r} is not once in plan_level.py")
    script.write_text(text.replace(PLAN_CALL, BASELINE_LINE + PLAN_CALL))
    return where


def _use_flow(state: Path, flow_root: Path | None) -> None:
    """Restart the stack's Windmill runner on ``flow_root`` (None: the checkout); same port, state, token."""
    from devstack.services import windmill_service
    from devstack.stack import config_from_state
    from devstack.supervisor import Supervisor

    config = config_from_state(state)
    config.flow_root = flow_root
    Supervisor(state).start(windmill_service(config))


def _token(info: dict) -> str:
    r = httpx.post(f"{info['services']['issuer']}/token", json={
        "subject": info["subject"], "organizations": [info["organization"]], "expiresIn": "1h"}, timeout=10)
    r.raise_for_status()
    return r.json()["access_token"]


def _depth(path: str) -> int:
    return len(path.strip("/"))


def run_crawl(info: dict, wm_token: str, delay_ms: int, timeout_s: float = 420) -> dict:
    """One crawl of a fresh 4-host site; returns raw observations."""
    hosts = [Host(LEVELS, robots_txt=ROBOTS_SLOW if i == SLOW_HOST else "User-agent: *\nAllow: /\n",
                  flaky=("/b",) if i == FLAKY_HOST else (), flaky_drops=2) for i in range(HOSTS)]
    offset = time.time() - time.monotonic()
    token = _token(info)
    svc = info["services"]
    caps = [svc[n] for n in sorted(svc) if n.startswith("capture")]
    mon = Monitor(caps, svc["ledger"], svc["windmill"], wm_token, token).start()
    try:
        with httpx.Client(base_url=svc["ledger"], headers={"Authorization": f"Bearer {token}"}, timeout=30) as api:
            t_start = time.monotonic()
            r = api.post("/api/crawls", json={
                "seeds": [f"{h.url}/" for h in hosts], "maxDepth": LEVELS - 1, "maxPages": 200,
                "perHostDelayMs": delay_ms, "hostParallelism": 4, "scope": "same-origin"})
            if r.status_code != 202:
                raise RuntimeError(f"POST /api/crawls answered {r.status_code}: {r.text[:300]}")
            crawl_id = r.json()["crawlId"]
            mon.crawl_id = crawl_id
            deadline = time.monotonic() + timeout_s
            while True:
                view = api.get(f"/api/crawls/{crawl_id}").json()
                if view.get("state") != "running":
                    break
                if time.monotonic() > deadline:
                    raise RuntimeError(f"crawl {crawl_id} still running after {timeout_s} s: {json.dumps(view)[:500]}")
                time.sleep(0.5)
            t_end = time.monotonic()
        time.sleep(1.0)  # let the last job's record settle
    finally:
        mon.stop()
        for h in hosts:
            h.stop()
    with psycopg.connect(info["database_url"]) as conn:
        rows = conn.execute(
            "SELECT url, host, depth, state, submitted_at, finished_at, coalesce(gap_from, finished_at)"
            " FROM crawl_pages WHERE crawl_id = %s ORDER BY submitted_at NULLS LAST", (crawl_id,)).fetchall()
    pages = [{"url": u, "host": h, "depth": d, "state": s,
              "submitted": s_at.timestamp() - offset if s_at else None,
              "finished": f_at.timestamp() - offset if f_at else None,
              "gap_from": g_at.timestamp() - offset if g_at else None} for u, h, d, s, s_at, f_at, g_at in rows]
    return {"crawl_id": crawl_id, "view": view, "hosts": hosts, "pages": pages, "monitor": mon,
            "t_start": t_start, "t_end": t_end, "offset": offset, "captures": caps}


def _merge_browser_retries(caps: list, last_submitted: dict[str, float] | None = None) -> list:
    """Join a capture whose every request was dropped with the next one of the same page when
    that one is Chromium's own re-send of the navigation (one flow attempt), not the flow's retry.

    ``last_submitted`` maps page path → the flow's ``submittedAt`` of the page's last attempt
    (site clock, s). Requests seen before it cannot belong to that attempt, so a re-send that
    starts before it is merged however late Chromium sent it (under load it took > 250 ms and
    showed up as a 497 ms "retry gap" against a 500 ms delay); a dropped request and its re-send
    both after it are that attempt's own (Chromium re-sent 7 ms after the drop: a "7 ms retry
    gap" at d = 2000). Without a submission time, a re-send within 250 ms is merged.
    """
    from tests.e2e.site import Capture

    out: list = []
    for cap in caps:
        prev = out[-1] if out else None
        if prev and prev.page == cap.page and all(h.status == 0 for h in prev.hits):
            submitted = (last_submitted or {}).get(cap.page)
            # before the last attempt's submission, or both within it (its own re-send)
            resend = (cap.first < submitted or prev.first >= submitted) if submitted is not None \
                else cap.first - prev.last < 0.25
            if resend:
                out[-1] = Capture(page=cap.page, hits=prev.hits + cap.hits)
                continue
        out.append(cap)
    return out


def scheduler_gaps(run: dict, delay_ms: int, boundary: bool = False, held: list | None = None) -> list[float]:
    """The flow's own view, per host: next ``submittedAt`` − previous ``gapFrom`` (where the flow
    started the gap: the page's last request, issue 11; ``finishedAt`` without it) − delay (s),
    from ``crawl_pages`` (ms resolution; last attempt of a retried page); within a level, or
    across a level boundary when ``boundary``. ``held``: given, collects instead the pairs whose
    next capture was submitted before the previous ``gapFrom`` — held by the capture server
    behind the loading capture (extension ``holdAfter``), where the flow-side gap says nothing."""
    delays = {f"127.0.0.1:{h.port}": max(delay_ms / 1000, CRAWL_DELAY_S if i == SLOW_HOST else 0)
              for i, h in enumerate(run["hosts"])}
    out = []
    by_host: dict[str, list[dict]] = {}
    for p in run["pages"]:
        if p["submitted"] is not None and p["finished"] is not None:
            by_host.setdefault(p["host"], []).append(p)
    for host, pages in by_host.items():
        pages.sort(key=lambda p: p["submitted"])
        for prev, nxt in zip(pages, pages[1:]):
            if (prev["depth"] != nxt["depth"]) == boundary:
                start = prev.get("gap_from") or prev["finished"]
                if held is not None and nxt["submitted"] < start:
                    held.append(nxt["submitted"] - start)
                    continue
                out.append(nxt["submitted"] - start - delays.get(host, delay_ms / 1000))
    return out


def gap_analysis(run: dict, delay_ms: int) -> dict:
    """Server-felt gaps per host, classified, with overshoot over the effective delay (s)."""
    out: dict = {"within": [], "boundary": [], "retry": [], "below": [], "per_host": {}, "head": [], "tail": [],
                 "seal_lag": [], "start_lag": [], "robots_requests": {}, "robots_after": []}
    by_url = {p["url"]: p for p in run["pages"] if p["submitted"] is not None and p["finished"] is not None}
    for i, host in enumerate(run["hosts"]):
        eff = max(delay_ms / 1000, CRAWL_DELAY_S if i == SLOW_HOST else 0)
        last_submitted = {p["url"][len(host.url):]: p["submitted"] for p in run["pages"]
                          if p["submitted"] is not None and p["url"].startswith(host.url + "/")}
        caps = _merge_browser_retries(captures(host.hits), last_submitted)
        # inside one capture: submit → first request (head; with pipelining it includes the
        # startAfterMs wait), last request → finish (tail; pipelined, off the host's critical path)
        for cap in caps:
            page = by_url.get(f"{host.url}{cap.page}")
            if page and not any(h.status == 0 for h in cap.hits):
                out["head"].append(cap.first - page["submitted"])
                out["tail"].append(page["finished"] - cap.last)
        gaps = []
        for prev, nxt in zip(caps, caps[1:]):
            gap = nxt.first - prev.last
            kind = ("retry" if prev.page == nxt.page else
                    "boundary" if _depth(nxt.page) != _depth(prev.page) else "within")
            over = gap - eff
            out[kind].append(over)
            page = by_url.get(f"{host.url}{prev.page}")
            if kind == "within" and page and page["gap_from"] is not None:
                # overshoot ≈ seal lag (flow's gapFrom − the site's last request) + start lag (the
                # next first request − the earliest moment the flow's gapFrom allowed it)
                out["seal_lag"].append(page["gap_from"] - prev.last)
                out["start_lag"].append(nxt.first - (page["gap_from"] + eff))
            gaps.append({"from": prev.page, "to": nxt.page, "gap_ms": round(gap * 1000, 1), "kind": kind,
                         "delay_ms": eff * 1000})
            if over < 0:
                out["below"].append({"host": i, "from": prev.page, "to": nxt.page, "gap_ms": round(gap * 1000, 1),
                                     "delay_ms": eff * 1000, "kind": kind})
        out["per_host"][f"host{i}"] = {"effective_delay_ms": eff * 1000, "captures": len(caps), "gaps": gaps}
        # robots.txt is a request like any other (docs/internals.md "robots.txt cache"): how many,
        # and the felt gap from each one to the host's next capture, against the effective delay
        robots = [h.t for h in host.hits if h.path.split("?", 1)[0] == "/robots.txt"]
        out["robots_requests"][f"host{i}"] = len(robots)
        for t in robots:
            nxt = min((c.first for c in caps if c.first >= t), default=None)
            if nxt is not None:
                out["robots_after"].append(nxt - t - eff)
    return out


def capture_timelines(state: Path) -> tuple[list[dict], list[float]]:
    """The capture servers' own timelines (``timeline {json}`` log lines, :meth:`Run.timeline`:
    monotonic seconds, the clock of this process too; each tagged ``server`` = its log's name)
    and the moments they answered 429 Busy. Context builds (``context built <began> <ended>``,
    spare or not) are returned as timelines ``{"server", "build": [began, ended]}``."""
    timelines: list[dict] = []
    busy: list[float] = []
    for log_file in sorted((state / "logs").glob("capture*.log")):
        for line in log_file.read_text(errors="replace").splitlines():
            if " timeline {" in line:
                try:
                    timelines.append({**json.loads(line.split(" timeline ", 1)[1]), "server": log_file.stem})
                except ValueError:
                    continue
            elif " context built " in line:
                try:
                    began, ended = (float(x) for x in line.rsplit(" ", 2)[1:])
                except ValueError:
                    continue
                timelines.append({"server": log_file.stem, "build": [began, ended]})
            elif " busy at " in line:
                try:
                    busy.append(float(line.rsplit(" ", 1)[1]))
                except ValueError:
                    continue
    return timelines, busy


def server_cpu_s(state: Path) -> dict[str, float]:
    """CPU seconds (user + system, children reaped included) of each capture server's process
    tree so far: the server, its Playwright driver, Chromium and its renderers (a closed
    renderer's time is in its reaper's ``children_*``)."""
    import psutil

    out: dict[str, float] = {}
    for pid_file in sorted((state / "run").glob("capture*.json")):
        try:
            root = psutil.Process(int(json.loads(pid_file.read_text())["pid"]))
            total = 0.0
            for proc in [root, *root.children(recursive=True)]:
                with contextlib.suppress(psutil.Error):
                    t = proc.cpu_times()
                    total += t.user + t.system + t.children_user + t.children_system
            out[pid_file.stem] = total
        except (OSError, ValueError, KeyError, psutil.Error):
            continue
    return out


# Where a capture's phases end, relative to the site's last request of the page (ms).
# The next capture's phases from acceptance to the navigation (ms each).
HEAD_PHASES = ("wait-idle", "check-address", "browser", "open-session", "hold-after", "start-after")
SEAL_PHASES = ("load", "settle", "behaviors", "dismiss-behaviors", "seal", "title-links", "page-formats")


def seal_breakdown(run: dict, delay_ms: int, timelines: list[dict], busy: list[float]) -> dict:
    """Where the ms of the within-level overshoot go, from the capture servers' timelines laid
    beside the site's log (monotonic clock). Per capture: when each phase ended after the site's
    last request of the page (``after_last_ms``: settle quiet window, behaviors, the settle after
    them, title/links, page formats, seal) and the server's own last-request end. Per
    within-level pair A → B of a host: A sealed → B submitted (the flow: seal poll, lead wait,
    POST), B submitted → accepted (transit, 429 rounds: ``busy_between``), accepted → navigation
    released (open, ``startAfterMs``), released − (gapFrom + delay) (late start), released → first
    request at the site (Chromium's navigation). Summaries in ms."""
    by_url: dict[str, list[dict]] = {}
    builds: dict[str, list[tuple[float, float]]] = {}
    for t in timelines:
        if "build" in t:
            builds.setdefault(t["server"], []).append(tuple(t["build"]))
        else:
            by_url.setdefault(t["url"], []).append(t)
    # Context builds (a new renderer each: 0.4–1 s of CPU on this machine) overlapping a page's
    # critical window, its last request → its seal: on its own server, on any server.
    overlap: dict[str, list[float]] = {"same_server": [], "any_server": [], "build_wall": []}
    for spans in builds.values():
        overlap["build_wall"] += [b - a for a, b in spans]

    def overlapping(spans: list[tuple[float, float]], lo: float, hi: float) -> float:
        return sum(max(0.0, min(b, hi) - max(a, lo)) for a, b in spans)
    pages = {p["url"]: p for p in run["pages"] if p["submitted"] is not None}
    after: dict[str, list[float]] = {k: [] for k in (*SEAL_PHASES, "sealedAt", "lastRequestEndAt")}
    pair: dict[str, list[float]] = {k: [] for k in ("seal_to_submit", "submit_to_accept", "accept_to_release",
                                                     "release_late", "release_to_first")}
    head: dict[str, list[float]] = {k: [] for k in HEAD_PHASES}
    busy_rounds: list[int] = []  # 429s any server answered between A's seal and B's submission
    rows: list[dict] = []  # per within-level pair, to find what makes the tail (ms)

    def timeline_of(url: str, first: float) -> dict | None:
        cands = [t for t in by_url.get(url, []) if t["acceptedAt"] <= first]
        return max(cands, key=lambda t: t["acceptedAt"]) if cands else None

    for i, host in enumerate(run["hosts"]):
        if i == SLOW_HOST:
            continue
        caps = [c for c in captures(host.hits) if not any(h.status == 0 for h in c.hits)]
        for prev, nxt in zip(caps, caps[1:]):
            a = timeline_of(f"{host.url}{prev.page}", prev.first)
            b = timeline_of(f"{host.url}{nxt.page}", nxt.first)
            if a is None:
                continue
            marks = dict((k, v) for k, v in a["marks"])
            for k in SEAL_PHASES:
                if k in marks:
                    after[k].append(marks[k] - prev.last)
            for k in ("sealedAt", "lastRequestEndAt"):
                if a.get(k) is not None:
                    after[k].append(a[k] - prev.last)
            if a.get("sealedAt") is not None and a["sealedAt"] > prev.last:
                overlap["same_server"].append(overlapping(builds.get(a["server"], []), prev.last, a["sealedAt"]))
                overlap["any_server"].append(sum(overlapping(v, prev.last, a["sealedAt"]) for v in builds.values()))
            page_a, page_b = pages.get(f"{host.url}{prev.page}"), pages.get(f"{host.url}{nxt.page}")
            if b is None or page_a is None or page_b is None or _depth(prev.page) != _depth(nxt.page):
                continue
            release = dict((k, v) for k, v in b["marks"]).get("start-after")
            if a.get("sealedAt") is not None:
                pair["seal_to_submit"].append(page_b["submitted"] - a["sealedAt"])
            pair["submit_to_accept"].append(b["acceptedAt"] - page_b["submitted"])
            if a.get("sealedAt") is not None:
                busy_rounds.append(sum(1 for t in busy if a["sealedAt"] <= t <= page_b["submitted"]))
            prev_t = b["acceptedAt"]
            for phase, t in b["marks"]:  # the next capture's head, phase by phase
                if phase in HEAD_PHASES:
                    head[phase].append(t - prev_t)
                prev_t = t
                if phase == "start-after":
                    break
            row = {"host": i, "from": prev.page, "to": nxt.page, "server": b.get("server"),
                   "gap_over_ms": _ms(nxt.first - prev.last - delay_ms / 1000),
                   "seal_after_last_ms": _ms(a["sealedAt"] - prev.last) if a.get("sealedAt") else None,
                   "submit_after_seal_ms": _ms(page_b["submitted"] - a["sealedAt"]) if a.get("sealedAt") else None,
                   "accepted_after_submit_ms": _ms(b["acceptedAt"] - page_b["submitted"]),
                   "head_ms": {ph: round(_ms(t - p0), 1) for (ph, t), p0 in zip(
                       b["marks"], [b["acceptedAt"]] + [t for _, t in b["marks"]]) if ph in HEAD_PHASES}}
            rows.append(row)
            if release is not None:
                row["release_late_ms"] = _ms(release - (page_a["gap_from"] + delay_ms / 1000)) if page_a.get(
                    "gap_from") is not None else None
                row["first_after_release_ms"] = _ms(nxt.first - release)
                pair["accept_to_release"].append(release - b["acceptedAt"])
                if page_a.get("gap_from") is not None:
                    pair["release_late"].append(release - (page_a["gap_from"] + delay_ms / 1000))
                pair["release_to_first"].append(nxt.first - release)
    return {"after_last_ms": {k: summary([_ms(x) for x in v]) for k, v in after.items()},
            "pair_ms": {k: summary([_ms(x) for x in v]) for k, v in pair.items()},
            "next_head_ms": {k: summary([_ms(x) for x in v]) for k, v in head.items()},
            "busy_429_between": summary([float(x) for x in busy_rounds]), "pairs": rows,
            "context_builds_ms": {k: summary([_ms(x) for x in v]) for k, v in overlap.items()}}


def level_analysis(run: dict, delay_ms: int) -> list[dict]:
    """Per level: makespan, ideal lower bound, utilization per server, orchestration overhead (s)."""
    pages = [p for p in run["pages"] if p["submitted"] is not None and p["finished"] is not None]
    mon: Monitor = run["monitor"]
    jobs = sorted(((info["depth"], jid, info) for jid, info in mon.jobs.items()), key=lambda x: x[0])
    created = {}
    for depth, jid, info in jobs:
        rec = info["record"] or {}
        created[depth] = _wall_to_mono(rec.get("created_at"), run["offset"]) or info["first_seen"]
    finished_crawl = _wall_to_mono(run["view"].get("finishedAt"), run["offset"]) or run["t_end"]
    host_delay = {}
    for i, h in enumerate(run["hosts"]):
        host_delay[f"127.0.0.1:{h.port}"] = max(delay_ms / 1000, CRAWL_DELAY_S if i == SLOW_HOST else 0)
    robots_at = {f"127.0.0.1:{h.port}": [x.t for x in h.hits if x.path.split("?", 1)[0] == "/robots.txt"]
                 for h in run["hosts"]}
    levels = []
    depths = sorted({p["depth"] for p in pages})
    servers = len(run["captures"])
    for depth in depths:
        lv = [p for p in pages if p["depth"] == depth]
        first = min(p["submitted"] for p in lv)
        last = max(p["finished"] for p in lv)
        makespan = last - first
        per_host: dict[str, list[float]] = {}
        active: dict[str, list[dict]] = {}
        for p in lv:
            per_host.setdefault(p["host"], []).append(p["finished"] - p["submitted"])
            active.setdefault(p["host"], []).append(p)
        earlier = [p for p in pages if p["depth"] < depth]

        def own_wait(h: str) -> float:
            """How long after the level's first submission host h may first submit at all: its
            gap since its last capture of an earlier level (the cross-level rule, from gapFrom), or
            since its robots.txt request of this level (a request like any other) — no schedule
            can start it sooner, so it belongs in the lower bound."""
            done = [p["gap_from"] or p["finished"] for p in earlier if p["host"] == h]
            gap = host_delay.get(h, delay_ms / 1000)
            own_first = min(p["submitted"] for p in lv if p["host"] == h)
            robots = [t for t in robots_at.get(h, []) if max(done, default=float("-inf")) < t < own_first]
            return max(0.0, max(done + robots) + gap - first) if done or robots else 0.0

        def host_chain(h: str) -> float:
            """Σ (gapFrom − submitted) + (n−1)·delay + the last capture's tail: a host's chain
            when its captures overlap (the next submitted at the previous seal, issue 11)."""
            ps = sorted(active[h], key=lambda p: p["submitted"])
            return (sum((p["gap_from"] or p["finished"]) - p["submitted"] for p in ps)
                    + (len(ps) - 1) * host_delay.get(h, delay_ms / 1000)
                    + ps[-1]["finished"] - (ps[-1]["gap_from"] or ps[-1]["finished"]))

        sequential = {h: sum(d) + (len(d) - 1) * host_delay.get(h, delay_ms / 1000) for h, d in per_host.items()}
        chain = {h: host_chain(h) for h in per_host}
        host_bound_no_wait = max(chain.values())
        host_bound = max(own_wait(h) + c for h, c in chain.items())
        server_bound = sum(sum(d) for d in per_host.values()) / servers
        ideal = max(host_bound, server_bound)
        ideal_no_wait = max(host_bound_no_wait, server_bound)
        util = {}
        for c, samples in mon.busy.items():
            inside = [b for t, b in samples if first <= t <= last]
            util[c] = (sum(inside) / len(inside)) if inside else None
        row = {"depth": depth, "pages": len(lv), "hosts": len(per_host), "makespan_s": makespan,
               "ideal_s": ideal, "host_bound_s": host_bound, "server_bound_s": server_bound,
               "ideal_over_makespan": ideal / makespan if makespan > 0 else None, "utilization": util,
               "host_bound_no_wait_s": host_bound_no_wait, "ideal_no_wait_s": ideal_no_wait,
               "host_bound_sequential_s": max(sequential.values()),
               "ideal_over_makespan_no_wait": ideal_no_wait / makespan if makespan > 0 else None}
        # orchestration overhead
        start = created.get(depth)
        end = created.get(depth + 1, finished_crawl)
        if start is not None:
            # The deliberate wait: the earliest moment any host's gap allowed its first capture of
            # the level — from its last capture of an earlier level (gapFrom, the flow's rule) or
            # from the level's own robots.txt request (a request like any other: the first capture
            # waits the delay after it), whichever is later; the rest before the first capture is
            # orchestration.
            prev = [p for p in pages if p["depth"] < depth]
            allowed = []
            for h in per_host:
                done = [p["gap_from"] or p["finished"] for p in prev if p["host"] == h]
                own_first = min(p["submitted"] for p in lv if p["host"] == h)
                robots = [t for t in robots_at.get(h, []) if start <= t < own_first]
                since = max(done + robots, default=None)
                allowed.append(since + host_delay.get(h, delay_ms / 1000) if since is not None else start)
            earliest = max(start, min(allowed)) if allowed else start
            # a capture submitted with startAfterMs before the gap ends: the makespan already
            # counts from that submission, so the wait ends there (no time counted twice)
            wait = max(0.0, min(earliest, first) - start)
            row.update(level_wall_s=end - start, deliberate_wait_s=wait,
                       overhead_s=(end - start) - makespan - wait,
                       before_first_capture_s=first - start - wait, after_last_capture_s=end - last)
        for depth_j, jid, info in jobs:
            if depth_j == depth:
                mods = {}
                for mid, seq in info["modules"].items():
                    t_in = next((t for t, s in seq if s == "InProgress"), None)
                    t_out = next((t for t, s in seq if s in ("Success", "Failure")), None)
                    if t_in is not None and t_out is not None:
                        mods[mid] = round(t_out - t_in, 2)
                row["modules_s"] = mods
                row["job_duration_ms"] = (info["record"] or {}).get("duration_ms")
        levels.append(row)
    # whole-crawl utilization
    return levels


def _ms(v: float | None) -> float | None:
    return None if v is None else v * 1000


def politeness_500(ctx: Context) -> None:
    """d = 500 ms: per-host gaps (Crawl-delay host, retries, boundaries) + baseline; utilization; overhead."""
    politeness(ctx, [500])


def politeness_2000(ctx: Context) -> None:
    """d = 2000 ms: per-host gaps (Crawl-delay host, retries, boundaries) + baseline; utilization; overhead."""
    politeness(ctx, [2000])


def politeness(ctx: Context, delays: list[int]) -> None:
    """Per-host gaps vs delay (Crawl-delay host, retries, boundaries) with a no-cross-level-gap
    baseline; capture-server utilization; makespan vs ideal; orchestration overhead."""
    from devstack.stack import down

    with tempfile.TemporaryDirectory(prefix="waggle-bench-stack-") as tmp:
        state = Path(tmp)
        try:
            info = _stack(ctx, state)
            wm_token = json.loads((state / "secrets.json").read_text())["windmill_token"]
            baseline_root = baseline_flow_root(state / "baseline-flow")
            runs = {}
            for d in delays:
                # --quick: the as-shipped crawl only (the baseline is a comparison, not a target)
                no_baseline = ctx.quick or os.environ.get("WAGGLE_BENCH_NO_BASELINE")
                ctx.size = f"{LEVELS} levels, d = {d} ms" + ("; as shipped only, no baseline crawl" if no_baseline else
                                                               "; as shipped and the baseline")
                for baseline in (False, True) if not no_baseline else (False,):
                    label = f"d={d}" + (" baseline" if baseline else "")
                    _use_flow(state, baseline_root if baseline else None)
                    t0 = time.monotonic()
                    cpu0 = server_cpu_s(state)
                    run = run_crawl(info, wm_token, d)
                    cpu = {k: round(v - cpu0.get(k, 0.0), 2) for k, v in server_cpu_s(state).items()}
                    gaps = gap_analysis(run, d)
                    gaps["held"] = []
                    gaps["scheduler"] = scheduler_gaps(run, d, held=gaps["held"])
                    gaps["scheduler_boundary"] = scheduler_gaps(run, d, boundary=True)
                    gaps["retries_logged"] = _flow_retries(info, wm_token, run)
                    levels = level_analysis(run, d)
                    timelines, busy = capture_timelines(state)
                    breakdown = seal_breakdown(run, d, timelines, busy)
                    whole = {c: (sum(b for _, b in s if run["t_start"] <= _ <= run["t_end"]) /
                                 max(1, sum(1 for _, b in s if run["t_start"] <= _ <= run["t_end"])))
                             for c, s in run["monitor"].busy.items()}
                    runs[label] = {"crawl_id": run["crawl_id"], "state": run["view"].get("state"),
                                   "stopReason": run["view"].get("stopReason"),
                                   "pagesCaptured": run["view"].get("pagesCaptured"),
                                   "wall_s": round(time.monotonic() - t0, 1),
                                   "capture_server_cpu_s": cpu,
                                   "gaps_overshoot_ms": {k: summary([_ms(x) for x in gaps[k]])
                                                         for k in ("within", "boundary", "retry", "scheduler",
                                                                   "scheduler_boundary")},
                                   "pages": [{k: v for k, v in p.items()} for p in run["pages"]],
                                   "capture_head_ms": summary([_ms(x) for x in gaps["head"]]),
                                   "capture_tail_ms": summary([_ms(x) for x in gaps["tail"]]),
                                   "seal_lag_ms": summary([_ms(x) for x in gaps["seal_lag"]]),
                                   "start_lag_ms": summary([_ms(x) for x in gaps["start_lag"]]),
                                   "flow_retry_log_lines": gaps["retries_logged"],
                                   "below_delay": gaps["below"], "per_host": gaps["per_host"],
                                   "robots_requests": gaps["robots_requests"],
                                   "robots_to_capture_overshoot_ms": summary([_ms(x) for x in gaps["robots_after"]]),
                                   "levels": levels, "utilization_whole_crawl": whole,
                                   "seal_breakdown": breakdown}
                    _metrics(ctx, label, gaps, levels, whole, baseline)
                    captured = max(1, run["view"].get("pagesCaptured") or 0)
                    ctx.metric(f"[{label}] capture servers' CPU per captured page (Python + Chromium)",
                               round(sum(cpu.values()) / captured * 1000), "ms",
                               note=f"{sum(cpu.values()):.1f} s over {captured} pages; {cpu}")
                    if not baseline:
                        _breakdown_metrics(ctx, label, breakdown)
            ctx.detail("runs", runs)
        finally:
            down(state)


def _breakdown_metrics(ctx: Context, label: str, breakdown: dict) -> None:
    """The medians of :func:`seal_breakdown` as informational metrics (no target)."""
    for key, value in breakdown["after_last_ms"].items():
        ctx.metric(f"[{label}] {key} − the page's last request, median", value.get("median"), "ms",
                   note=f"p99 {value.get('p99')}, n={value.get('n')}")
    for key, value in breakdown["pair_ms"].items():
        ctx.metric(f"[{label}] next capture: {key}, median", value.get("median"), "ms",
                   note=f"p99 {value.get('p99')}, n={value.get('n')}")
    for key, value in breakdown["next_head_ms"].items():
        ctx.metric(f"[{label}] next capture's {key} phase, median", value.get("median"), "ms",
                   note=f"p99 {value.get('p99')}, n={value.get('n')}")
    for key, value in breakdown["context_builds_ms"].items():
        ctx.metric(f"[{label}] context builds: {key.replace('_', ' ')}, median", value.get("median"), "ms",
                   note=f"p99 {value.get('p99')}, n={value.get('n')} (same/any server: overlap with a page's "
                        "last request → seal)")
    rounds = breakdown["busy_429_between"]
    ctx.metric(f"[{label}] 429 Busy answers between a seal and the host's next submission, median",
               rounds.get("median"), "answers", note=f"max {rounds.get('max')}, n={rounds.get('n')}")


def _flow_retries(info: dict, wm_token: str, run: dict) -> list[str]:
    """The crawl_host log lines of this crawl's jobs that announce a retry."""
    lines = []
    with httpx.Client(base_url=info["services"]["windmill"], headers={"Authorization": f"Bearer {wm_token}"},
                      timeout=10) as wm:
        for job_id in run["monitor"].jobs:
            try:
                text = wm.get(f"/api/w/{WORKSPACE}/jobs_u/get_logs/{job_id}").text
            except httpx.HTTPError:
                continue
            lines += [ln for ln in text.splitlines() if "retrying" in ln]
    return lines


def _metrics(ctx: Context, label: str, gaps: dict, levels: list[dict], whole: dict, baseline: bool) -> None:
    allg = gaps["within"] + gaps["boundary"] + gaps["retry"]
    n_below = len(gaps["below"])
    ctx.metric(f"[{label}] gaps below effective delay", n_below, "gaps", 0 if not baseline else None,
               "<=" if not baseline else None, f"of {len(allg)} gaps", key=None if baseline else "gaps_below_delay")
    w = [x * 1000 for x in gaps["within"]]
    b = [x * 1000 for x in gaps["boundary"]]
    r = [x * 1000 for x in gaps["retry"]]
    sched = [x * 1000 for x in gaps["scheduler"]]
    if not baseline:
        # Pipelined (issue 11): a capture is submitted up to the lead before the gap ends, the
        # capture server holding its navigation (startAfterMs); the navigation is what the site feels.
        ctx.metric(f"[{label}] flow-side gap − delay (submit − gapFrom), min", min(sched) if sched else None,
                   "ms", -START_LEAD_MS, ">=", f"median {percentile(sched, 50):.0f} ms, p99 "
                   f"{percentile(sched, 99):.0f} ms, n={len(sched)}; ≥ −lead: startAfterMs" if sched else "")
        ctx.metric(f"[{label}] submissions held behind the loading capture (holdAfter)", len(gaps.get("held", [])),
                   "captures", note="submitted before the previous gapFrom; not in the flow-side gap above")
        head, tail = [x * 1000 for x in gaps["head"]], [x * 1000 for x in gaps["tail"]]
        ctx.metric(f"[{label}] capture head (submit → first request), median", percentile(head, 50), "ms",
                   note=f"p99 {percentile(head, 99):.0f} ms; includes the startAfterMs wait" if head else "")
        ctx.metric(f"[{label}] capture tail (last request → finish), median", percentile(tail, 50), "ms",
                   note=f"p99 {percentile(tail, 99):.0f} ms; settle quiet window + WACZ + upload" if tail else "")
        for key, what in (("seal_lag", "seal lag (gapFrom − site's last request)"),
                          ("start_lag", "start lag (next first request − gapFrom − delay)")):
            xs = [x * 1000 for x in gaps[key]]
            ctx.metric(f"[{label}] within-level {what}, median", percentile(xs, 50) if xs else None, "ms",
                       note=f"p99 {percentile(xs, 99):.0f} ms, n={len(xs)}" if xs else "")
        ctx.metric(f"[{label}] within-level min overshoot", min(w) if w else None, "ms", 0, ">=")
        ctx.metric(f"[{label}] within-level median overshoot", percentile(w, 50), "ms", 50, "<=", f"n={len(w)}",
                   key="overshoot_median_ms")
        ctx.metric(f"[{label}] within-level p99 overshoot", percentile(w, 99), "ms", 250, "<=", f"n={len(w)}",
                   key="overshoot_p99_ms")
        ctx.metric(f"[{label}] after-retry min / median overshoot",
                   min(r) if r else None, "ms", 0 if r else None, ">=" if r else None,
                   f"median {percentile(r, 50):.0f} ms, n={len(r)}; flow logged {len(gaps['retries_logged'])}"
                   if r else f"no retry observed; flow logged {len(gaps['retries_logged'])}")
    robots = gaps["robots_requests"]
    ctx.metric(f"[{label}] robots.txt requests per host, max", max(robots.values(), default=None), "requests",
               None if baseline else 1, None if baseline else "<=", f"{robots} over {LEVELS} levels")
    ra = [x * 1000 for x in gaps["robots_after"]]
    ctx.metric(f"[{label}] robots.txt → next capture, min overshoot", min(ra) if ra else None, "ms",
               None if baseline else 0, None if baseline else ">=", f"n={len(ra)}")
    sb = [x * 1000 for x in gaps["scheduler_boundary"]]
    ctx.metric(f"[{label}] flow-side boundary gap − delay, min", min(sb) if sb else None, "ms",
               None if baseline else -START_LEAD_MS, None if baseline else ">=",
               f"median {percentile(sb, 50):.0f} ms, n={len(sb)}" if sb else "")
    ctx.metric(f"[{label}] level-boundary min overshoot", min(b) if b else None, "ms",
               None if baseline else 0, None if baseline else ">=",
               f"median {percentile(b, 50):.0f} ms, n={len(b)}" if b else "no boundary gap")
    if baseline:
        return
    for lv in levels:
        util = [u for u in lv["utilization"].values() if u is not None]
        ratio = lv.get("ideal_over_makespan")
        ctx.metric(f"[{label}] level {lv['depth']} ideal/makespan", ratio, "×", 0.85, ">=",
                   f"makespan {lv['makespan_s']:.1f} s, ideal {lv['ideal_s']:.1f} s "
                   f"(without the cross-level wait {lv['ideal_no_wait_s']:.1f} s = "
                   f"{lv['ideal_over_makespan_no_wait']:.2f}), util {', '.join(f'{u:.2f}' for u in util)}")
        if lv.get("overhead_s") is not None:
            ctx.metric(f"[{label}] level {lv['depth']} orchestration overhead", lv["overhead_s"], "s", 1.0, "<=",
                       f"before 1st capture {lv['before_first_capture_s']:.2f} s, after last "
                       f"{lv['after_last_capture_s']:.2f} s; modules {lv.get('modules_s')}")
    # The record's figure: the worst level after the seeds' (level 0 is one capture per host).
    later = [(lv["depth"], lv.get("ideal_over_makespan")) for lv in levels
             if lv["depth"] >= 1 and lv.get("ideal_over_makespan") is not None]
    worst = min(later, key=lambda x: x[1], default=(None, None))
    ctx.metric(f"[{label}] ideal/makespan, worst level ≥ 1", worst[1], "×", 0.85, ">=",
               f"level {worst[0]} of {[d for d, _ in later]}", key="ideal_over_makespan")
    ctx.metric(f"[{label}] utilization over the whole crawl", statistics.mean(whole.values()) if whole else None,
               "fraction", note=", ".join(f"{u:.2f}" for u in whole.values()))
