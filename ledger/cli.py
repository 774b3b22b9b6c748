"""The product's command line: one Typer app assembled from each ledger area's own commands.

Each area owns its sub-commands in ``ledger/<area>/cli.py:register(app)``; this file only
mounts them. The ``waggle`` console script (:mod:`waggle.cli`) adds the local stack's
``waggle dev …`` on top; ``ledger/`` itself never imports ``devstack/``.
"""

from __future__ import annotations

import typer

from ledger.api.cli import register as register_api
from ledger.archive.cli import register as register_archive
from ledger.authz.cli import register as register_authz
from ledger.client.cli import register as register_client
from ledger.client.changes import register as register_changes
from ledger.client.search import register as register_search
from ledger.client.workflows import register as register_workflows
from ledger.crawl.cli import register as register_crawl
from ledger.db.cli import register as register_db

REGISTERS = (register_db, register_api, register_crawl, register_archive, register_authz, register_client,
             register_search, register_changes, register_workflows)


def build_app() -> typer.Typer:
    """A fresh ``waggle`` app holding the ledger's commands (callers may mount more)."""
    root = typer.Typer(
        name="waggle",
        help="waggle — a polite, browser-based web archiving crawler.",
        no_args_is_help=True,
        pretty_exceptions_enable=False,
    )
    for register in REGISTERS:
        register(root)
    return root


app = build_app()


def main() -> None:
    app()
