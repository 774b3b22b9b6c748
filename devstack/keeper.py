"""Keep one service process running: start it again when it dies (issue 24 item 9).

``python -m devstack.keeper --count FILE -- ARGV…`` runs ARGV as its child, in the keeper's own
process group (the supervisor starts the keeper in a new session, so ``Supervisor.stop`` signals
both at once). When the child exits while nobody asked the keeper to stop, the keeper writes the
restart to FILE — JSON ``{"restarts": n, "lastExit": code, "lastAt": "ISO-8601 UTC"}``, a negative
code being the signal that ended it — waits and starts ARGV again. The wait doubles from
:data:`FIRST_WAIT_S` up to :data:`MAX_WAIT_S` while the child keeps dying within
:data:`STABLE_S` of its start (a crash loop must not spin), and is back to the first once a child
lived longer. SIGTERM / SIGINT / SIGHUP end the keeper: the child is signalled (if the group
signal did not reach it already), waited for, and not started again.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

FIRST_WAIT_S = 0.5
MAX_WAIT_S = 10.0
STABLE_S = 30.0


def read_restarts(path: Path) -> dict:
    """FILE's content (``{"restarts": 0}`` when it is missing or unreadable)."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {"restarts": 0}
    return data if isinstance(data, dict) and isinstance(data.get("restarts"), int) else {"restarts": 0}


def _write(path: Path, data: dict) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(data))
    os.replace(tmp, path)  # a reader never sees half a file


def keep(argv: list[str], count_file: Path, stop: threading.Event, *, first_wait_s: float = FIRST_WAIT_S,
         max_wait_s: float = MAX_WAIT_S, stable_s: float = STABLE_S, log=print) -> int:
    """Run ``argv`` until ``stop`` is set, restarting it whenever it exits on its own; returns
    the last child's exit code. Restarts are counted in ``count_file`` (module doc)."""
    wait_s = first_wait_s
    while True:
        started = time.monotonic()
        child = subprocess.Popen(argv)
        while child.poll() is None:
            if stop.wait(0.2):
                if child.poll() is None:
                    child.terminate()
                try:
                    return child.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    child.kill()
                    return child.wait()
        code = child.returncode
        if stop.is_set():
            return code
        lived = time.monotonic() - started
        if lived >= stable_s:  # it ran well: a single crash, not a loop
            wait_s = first_wait_s
        data = read_restarts(count_file)
        data.update(restarts=data["restarts"] + 1, lastExit=code,
                    lastAt=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
        _write(count_file, data)
        log(f"keeper: {argv[0]} … exited with {code} after {lived:.1f} s; restart {data['restarts']} in {wait_s:g} s",
            flush=True)
        if stop.wait(wait_s):
            return code
        wait_s = min(max_wait_s, wait_s * 2)


def main(args: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m devstack.keeper", description=__doc__.splitlines()[0])
    parser.add_argument("--count", required=True, type=Path, help="the restart count file (JSON)")
    parser.add_argument("argv", nargs=argparse.REMAINDER, help="-- the service's command line")
    ns = parser.parse_args(args)
    argv = ns.argv[1:] if ns.argv[:1] == ["--"] else ns.argv
    if not argv:
        parser.error("no command line after --")
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, lambda *_: stop.set())
    return keep(argv, ns.count, stop)


if __name__ == "__main__":
    code = main()
    sys.exit(code if code >= 0 else 128 - code)
