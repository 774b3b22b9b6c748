"""Serve an ASGI app with uvicorn on a socket bound here, so ``--port 0`` works.

:func:`serve` binds ``host:port`` (0 = OS-chosen), writes ``{"url": "http://host:port"}`` to
``ready_file`` (if given) once the socket listens, then runs uvicorn on that socket until
SIGTERM/SIGINT. :func:`wait_ready` is the parent side: poll the file for the URL.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from waggle_capture.serving import listen_socket, serve  # noqa: F401 — the local stack's servers bind the same way


def wait_ready(ready_file: str | Path, proc=None, timeout_s: float = 60.0) -> str:
    """URL written by :func:`serve` into ``ready_file``; raises RuntimeError on timeout/exit."""
    path = Path(ready_file)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if path.exists():
            return json.loads(path.read_text())["url"]
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode} before it was ready")
        time.sleep(0.05)
    raise RuntimeError(f"server not ready after {timeout_s} s")


def start_module(module: str, *args: str, tmp_dir: str | Path, timeout_s: float = 90.0, env=None):
    """Start ``python -m module --host 127.0.0.1 --port 0 --ready-file … *args``.

    Returns ``(proc, url)``; the caller stops it with ``proc.terminate(); proc.wait()``.
    Raises RuntimeError when it exits or is not ready within ``timeout_s`` seconds.
    """
    import subprocess
    import sys
    import uuid

    ready = Path(tmp_dir) / f"{module}.{uuid.uuid4().hex}.ready"
    proc = subprocess.Popen(
        [sys.executable, "-m", module, "--host", "127.0.0.1", "--port", "0",
         "--ready-file", str(ready), *args],
        env=env,
    )
    try:
        return proc, wait_ready(ready, proc, timeout_s)
    except BaseException:
        proc.kill()
        proc.wait(10)
        raise
