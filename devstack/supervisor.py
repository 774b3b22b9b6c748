"""Process supervisor of the local stack: start, health-wait and stop one service process.

Each service runs detached (own session, so ``down`` can stop it and its children as a group)
with its output in ``state_dir/logs/<name>.log`` and a pid file ``state_dir/run/<name>.json``
holding ``{"pid", "argv", "url", "health"}``. A pid file counts only while a process with that
pid still runs the recorded command line, so a recycled pid is never signalled.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx


class StackError(RuntimeError):
    """A service could not be started or wired; ``str()`` says what to do."""


@dataclass(frozen=True)
class Service:
    """One long-running process of the stack.

    ``url`` is its base URL (``http://127.0.0.1:PORT``), ``health`` the path that answers 2xx
    when it is ready, ``port`` the TCP port it must own.
    """

    name: str
    argv: list[str]
    port: int
    health: str
    env: dict[str, str] = field(default_factory=dict)
    host: str = "127.0.0.1"
    ready_timeout_s: float = 60.0
    ok_any_status: bool = False  # health = "answers HTTP at all" (S3 answers 403 without a signature)
    keep: bool = False  # restarted when it dies on its own (devstack.keeper), restarts counted
    scheme: str = "http"  # "https": a service with its own TLS listener (pebble; its certificate is not checked)

    @property
    def url(self) -> str:
        return f"{self.scheme}://{self.host}:{self.port}"


def _cmdline(pid: int) -> list[str] | None:
    """The command line of a running process (Linux ``/proc``), or None when it is gone."""
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return None
    if not raw:  # zombie
        return None
    return raw.rstrip(b"\0").decode(errors="replace").split("\0")


def port_in_use(host: str, port: int) -> bool:
    """True when something accepts TCP connections on ``host:port``."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(0.5)
        return s.connect_ex((host, port)) == 0


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port the OS reports free right now (bind to 0, then release it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def healthy(url: str, timeout_s: float = 2.0, any_status: bool = False) -> bool:
    """True when ``GET url`` answers 2xx (any status with ``any_status``) within ``timeout_s`` s."""
    try:
        # a loopback TLS listener (pebble) presents a certificate of its own: reachability is the question
        resp = httpx.get(url, timeout=timeout_s, verify=not url.startswith("https://"))
    except httpx.HTTPError:
        return False
    return any_status or resp.is_success


class Supervisor:
    """Starts and stops the services of one state directory."""

    def __init__(self, state_dir: Path):
        self.state_dir = state_dir
        self.run_dir = state_dir / "run"
        self.log_dir = state_dir / "logs"

    # -- pid files -------------------------------------------------------------
    def _pidfile(self, name: str) -> Path:
        return self.run_dir / f"{name}.json"

    def log_path(self, name: str) -> Path:
        return self.log_dir / f"{name}.log"

    def restarts_path(self, name: str) -> Path:
        """The keeper's restart count of ``name`` (not ``*.json``: :meth:`names` lists those)."""
        return self.run_dir / f"{name}.restarts"

    def launch_argv(self, svc: Service) -> list[str]:
        """The command line started for ``svc``: its own, or (``keep``) under :mod:`devstack.keeper`."""
        if not svc.keep:
            return list(svc.argv)
        return [sys.executable, "-m", "devstack.keeper", "--count", str(self.restarts_path(svc.name)), "--", *svc.argv]

    def restarts(self, name: str) -> int | None:
        """How often the keeper restarted ``name`` since it was started (None: not kept)."""
        from devstack.keeper import read_restarts

        path = self.restarts_path(name)
        return read_restarts(path)["restarts"] if path.exists() else None

    def record(self, name: str) -> dict | None:
        """The pid record of ``name`` when its process is still alive, else None."""
        path = self._pidfile(name)
        try:
            rec = json.loads(path.read_text())
        except (OSError, ValueError):
            return None
        if _cmdline(int(rec["pid"])) != rec["argv"]:
            return None
        return rec

    def names(self) -> list[str]:
        """Names of every service with a pid file (alive or not), in start order."""
        if not self.run_dir.is_dir():
            return []
        files = sorted(self.run_dir.glob("*.json"), key=lambda p: p.stat().st_mtime)
        return [p.stem for p in files]

    def log_tail(self, name: str, lines: int = 25) -> str:
        try:
            text = self.log_path(name).read_text(errors="replace")
        except OSError:
            return "(no log)"
        return "\n".join(text.splitlines()[-lines:])

    # -- start / stop ----------------------------------------------------------
    def start(self, svc: Service) -> bool:
        """Start ``svc`` unless it already runs; wait until its health route answers.

        Returns True when a process was started, False when the recorded one was reused.
        Raises :class:`StackError` when the port belongs to another process, when the
        process exits early, or when it is not healthy within ``svc.ready_timeout_s``.
        """
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.log_dir.mkdir(parents=True, exist_ok=True)
        rec = self.record(svc.name)
        argv = self.launch_argv(svc)
        if rec is not None and rec.get("argv") == argv and rec.get("env_sha") == _env_sha(svc):
            self._wait_healthy(svc, proc=None)
            return False
        if rec is not None:  # same name, different command line or settings: restart it
            self.stop(svc.name)
        if port_in_use(svc.host, svc.port):
            raise StackError(
                f"{svc.name}: port {svc.host}:{svc.port} is already in use by another process."
                f" Stop that process, or run `waggle dev down` for the stack that owns it."
            )
        env = {**os.environ, **svc.env}
        with open(self.log_path(svc.name), "ab") as log:
            log.write(f"\n=== {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())} start {argv}\n".encode())
            log.flush()
            if svc.keep:
                self.restarts_path(svc.name).write_text(json.dumps({"restarts": 0}))
            proc = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,  # own process group: down stops its children too
            )
        rec = {"pid": proc.pid, "argv": argv, "url": svc.url, "health": svc.health,
               "ok_any_status": svc.ok_any_status, "env_sha": _env_sha(svc)}
        self._pidfile(svc.name).write_text(json.dumps(rec))
        try:
            self._wait_healthy(svc, proc)
        except StackError:
            self.stop(svc.name)
            raise
        return True

    def _wait_healthy(self, svc: Service, proc: subprocess.Popen | None) -> None:
        deadline = time.monotonic() + svc.ready_timeout_s
        url = svc.url + svc.health
        while True:
            if healthy(url, any_status=svc.ok_any_status):
                return
            if proc is not None and svc.keep and self.restarts(svc.name):  # the kept process died at start
                raise StackError(
                    f"{svc.name} exited before it answered {url} (its keeper would restart it in a loop)."
                    f" Last lines of {self.log_path(svc.name)}:\n{self.log_tail(svc.name)}"
                )
            if proc is not None and proc.poll() is not None:
                raise StackError(
                    f"{svc.name} exited with code {proc.returncode} before it answered {url}."
                    f" Last lines of {self.log_path(svc.name)}:\n{self.log_tail(svc.name)}"
                )
            if time.monotonic() > deadline:
                raise StackError(
                    f"{svc.name} did not answer {url} within {svc.ready_timeout_s:.0f} s."
                    f" Last lines of {self.log_path(svc.name)}:\n{self.log_tail(svc.name)}"
                )
            time.sleep(0.2)

    def stop(self, name: str, timeout_s: float = 10.0) -> bool:
        """Stop the process group of ``name`` (SIGTERM, SIGKILL after ``timeout_s`` s).

        Returns True when a live process was stopped; the pid file is removed either way.
        """
        rec = self.record(name)
        path = self._pidfile(name)
        self.restarts_path(name).unlink(missing_ok=True)
        if rec is None:
            path.unlink(missing_ok=True)
            return False
        pid = int(rec["pid"])
        _signal_group(pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout_s
        while _cmdline(pid) is not None and time.monotonic() < deadline:
            _reap(pid)
            time.sleep(0.1)
        if _cmdline(pid) is not None:
            _signal_group(pid, signal.SIGKILL)
            while _cmdline(pid) is not None and time.monotonic() < deadline + 5:
                _reap(pid)
                time.sleep(0.1)
        # the leader is gone; take down any child it left in its group
        _signal_group(pid, signal.SIGKILL)
        path.unlink(missing_ok=True)
        return True


def _env_sha(svc: Service) -> str:
    """Fingerprint of the settings a service was started with (its extra environment)."""
    return hashlib.sha256(json.dumps(svc.env, sort_keys=True).encode()).hexdigest()


def _signal_group(pid: int, sig: int) -> None:
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        try:
            os.kill(pid, sig)
        except (ProcessLookupError, PermissionError):
            pass


def _reap(pid: int) -> None:
    """Collect the exit status when ``pid`` is our own child (in-process ``up`` then ``down``)."""
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass
