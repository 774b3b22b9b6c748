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


def _install_bench_extra() -> None:
    """Install the pinned ``bench`` extra (pyinstrument, psutil, py-spy) into this interpreter's
    environment when a piece is missing — a fresh clone's venv has only ``dev`` and ``test``."""
    import importlib.util
    import subprocess

    missing = [m for m in ("pyinstrument", "psutil") if importlib.util.find_spec(m) is None]
    if not (Path(sys.executable).parent / "py-spy").exists():
        missing.append("py-spy")
    if not missing:
        return
    typer.echo(f"waggle bench: installing the pinned bench extra ({', '.join(missing)} missing)", err=True)
    done = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--disable-pip-version-check",
                           "-e", f"{REPO}[dev,test,bench]"], check=False)
    if done.returncode != 0:
        typer.echo("waggle bench: `pip install -e '.[dev,test,bench]'` failed; see its output above", err=True)
        raise typer.Exit(1)


app = build_app()
_mount_capture(app)
_mount_dev(app)
app.command("bench", context_settings={"allow_extra_args": True, "ignore_unknown_options": True})(bench)


def main() -> None:
    app()
