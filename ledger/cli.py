"""The ``waggle`` command line: one Typer app assembled from each part's own commands.

Each area owns its sub-commands in its own module (``ledger/<area>/cli.py``,
``devstack/cli.py``); this file only mounts them.
"""

from __future__ import annotations

import typer

from devstack.cli import app as dev_app
from ledger.api.cli import register as register_api
from ledger.archive.cli import register as register_archive
from ledger.authz.cli import register as register_authz
from ledger.client.cli import register as register_client
from ledger.crawl.cli import register as register_crawl
from ledger.db.cli import register as register_db

app = typer.Typer(
    name="waggle",
    help="waggle — a polite, browser-based web archiving crawler.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)

for register in (register_db, register_api, register_crawl, register_archive, register_authz, register_client):
    register(app)
app.add_typer(dev_app, name="dev", help="The embedded local stack (all services on loopback).")


@app.command("bench", context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def bench(ctx: typer.Context) -> None:
    """Run the benchmarks (tests/bench, a checkout only): ``waggle bench [--quick] [--list] [name ...]``."""
    import os
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    if not (root / "tests" / "bench" / "__main__.py").is_file():
        typer.echo(f"waggle bench runs from a source checkout (tests/bench is not installed): none at {root};"
                   " clone the repository and run scripts/bench there", err=True)
        raise typer.Exit(2)
    os.chdir(root)
    os.execv(sys.executable, [sys.executable, "-m", "tests.bench", *ctx.args])


def main() -> None:
    app()
