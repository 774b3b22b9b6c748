"""The ``waggle`` console script: ledger's commands, plus ``waggle capture serve``, ``waggle dev …``
and ``waggle bench``.

``ledger/`` and ``waggle_capture/`` are the product and never import ``devstack/``
(tests/skeleton/test_imports.py); this module is the one place that joins them. ``devstack`` and
``waggle_capture`` ship in the same distribution, but each one's commands are mounted only when
its package imports (an image may leave it out: the ledger's has no capture server).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import typer

from ledger.cli import build_app

REPO = Path(__file__).resolve().parent.parent


def _mount_dev(app: typer.Typer) -> None:
    try:
        from devstack.cli import app as dev_app
    except ImportError:  # devstack not installed: the product's commands only
        return
    app.add_typer(dev_app, name="dev", help="The embedded local stack (all services on loopback).")


def _mount_capture(app: typer.Typer) -> None:
    try:
        from waggle_capture.cli import app as capture_app
    except ImportError:  # an image without the capture server (the ledger's): the other commands
        return
    app.add_typer(capture_app, name="capture",
                  help="The capture server: BrowserHive v12 with waggle's extensions (docs/capture-server.md).")


def bench(ctx: typer.Context) -> None:
    """Run the benchmarks (tests/bench, a checkout only): ``waggle bench [--quick] [--list] [name ...]``."""
    if not (REPO / "tests" / "bench" / "__main__.py").is_file():
        typer.echo(f"waggle bench runs from a source checkout (tests/bench is not installed): none at {REPO};"
                   " clone the repository and run scripts/bench there", err=True)
        raise typer.Exit(2)
    os.chdir(REPO)
    _install_bench_extra()
    os.execv(sys.executable, [sys.executable, "-m", "tests.bench", *ctx.args])


# What ``waggle bench`` installs: the benchmarks' imports and tools must be pinned in one of these
# (tests/skeleton/test_bench_deps.py); "bench" holds what only the benchmarks use.
BENCH_EXTRAS = ("dev", "test", "bench")


def bench_pins(pyproject: Path | None = None) -> dict[str, str]:
    """``{distribution: version}`` of every ``name==version`` pin ``waggle bench`` needs: the base
    dependencies and the extras :data:`BENCH_EXTRAS` of ``pyproject.toml``."""
    import re
    import tomllib

    project = tomllib.loads((pyproject or REPO / "pyproject.toml").read_text())["project"]
    reqs = list(project["dependencies"])
    todo, seen = list(BENCH_EXTRAS), set()
    while todo:  # an extra may name others of this project ("waggle[capture]" in dev)
        extra = todo.pop()
        if extra in seen:
            continue
        seen.add(extra)
        for req in project["optional-dependencies"][extra]:
            own = re.match(rf"\s*{re.escape(project.get('name', 'waggle'))}\[([^]]*)\]\s*$", req)
            if own:
                todo += [e.strip() for e in own.group(1).split(",")]
            else:
                reqs.append(req)
    pins = {}
    for req in reqs:
        m = re.match(r"\s*([A-Za-z0-9_.-]+)(\[[^]]*\])?\s*==\s*([^\s;,]+)", req)
        if m:
            pins[m.group(1)] = m.group(3)
    return pins


def missing_pins(pins: dict[str, str]) -> list[str]:
    """The pins of ``pins`` not installed at their version in this interpreter's environment."""
    from importlib.metadata import PackageNotFoundError, version

    out = []
    for name, want in pins.items():
        try:
            have = version(name)
        except PackageNotFoundError:
            have = None
        if have != want:
            out.append(f"{name}=={want}" + (f" (have {have})" if have else " (missing)"))
    return out


def _install_bench_extra() -> None:
    """Install the pins of :func:`bench_pins` into this interpreter's environment when one is
    missing or differs — a fresh clone's venv has only the base, ``dev`` and ``test``."""
    import subprocess

    missing = missing_pins(bench_pins())
    if not missing:
        return
    typer.echo(f"waggle bench: installing the pinned {'/'.join(BENCH_EXTRAS)} extras ({', '.join(missing)})", err=True)
    spec = f"{REPO}[{','.join(BENCH_EXTRAS)}]"
    done = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--disable-pip-version-check", "-e", spec],
                          check=False, env={**os.environ, "PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD": "1"})
    if done.returncode != 0:
        typer.echo(f"waggle bench: `pip install -e '{spec}'` failed; see its output above", err=True)
        raise typer.Exit(1)
    still = missing_pins(bench_pins())
    if still:
        typer.echo(f"waggle bench: still not installed after pip: {', '.join(still)}", err=True)
        raise typer.Exit(1)


app = build_app()
_mount_capture(app)
_mount_dev(app)
app.command("bench", context_settings={"allow_extra_args": True, "ignore_unknown_options": True})(bench)


def main() -> None:
    app()
