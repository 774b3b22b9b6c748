"""Concurrent crawls sharing hosts (issue 12): ``concurrent-crawls``.

Whole local stack (2 capture servers, the Windmill runner executing ``f/waggle/crawl_level``,
the ledger leasing hosts). The site is :mod:`tests.bench.site`: 6 hosts (loopback ports), a
binary tree of 5 levels each. Four crawls start at once, ``maxDepth`` 1, each on its own
subtree of every host it touches (seed ``/aa``, ``/ab``, ``/ba`` or ``/bb``: the seed and its two
children, disjoint between crawls, so every capture in a site's log is attributed to one crawl
by its path). Hosts 0–2 are shared by three crawls each (host 2 also asks ``Crawl-delay: 3``),
hosts 3–5 by one. Delays differ per crawl (1,000 / 2,000 / 1,000 / 1,500 ms).

Measures:

* **server-felt gaps** per host from the site's own log (last request of one capture → first
  request of the next): the *effective* delay of a gap = max(delay of the crawl of the capture
  before, delay of the crawl of the capture after, Crawl-delay); target: none below it;
* **makespan** (first submission → last finish over all crawls, the flow's own ``submittedAt`` /
  ``finishedAt``) against the ideal lower bound: per host, Σ capture durations + Σ over its
  captures but the last of the effective delay of the capture's crawl (every gap is at least the
  delay of the capture before it), the slowest host, or Σ all capture durations / servers.
"""

from __future__ import annotations

import json
import tempfile
import threading
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import httpx
import psycopg

from tests.bench.harness import Context, percentile
from tests.bench.site import Host
from tests.e2e.site import captures


@dataclass(frozen=True)
class CrawlPlan:
    """One crawl: ``seeds`` = ``[(host index, seed path)]``, ``delay_ms``."""

    seeds: tuple[tuple[int, str], ...]
    delay_ms: int


BENCH_HOSTS = 6
BENCH_CRAWL_DELAY = {2: 3.0}  # host index → robots Crawl-delay (s)
BENCH_CRAWLS = (
    CrawlPlan(((0, "/aa"), (1, "/aa"), (3, "/aa")), 1000),
    CrawlPlan(((0, "/ab"), (2, "/aa"), (4, "/aa")), 2000),
    CrawlPlan(((1, "/ab"), (2, "/ab"), (5, "/aa")), 1000),
    CrawlPlan(((0, "/ba"), (1, "/ba"), (2, "/ba")), 1500),
)


def make_hosts(n: int, crawl_delay: dict[int, float]) -> list[Host]:
    return [Host(5, robots_txt="User-agent: *\nAllow: /\n" + (f"Crawl-delay: {crawl_delay[i]:g}\n"
                                                                 if i in crawl_delay else ""))
            for i in range(n)]


def run_crawls(api_url: str, token: str, database_url: str, hosts: list[Host], plans: tuple[CrawlPlan, ...],
               *, max_depth: int = 1, timeout_s: float = 600) -> dict:
    """Start every crawl of ``plans`` at once (one thread each), wait until all ended; returns
    ``{crawls: [{id, plan, view}], pages: [...], offset, t_start, t_end}`` (times on this process's
    monotonic clock)."""
    offset = time.time() - time.monotonic()
    headers = {"Authorization": f"Bearer {token}"}
    ids: list[str | None] = [None] * len(plans)
    errors: list[str] = []

    def start(i: int, plan: CrawlPlan) -> None:
        body = {"seeds": [f"{hosts[h].url}{p}" for h, p in plan.seeds], "maxDepth": max_depth, "maxPages": 100,
                "perHostDelayMs": plan.delay_ms, "hostParallelism": 4, "scope": "same-origin"}
        r = httpx.post(f"{api_url}/api/crawls", json=body, headers=headers, timeout=30)
        if r.status_code != 202:
            errors.append(f"POST /api/crawls → {r.status_code} {r.text[:300]}")
        else:
            ids[i] = r.json()["crawlId"]

    t_start = time.monotonic()
    threads = [threading.Thread(target=start, args=(i, p)) for i, p in enumerate(plans)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise RuntimeError("; ".join(errors))
    views: dict[str, dict] = {}
    deadline = time.monotonic() + timeout_s
    with httpx.Client(base_url=api_url, headers=headers, timeout=30) as api:
        while True:
            views = {cid: api.get(f"/api/crawls/{cid}").json() for cid in ids}
            if all(v.get("state") != "running" for v in views.values()):
                break
            if time.monotonic() > deadline:
                raise RuntimeError(f"crawls still running after {timeout_s} s: "
                                   + json.dumps({k: v.get("state") for k, v in views.items()}))
            time.sleep(0.5)
    t_end = time.monotonic()
    with psycopg.connect(database_url) as conn:
        rows = conn.execute(
            "SELECT crawl_id::text, url, host, depth, state, submitted_at, finished_at, skip_reason FROM crawl_pages"
            " WHERE crawl_id = ANY(%s::uuid[]) ORDER BY submitted_at NULLS LAST", (ids,)).fetchall()
    pages = [{"crawl": c, "url": u, "host": h, "depth": d, "state": s, "reason": why,
              "submitted": s_at.timestamp() - offset if s_at else None,
              "finished": f_at.timestamp() - offset if f_at else None} for c, u, h, d, s, s_at, f_at, why in rows]
    return {"crawls": [{"id": cid, "plan": plan, "view": views[cid]} for cid, plan in zip(ids, plans)],
            "pages": pages, "offset": offset, "t_start": t_start, "t_end": t_end}


def _owner(run: dict, host_index: int, path: str) -> dict | None:
    """The crawl whose seed on host ``host_index`` is a prefix of ``path`` (subtrees are disjoint)."""
    for crawl in run["crawls"]:
        for h, seed in crawl["plan"].seeds:
            if h == host_index and path.startswith(seed):
                return crawl
    return None


def felt_gaps(run: dict, hosts: list[Host], crawl_delay: dict[int, float]) -> dict:
    """Per host, every server-felt gap with its effective delay (ms), and the ones below it."""
    out: dict = {"gaps": [], "below": [], "unattributed": [], "per_host": {}}
    for i, host in enumerate(hosts):
        caps = captures(host.hits)
        owners = [_owner(run, i, c.page) for c in caps]
        out["unattributed"] += [c.page for c, o in zip(caps, owners) if o is None]
        rows = []
        for (prev, a), (nxt, b) in zip(zip(caps, owners), zip(caps[1:], owners[1:])):
            if a is None or b is None:
                continue
            eff = max(a["plan"].delay_ms, b["plan"].delay_ms, crawl_delay.get(i, 0) * 1000)
            gap = (nxt.first - prev.last) * 1000
            row = {"host": i, "from": prev.page, "to": nxt.page, "gap_ms": round(gap, 1), "effective_ms": eff,
                   "cross_crawl": a["id"] != b["id"], "over_ms": round(gap - eff, 1)}
            rows.append(row)
            if gap < eff:
                out["below"].append(row)
        out["gaps"] += rows
        out["per_host"][f"host{i}"] = {"captures": len(caps), "crawls": len({o["id"] for o in owners if o}),
                                       "gaps": rows}
    return out


def makespan_vs_ideal(run: dict, hosts: list[Host], crawl_delay: dict[int, float], servers: int) -> dict:
    """Makespan over all crawls and the ideal lower bound (module docstring), in seconds."""
    done = [p for p in run["pages"] if p["submitted"] is not None and p["finished"] is not None]
    if not done:
        return {"makespan_s": None, "ideal_s": None, "ratio": None}
    makespan = max(p["finished"] for p in done) - min(p["submitted"] for p in done)
    delay_of = {c["id"]: c["plan"].delay_ms / 1000 for c in run["crawls"]}
    index = {f"127.0.0.1:{h.port}": i for i, h in enumerate(hosts)}
    per_host: dict[str, list[dict]] = {}
    for p in done:
        per_host.setdefault(p["host"], []).append(p)
    bounds = {}
    for host, pages in per_host.items():
        cd = crawl_delay.get(index.get(host, -1), 0)
        eff = [max(delay_of[p["crawl"]], cd) for p in pages]
        bounds[host] = sum(p["finished"] - p["submitted"] for p in pages) + sum(eff) - max(eff)
    server_bound = sum(p["finished"] - p["submitted"] for p in done) / servers
    ideal = max(max(bounds.values()), server_bound)
    return {"makespan_s": round(makespan, 2), "ideal_s": round(ideal, 2), "ratio": round(ideal / makespan, 3),
            "host_bounds_s": {index.get(h, h): round(b, 2) for h, b in bounds.items()},
            "server_bound_s": round(server_bound, 2)}


def _wall(iso: str | None) -> float | None:
    return datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp() if iso else None


def concurrent_crawls(ctx: Context) -> None:
    """4 crawls at once over 6 loopback hosts (3 shared), whole local stack with 2 capture
    servers: no server-felt gap below the effective delay; makespan vs the ideal bound."""
    from devstack.stack import StackConfig, down, up
    from tests.fixtures.stack import stack_ports

    state = Path(tempfile.mkdtemp(prefix="waggle-bench-concurrent-"))
    hosts = make_hosts(BENCH_HOSTS, BENCH_CRAWL_DELAY)
    try:
        t0 = time.monotonic()
        info = up(StackConfig(state_dir=state, captures=2, ports=stack_ports(2)))
        ctx.detail("stack_up_s", round(time.monotonic() - t0, 1))
        r = httpx.post(f"{info['services']['issuer']}/token", json={
            "subject": info["subject"], "organizations": [info["organization"]], "expiresIn": "1h"}, timeout=10)
        r.raise_for_status()
        run = run_crawls(info["services"]["ledger"], r.json()["access_token"], info["database_url"], hosts,
                         BENCH_CRAWLS)
    finally:
        for h in hosts:
            h.stop()
        down(state)
    gaps = felt_gaps(run, hosts, BENCH_CRAWL_DELAY)
    whole = makespan_vs_ideal(run, hosts, BENCH_CRAWL_DELAY, servers=2)
    states = [c["view"].get("state") for c in run["crawls"]]
    captured = sum(c["view"].get("pagesCaptured") or 0 for c in run["crawls"])
    ctx.metric("crawls succeeded", states.count("succeeded"), "crawls", len(BENCH_CRAWLS), ">=",
               key="crawls_succeeded")
    ctx.metric("pages captured", captured, "pages", 3 * sum(len(p.seeds) for p in BENCH_CRAWLS), ">=",
               key="pages_captured")
    ctx.metric("server-felt gaps below the effective delay", len(gaps["below"]), "gaps", 0, "<=",
               f"of {len(gaps['gaps'])}; cross-crawl gaps {sum(g['cross_crawl'] for g in gaps['gaps'])}",
               key="gaps_below_delay")
    over = [g["over_ms"] for g in gaps["gaps"]]
    cross = [g["over_ms"] for g in gaps["gaps"] if g["cross_crawl"]]
    ctx.metric("min gap − effective delay", min(over) if over else None, "ms", 0, ">=")
    ctx.metric("cross-crawl gap overshoot median", percentile(cross, 50), "ms", note=f"n={len(cross)}")
    ctx.metric("makespan", whole["makespan_s"], "s")
    ctx.metric("ideal lower bound (slowest shared host or servers)", whole["ideal_s"], "s")
    ctx.metric("ideal / makespan", whole["ratio"], "×", key="ideal_over_makespan",
               note=f"makespan {whole['makespan_s']} s, ideal {whole['ideal_s']} s; reported, no target (issue 12)")
    ctx.detail("gaps", gaps)
    ctx.detail("makespan", whole)
    ctx.detail("crawls", [{"id": c["id"], "seeds": c["plan"].seeds, "delay_ms": c["plan"].delay_ms,
                           "state": c["view"].get("state"), "pagesCaptured": c["view"].get("pagesCaptured"),
                           "error": c["view"].get("error"),
                           "duration_s": round((_wall(c["view"].get("finishedAt")) or 0)
                                               - (_wall(c["view"].get("startedAt")) or 0), 1)}
                          for c in run["crawls"]])
