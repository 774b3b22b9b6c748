"""Node dependencies of the local stack (``devstack/package.json`` + ``package-lock.json``).

The S3 stand-in (s3rver) and the ts-compile stand-in (TypeScript 6.0.3) are npm packages pinned
exactly in ``devstack/package.json`` with a lockfile. :func:`ensure_node_modules` installs them
with ``npm ci`` (lockfile only, never a newer version) the first time they are missing.
"""

from __future__ import annotations

import fcntl
import shutil
import subprocess
import tempfile
import threading
from pathlib import Path

DEVSTACK = Path(__file__).resolve().parent
NODE_MODULES = DEVSTACK / "node_modules"
_lock = threading.Lock()


class NodeMissing(RuntimeError):
    """``node``/``npm`` is not installed or ``npm ci`` failed (message says which)."""


def node_binary() -> str:
    """Path of ``node``; raises :class:`NodeMissing` when it is not on PATH."""
    node = shutil.which("node")
    if not node:
        raise NodeMissing("node is not installed (apt-get install nodejs npm)")
    return node


def ensure_node_modules(*packages: str) -> Path:
    """Make sure ``devstack/node_modules/<pkg>`` exists for each package; returns NODE_MODULES.

    Runs ``npm ci`` in ``devstack/`` (exact lockfile versions) when one is missing; raises
    :class:`NodeMissing` when npm is absent or the install fails.
    """
    def present() -> bool:
        return all((NODE_MODULES / p / "package.json").exists() for p in packages)

    if present():
        return NODE_MODULES
    # Threads of this process and other processes (stand-ins started side by side) take turns.
    with _lock, open(Path(tempfile.gettempdir()) / "waggle-devstack-npm.lock", "w") as lockfile:
        fcntl.flock(lockfile, fcntl.LOCK_EX)
        if present():
            return NODE_MODULES
        npm = shutil.which("npm")
        if not npm:
            raise NodeMissing("npm is not installed (apt-get install npm)")
        done = subprocess.run(
            [npm, "ci", "--no-audit", "--no-fund", "--prefix", str(DEVSTACK)],
            capture_output=True,
            text=True,
            timeout=600,
        )
        if done.returncode != 0:
            raise NodeMissing(f"npm ci in {DEVSTACK} failed: {done.stderr[-2000:]}")
        return NODE_MODULES
