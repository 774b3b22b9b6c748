"""The benchmark harness: metrics with targets, a rich table, JSON results.

A benchmark is a function ``run(ctx: Context) -> None`` that records :class:`Metric` rows
with ``ctx.metric(...)`` and free-form details with ``ctx.detail(key, value)``. The runner
(``python -m tests.bench``) prints one table per benchmark and writes
``tests/bench/results/<name>-<UTC stamp>.json`` plus ``<name>-latest.json`` (git-ignored, every
row and detail); a metric given a ``key`` is a headline figure and also goes into the committed
record ``tests/bench/results.json`` (:mod:`tests.bench.record`).

Targets are stated as a bound (``"<="`` or ``">="``); the table shows the measured value, the
target and the **ratio** measured/target (≤ 1 meets a ``<=`` target, ≥ 1 a ``>=`` target).
"""

from __future__ import annotations

import json
import math
import os
import platform
import time
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

RESULTS_DIR = Path(__file__).resolve().parent / "results"


@dataclass
class Metric:
    """One measured value. ``bound`` is ``"<="``, ``">="`` or None (reported, no target)."""

    name: str
    value: float | None
    unit: str
    target: float | None = None
    bound: str | None = None
    note: str = ""
    key: str | None = None  # the stable name a program reads in results.json (snake_case); None: not recorded

    @property
    def ratio(self) -> float | None:
        if self.value is None or self.target in (None, 0):
            return None
        return self.value / self.target

    @property
    def met(self) -> bool | None:
        if self.value is None or self.target is None or self.bound is None:
            return None
        return self.value <= self.target if self.bound == "<=" else self.value >= self.target

    def as_dict(self) -> dict:
        d = asdict(self)
        d["ratio"] = self.ratio
        d["met"] = self.met
        return d


@dataclass
class Context:
    """What a benchmark writes into; ``quick`` asks for a reduced size (smoke runs)."""

    name: str
    quick: bool = False
    metrics: list[Metric] = field(default_factory=list)
    details: dict[str, Any] = field(default_factory=dict)
    started: float = field(default_factory=time.monotonic)
    load_at_start: list[float] = field(default_factory=lambda: [round(x, 2) for x in os.getloadavg()])
    commit: dict = field(default_factory=lambda: git_commit())  # the code measured: taken at the start
    size: str = ""  # what was run when a benchmark has sizes ("10,000 pages", "quick: no baseline crawl")

    def metric(self, name: str, value: float | None, unit: str, target: float | None = None,
               bound: str | None = None, note: str = "", key: str | None = None) -> Metric:
        m = Metric(name, value, unit, target, bound, note, key)
        self.metrics.append(m)
        return m

    def detail(self, key: str, value: Any) -> None:
        self.details[key] = value


def percentile(values: list[float], p: float) -> float | None:
    """The ``p``-th percentile (0–100) by linear interpolation between closest ranks; None if empty."""
    if not values:
        return None
    xs = sorted(values)
    k = (len(xs) - 1) * p / 100.0
    lo, hi = math.floor(k), math.ceil(k)
    return xs[lo] if lo == hi else xs[lo] + (xs[hi] - xs[lo]) * (k - lo)


def summary(values: list[float]) -> dict[str, float | int | None]:
    """``{n, min, median, p99, max}`` of ``values``."""
    return {
        "n": len(values),
        "min": min(values) if values else None,
        "median": percentile(values, 50),
        "p99": percentile(values, 99),
        "max": max(values) if values else None,
    }


def machine() -> dict:
    """The machine the numbers come from (cores, CPU model, Python)."""
    cpu = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {"cores": os.cpu_count(), "cpu": cpu, "python": platform.python_version(), "system": platform.platform(),
            "loadavg_1_5_15": [round(x, 2) for x in os.getloadavg()]}


def git_commit() -> dict:
    """``{"sha", "dirty"}`` of the checkout the benchmark ran from (dirty: tracked files changed,
    the record and its table aside); ``sha`` None outside a git checkout."""
    import subprocess

    root = Path(__file__).resolve().parents[2]
    try:
        sha = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True,
                             check=True).stdout.strip()
        status = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=root,
                                capture_output=True, text=True, check=True).stdout.splitlines()
    except (OSError, subprocess.CalledProcessError):
        return {"sha": None, "dirty": None}
    ours = ("tests/bench/results.json", "tests/bench/README.md")
    return {"sha": sha, "dirty": any(not line[3:].strip().endswith(ours) for line in status)}


def _fmt(v: float | None) -> str:
    if v is None:
        return "—"
    if abs(v) >= 1000:
        return f"{v:,.0f}"
    if abs(v) >= 10:
        return f"{v:.1f}"
    return f"{v:.3f}"


def render(ctx: Context, error: str | None = None) -> None:
    """Print the metrics of ``ctx`` as a rich table."""
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"bench {ctx.name}" + (" (quick)" if ctx.quick else ""))
    for col in ("metric", "measured", "unit", "target", "ratio", "met", "note"):
        table.add_column(col)
    for m in ctx.metrics:
        met = {True: "[green]yes[/]", False: "[red]NO[/]", None: ""}[m.met]
        target = f"{m.bound} {_fmt(m.target)}" if m.target is not None else ""
        table.add_row(m.name, _fmt(m.value), m.unit, target, _fmt(m.ratio), met, m.note)
    console = Console(width=max(160, Console().width))
    console.print(table)
    console.print(f"load average at start {ctx.load_at_start}, now {[round(x, 2) for x in os.getloadavg()]}"
                  f" on {os.cpu_count()} cores")
    if error:
        console.print(f"[red]benchmark {ctx.name} did not finish:[/] {error}")


def write(ctx: Context, error: str | None = None) -> Path:
    """Write ``ctx`` as JSON under ``tests/bench/results/``; returns the stamped file."""
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    now = datetime.now(timezone.utc)
    doc = {
        "benchmark": ctx.name,
        "finishedAt": now.isoformat(timespec="seconds"),
        "wallSeconds": round(time.monotonic() - ctx.started, 2),
        "quick": ctx.quick,
        "machine": machine(),
        "loadavgAtStart": ctx.load_at_start,
        "loadavgAtEnd": [round(x, 2) for x in os.getloadavg()],
        "size": ctx.size,
        "commit": ctx.commit,
        "error": error,
        "metrics": [m.as_dict() for m in ctx.metrics],
        "details": ctx.details,
    }
    text = json.dumps(doc, indent=2, default=str)
    path = RESULTS_DIR / f"{ctx.name}-{now.strftime('%Y%m%dT%H%M%SZ')}.json"
    path.write_text(text)
    (RESULTS_DIR / f"{ctx.name}-latest.json").write_text(text)
    return path
