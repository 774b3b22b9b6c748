"""Embedded Postgres of the local stack (pgserver), kept running between commands.

The data directory is ``state_dir/pg``; the server listens on a Unix socket only (pgserver's
choice), so it never takes a TCP port. ``start`` reuses a running server; ``stop`` runs
``pg_ctl stop`` so the data survives ``waggle dev down``.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import time
import warnings
from pathlib import Path

logging.getLogger("pgserver").setLevel(logging.CRITICAL)  # its failures surface as our own errors
# pgserver keeps a lock file under the XDG runtime dir; /tmp/runtime-UID is fine for a dev stack
warnings.filterwarnings("ignore", message=".*XDG_RUNTIME_DIR.*")


def start(pgdata: Path) -> str:
    """Start (or reuse) the server for ``pgdata``; returns its connection URI (database ``postgres``)."""
    import pgserver

    pgdata = pgdata.resolve()
    pgdata.parent.mkdir(parents=True, exist_ok=True)
    if running_uri(pgdata) is None:
        # pgserver caches one handle per data dir and process; after a stop it would hand back
        # the stale handle instead of starting the server again
        pgserver.PostgresServer._instances.pop(pgdata, None)
    server = pgserver.get_server(pgdata, cleanup_mode=None)  # None: keep running after we exit
    return server.get_uri()


def running_uri(pgdata: Path) -> str | None:
    """The URI of the server running on ``pgdata``, or None when none runs."""
    from pgserver.utils import PostmasterInfo

    if not (pgdata / "PG_VERSION").exists():
        return None
    info = PostmasterInfo.read_from_pgdata(pgdata)
    if info is None or not info.is_running():
        return None
    return info.get_uri()


def stop(pgdata: Path) -> bool:
    """Stop the server on ``pgdata`` (fast shutdown, data kept). True when one was running."""
    from pgserver._commands import pg_ctl
    from pgserver.utils import PostmasterInfo

    if running_uri(pgdata) is None:
        return False
    user = "pgserver" if os.geteuid() == 0 else None  # pgserver runs Postgres as this user under root
    try:
        pg_ctl(["-w", "-m", "fast", "stop"], pgdata=pgdata, user=user, timeout=30)
        return True
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired):
        pass
    # pg_ctl could not reach the directory (e.g. a parent lost its permissions): SIGINT is
    # Postgres's own "fast shutdown", sent to the postmaster recorded in postmaster.pid.
    info = PostmasterInfo.read_from_pgdata(pgdata)
    if info is None or info.pid is None:
        return False
    try:
        os.kill(info.pid, signal.SIGINT)
    except ProcessLookupError:
        return True
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            os.kill(info.pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.1)
    return False
