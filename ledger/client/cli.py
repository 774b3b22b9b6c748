"""Commands of this area, mounted on the root ``waggle`` app by :mod:`ledger.cli`."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    """Add this area's commands (or sub-apps) to ``app``."""
