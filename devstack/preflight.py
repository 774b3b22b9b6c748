"""Before ``waggle dev up`` starts anything: which pieces of the stack are not installed yet."""

from __future__ import annotations

import importlib.util
import os

from devstack.layout import REPO

# Python module of each service, and the issue that delivers it (for "missing piece" errors).
MODULES = {
    "s3": ("devstack.s3", "issue 5 (S3 stand-in)"),
    "issuer": ("devstack.issuer", "issue 2 (dev OIDC issuer)"),
    "tscompile": ("devstack.tscompile", "issue 5 (ts-compile stand-in)"),
    "capture": ("waggle_capture", "issue 28 item 7 (the capture server, `waggle capture serve`)"),
    "windmill": ("devstack.windmill", "issue 4 (local Windmill runner)"),
    "ledger": ("ledger.api.app", "issue 2 (ledger API, `waggle serve`)"),
}

REQUIRED_COMMANDS = {
    ("db", "migrate"): "issue 2 (ledger database)",
    ("scripts", "load-defaults"): "issue 2 (script catalogue)",
    ("serve",): "issue 2 (ledger API)",
    ("fga", "deploy"): "issue 3 (OpenFGA store and model)",
    ("grant",): "issue 3 (OpenFGA grants)",
}


def _module_found(module: str) -> bool:
    try:
        spec = importlib.util.find_spec(module)
        if spec is not None and spec.submodule_search_locations is not None:
            spec = importlib.util.find_spec(module + ".__main__")  # a package runs through its __main__
        return spec is not None
    except ModuleNotFoundError:
        return False


def _missing_commands() -> list[tuple[str, str]]:
    """``waggle`` sub-commands ``up`` needs that the ledger's CLI does not offer yet."""
    import typer

    from ledger.cli import app

    root = typer.main.get_command(app)
    missing = []
    for path, issue in REQUIRED_COMMANDS.items():
        cmd = root
        for part in path:
            cmd = (getattr(cmd, "commands", None) or {}).get(part)
            if cmd is None:
                missing.append((" ".join(path), issue))
                break
    return missing


def missing_pieces(captures: int) -> list[str]:
    """Human-readable list of stack pieces that are not installed yet (empty when complete)."""
    missing = [f"{module} — {issue}" for key, (module, issue) in MODULES.items()
               if not (key == "capture" and captures == 0) and not _module_found(module)]
    missing += [f"`waggle {cmd}` — {issue}" for cmd, issue in _missing_commands()]
    from devstack import openfga_server

    if not os.access(openfga_server.BIN, os.X_OK):
        missing.append(f"{openfga_server.BIN} — the OpenFGA server, built by scripts/bootstrap (issue 28)")
    if not (REPO / "f" / "waggle" / "crawl_level.flow").is_dir():
        missing.append(f"{REPO / 'f/waggle/crawl_level.flow'} — issue 4 (the crawl flow)")
    return missing
