"""The stack supervisor with real processes: pid files, health waits, idempotent start, stop."""

from __future__ import annotations

import json
import os
import signal
import socket
import sys
import time
from pathlib import Path

import httpx
import pytest

from devstack.supervisor import Service, StackError, Supervisor, free_port

# A service that forks a child into its own process group, then serves HTTP: stopping must end both.
SERVER = """
import http.server, subprocess, sys
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
open(sys.argv[2], "w").write(str(child.pid))
http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), http.server.SimpleHTTPRequestHandler).serve_forever()
"""


def _alive(pid: int) -> bool:
    try:
        return bool(Path(f"/proc/{pid}/cmdline").read_bytes())
    except OSError:
        return False


def _listening(port: int, group: int | None = None) -> bool:
    """Whether a TCP socket listens on ``port`` (/proc/net/tcp, state 0A) — with ``group``, one
    held by a process of that process group. Not a connect: on loopback a connect to a free
    ephemeral port can meet itself (TCP simultaneous open) and succeed, which made a freed port
    look taken under two test workers; and a freed port may be taken at once by another worker's
    server (CI, load 10), which says nothing of the group that was stopped."""
    inodes = set()
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        if fields[3] == "0A" and int(fields[1].rsplit(":", 1)[1], 16) == port:
            inodes.add(fields[9])
    if group is None or not inodes:
        return bool(inodes)
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            if int((proc / "stat").read_text().rsplit(")", 1)[1].split()[2]) != group:
                continue
            owned = {os.readlink(fd) for fd in (proc / "fd").iterdir()}
        except OSError:
            continue
        if any(f"socket:[{i}]" in owned for i in inodes):
            return True
    return False


def _service(tmp_path: Path, port: int, **kw) -> Service:
    script = tmp_path / "server.py"
    script.write_text(SERVER)
    return Service("web", [sys.executable, str(script), str(port), str(tmp_path / "child.pid")], port, "/", **kw)


def test_start_is_idempotent_and_stop_ends_the_process_group(tmp_path: Path) -> None:
    sup = Supervisor(tmp_path / "state")
    svc = _service(tmp_path, free_port())
    assert sup.start(svc) is True
    rec = sup.record("web")
    assert rec is not None and rec["url"] == svc.url
    assert httpx.get(svc.url + "/").status_code == 200
    assert sup.start(svc) is False  # second start reuses the running process
    assert sup.record("web")["pid"] == rec["pid"]
    child = int((tmp_path / "child.pid").read_text())
    assert _alive(child) and _listening(svc.port)

    assert sup.stop("web") is True
    deadline = time.monotonic() + 5
    while (_alive(rec["pid"]) or _alive(child)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(rec["pid"]) and not _alive(child)
    assert not _listening(svc.port, group=rec["pid"])
    assert sup.record("web") is None
    assert sup.stop("web") is False


def test_port_owned_by_another_process_is_refused(tmp_path: Path) -> None:
    with socket.socket() as other:
        other.bind(("127.0.0.1", 0))
        other.listen()
        port = other.getsockname()[1]
        sup = Supervisor(tmp_path / "state")
        with pytest.raises(StackError, match=rf"port 127.0.0.1:{port} is already in use"):
            sup.start(_service(tmp_path, port))
        assert sup.record("web") is None


def test_early_exit_reports_the_log_tail(tmp_path: Path) -> None:
    sup = Supervisor(tmp_path / "state")
    svc = Service("broken", [sys.executable, "-c", "import sys; print('bad flag --nope'); sys.exit(3)"], free_port(), "/")
    with pytest.raises(StackError) as err:
        sup.start(svc)
    assert "exited with code 3" in str(err.value) and "bad flag --nope" in str(err.value)
    assert sup.record("broken") is None


def test_health_deadline(tmp_path: Path) -> None:
    sup = Supervisor(tmp_path / "state")
    svc = Service("silent", [sys.executable, "-c", "import time; time.sleep(60)"], free_port(), "/", ready_timeout_s=1.0)
    t0 = time.monotonic()
    with pytest.raises(StackError, match="did not answer"):
        sup.start(svc)
    assert 1.0 <= time.monotonic() - t0 < 15
    assert sup.record("silent") is None  # the process that never got healthy was stopped


def test_stale_pid_file_is_not_trusted(tmp_path: Path) -> None:
    sup = Supervisor(tmp_path / "state")
    sup.run_dir.mkdir(parents=True)
    # pid 1 exists but runs another command line: never ours, never signalled
    (sup.run_dir / "web.json").write_text(json.dumps({"pid": 1, "argv": ["not", "this"], "url": "", "health": "/"}))
    assert sup.record("web") is None
    assert sup.stop("web") is False


def _kept_child(keeper_pid: int, timeout_s: float = 10.0) -> int:
    """The pid of the process a keeper runs (its only child), waiting until there is one."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            kids = Path(f"/proc/{keeper_pid}/task/{keeper_pid}/children").read_text().split()
        except OSError:
            kids = []
        if kids:
            return int(kids[0])
        time.sleep(0.05)
    raise AssertionError(f"keeper {keeper_pid} runs no child")


def _wait_until(predicate, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return predicate()


def test_a_kept_service_that_dies_is_started_again_and_counted(tmp_path: Path) -> None:
    """Issue 24 item 9: a capture server (``keep``) killed from outside is started again by its
    keeper, on the same port, and the restart is counted; ``stop`` ends it for good."""
    sup = Supervisor(tmp_path / "state")
    svc = _service(tmp_path, free_port(), keep=True)
    assert sup.start(svc) is True
    assert sup.restarts("web") == 0
    keeper = sup.record("web")["pid"]
    first = _kept_child(keeper)
    os.kill(first, signal.SIGKILL)  # dies on its own, as far as the keeper knows
    assert _wait_until(lambda: sup.restarts("web") == 1, 10)
    assert _wait_until(lambda: _alive(first) is False and _listening(svc.port), 20)
    second = _kept_child(keeper)
    assert second != first
    assert httpx.get(svc.url + "/").status_code == 200
    assert sup.record("web")["pid"] == keeper  # the pid file still names the keeper
    restarts = json.loads(sup.restarts_path("web").read_text())
    assert restarts["lastExit"] == -signal.SIGKILL and restarts["lastAt"].endswith("Z")
    assert sup.start(svc) is False  # up again reuses it

    assert sup.stop("web") is True
    assert _wait_until(lambda: not _alive(keeper) and not _alive(second), 10)
    time.sleep(1.0)  # longer than the keeper's first wait: nothing came back
    assert not _listening(svc.port, group=keeper) and sup.restarts("web") is None


def test_a_kept_service_that_dies_at_start_fails_fast(tmp_path: Path) -> None:
    sup = Supervisor(tmp_path / "state")
    svc = Service("broken", [sys.executable, "-c", "import sys; print('bad flag --nope'); sys.exit(3)"],
                  free_port(), "/", keep=True, ready_timeout_s=60)
    t0 = time.monotonic()
    with pytest.raises(StackError) as err:
        sup.start(svc)
    assert time.monotonic() - t0 < 15  # not the 60 s health deadline
    assert "bad flag --nope" in str(err.value) and "keeper" in str(err.value)
    assert sup.record("broken") is None


def test_dev_status_shows_the_restart_count(tmp_path: Path) -> None:
    from devstack.stack import status

    state = tmp_path / "state"
    sup = Supervisor(state)
    svc = _service(tmp_path, free_port(), keep=True)
    sup.start(svc)
    try:
        os.kill(_kept_child(sup.record("web")["pid"]), signal.SIGKILL)
        assert _wait_until(lambda: sup.restarts("web") == 1, 10)
        [row] = [r for r in status(state) if r["name"] == "web"]
        assert row["restarts"] == 1 and row["running"]
    finally:
        sup.stop("web")
