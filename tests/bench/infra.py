"""Real parts for the benchmarks, each on 127.0.0.1 with an OS-chosen port, each stopped at exit.

* :func:`postgres` — pgserver in a temp dir (or ``WAGGLE_BENCH_DATABASE_URL``), ``new_db()``;
* :func:`s3` — the S3 stand-in (``devstack.s3``);
* :func:`fga` — the real OpenFGA server (datastore ``postgres``: its own database on ``pg``) with a
  store holding the waggle model;
* :func:`webhook` — a fake Windmill run endpoint that answers 201 + a job id;
* :func:`ledger` — ``waggle serve`` in a subprocess, configured by environment;
* :func:`capture_server` — ``python -m waggle_capture`` writing to the S3 stand-in.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import psycopg

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
# Programs the benchmarks run from the venv's bin (BIN / name) → the distribution that installs
# each; tests/skeleton/test_bench_deps.py checks every one is pinned where `waggle bench` installs.
TOOLS = {"py-spy": "py-spy", "waggle": "waggle", "wacz": "wacz"}


def _with_database(url: str, name: str) -> str:
    base, _, query = url.partition("?")
    head, _, _ = base.rpartition("/")
    return f"{head}/{name}" + (f"?{query}" if query else "")


@dataclass
class Postgres:
    admin_url: str

    def new_db(self, template: str | None = None) -> str:
        """URL of a new database (cloned from database ``template`` when given)."""
        name = f"bench_{uuid.uuid4().hex[:10]}"
        with psycopg.connect(self.admin_url, autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {name}" + (f" TEMPLATE {template}" if template else ""))
        return _with_database(self.admin_url, name)

    @staticmethod
    def db_name(url: str) -> str:
        return url.partition("?")[0].rpartition("/")[2]


@contextlib.contextmanager
def postgres() -> Iterator[Postgres]:
    """A Postgres server: ``WAGGLE_BENCH_DATABASE_URL`` when set, else pgserver in a temp dir."""
    given = os.environ.get("WAGGLE_BENCH_DATABASE_URL")
    if given:
        yield Postgres(given)
        return
    import pgserver

    with tempfile.TemporaryDirectory(prefix="waggle-bench-pg-") as tmp:
        server = pgserver.get_server(tmp, cleanup_mode="stop")
        try:
            yield Postgres(server.get_uri())
        finally:
            server.cleanup()


@contextlib.contextmanager
def s3() -> Iterator[object]:
    """The S3 stand-in with bucket ``browserhive`` (``devstack.s3.S3Process``)."""
    from devstack.s3 import start

    with tempfile.TemporaryDirectory(prefix="waggle-bench-s3-") as tmp:
        server = start(tmp)
        try:
            yield server
        finally:
            server.stop()


@contextlib.contextmanager
def fga(pg: Postgres) -> Iterator[object]:
    """The real OpenFGA server on a new database of ``pg`` (datastore ``postgres``, as the local
    stack and production run it) with one store holding the waggle model (``FgaStore``, plus
    ``pid``)."""
    from tests.fixtures.fga import FgaProcess, create_store

    proc = FgaProcess(pg.new_db()).start()
    try:
        store = create_store(proc.api_url, "waggle-bench")
        store.pid = proc.pid  # type: ignore[attr-defined]  # for the CPU figures
        yield store
    finally:
        proc.stop()


@contextlib.contextmanager
def webhook() -> Iterator[str]:
    """A fake Windmill ``jobs/run`` endpoint (201 + uuid); yields its full run URL."""
    from tests.fixtures.ledger import FakeWebhook, ServerThread, _webhook_app

    state = FakeWebhook()
    server = ServerThread(_webhook_app(state), lifespan="off").start()
    try:
        yield f"{server.url}/api/w/waggle/jobs/run/f/f/waggle/crawl_level"
    finally:
        server.stop()


def free_port() -> int:
    from devstack.supervisor import free_port as pick

    return pick()


@dataclass
class Ledger:
    url: str
    proc: subprocess.Popen
    log_path: Path


@contextlib.contextmanager
def ledger(env: dict[str, str], *, log_dir: Path | None = None, timeout_s: float = 60.0,
           workers: int = 1) -> Iterator[Ledger]:
    """``waggle serve [--workers N]`` in a subprocess with ``env`` (``WAGGLE_*``) on a free
    loopback port."""
    port = free_port()
    full = {k: v for k, v in os.environ.items() if not k.startswith("WAGGLE_")}
    full.update(env)
    full.update({"WAGGLE_API_HOST": "127.0.0.1", "WAGGLE_API_PORT": str(port), "PYTHONUNBUFFERED": "1"})
    own_dir = log_dir is None
    log_dir = log_dir or Path(tempfile.mkdtemp(prefix="waggle-bench-ledger-"))
    log_path = log_dir / "ledger.log"
    with open(log_path, "w") as log:
        argv = [str(BIN / "waggle"), "serve"] + (["--workers", str(workers)] if workers > 1 else [])
        proc = subprocess.Popen(argv, cwd=ROOT, env=full, stdout=log,
                                stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"waggle serve exited {proc.returncode}:\n{log_path.read_text()[-3000:]}")
            try:
                httpx.get(f"{url}/api/me", timeout=1)
                break
            except httpx.TransportError:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"waggle serve did not listen:\n{log_path.read_text()[-3000:]}") from None
                time.sleep(0.1)
        yield Ledger(url, proc, log_path)
    finally:
        stop(proc, 10)
        state = env.get("WAGGLE_STATE_DIR", "")
        if "waggle-bench-state-" in state:
            shutil.rmtree(state, ignore_errors=True)
        if own_dir:
            shutil.rmtree(log_dir, ignore_errors=True)


def stop(proc: subprocess.Popen, grace_s: float = 15) -> None:
    """Terminate ``proc``; kill it when it has not exited within ``grace_s`` seconds."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(grace_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


def tree_cpu_s(pid: int) -> float:
    """CPU seconds (user + system) of process ``pid`` and all its descendants so far, reaped
    children included (a closed Chromium renderer's time is in its reaper's ``children_*``)."""
    import psutil

    root = psutil.Process(pid)
    total = 0.0
    for proc in [root, *root.children(recursive=True)]:
        with contextlib.suppress(psutil.Error):
            t = proc.cpu_times()
            total += t.user + t.system + t.children_user + t.children_system
    return total


@contextlib.contextmanager
def capture_server(s3_server: object) -> Iterator[tuple[subprocess.Popen, str]]:
    """One ``python -m waggle_capture --allow-private`` (one Chromium) writing to ``s3_server``;
    yields ``(process, base URL)``."""
    from devstack.serving import start_module

    with tempfile.TemporaryDirectory() as tmp:
        proc, base = start_module(
            "waggle_capture", "--allow-private", "--s3-endpoint", s3_server.endpoint,
            "--s3-access-key", s3_server.access_key_id, "--s3-secret-key", s3_server.secret_access_key,
            tmp_dir=tmp)
        try:
            yield proc, base
        finally:
            stop(proc)


def ledger_env(db_url: str, fga_store: object, s3_server: object | None, webhook_url: str | None,
               **extra: str) -> dict[str, str]:
    """``WAGGLE_*`` settings for a ledger on these parts with dev-header identity."""
    env = {
        "WAGGLE_DATABASE_URL": db_url,
        "WAGGLE_DEV_IDENTITY": "1",
        "WAGGLE_FGA_API_URL": fga_store.api_url,  # type: ignore[attr-defined]
        "WAGGLE_FGA_STORE_ID": fga_store.store_id,  # type: ignore[attr-defined]
        "WAGGLE_FGA_MODEL_ID": fga_store.model_id,  # type: ignore[attr-defined]
        "WAGGLE_S3_BUCKET": "browserhive",
        "WAGGLE_STATE_DIR": tempfile.mkdtemp(prefix="waggle-bench-state-"),
    }
    if s3_server is not None:
        env.update({
            "WAGGLE_S3_ENDPOINT": s3_server.endpoint,  # type: ignore[attr-defined]
            "WAGGLE_S3_ACCESS_KEY_ID": s3_server.access_key_id,  # type: ignore[attr-defined]
            "WAGGLE_S3_SECRET_ACCESS_KEY": s3_server.secret_access_key,  # type: ignore[attr-defined]
        })
    if webhook_url:
        env.update({"WAGGLE_CRAWL_WEBHOOK_URL": webhook_url, "WAGGLE_CRAWL_WEBHOOK_TOKEN": "bench-token"})
    env.update(extra)
    return env


def who(subject: str = "alice", organization: str = "acme") -> dict[str, str]:
    """Dev identity headers."""
    return {"X-Waggle-Subject": subject, "X-Waggle-Organizations": organization}


def py_spy(pid: int, seconds: float, out: Path) -> subprocess.Popen:
    """Start ``py-spy record`` (collapsed stacks, 200 Hz, non-blocking) on ``pid`` for ``seconds``."""
    return subprocess.Popen([str(BIN / "py-spy"), "record", "--pid", str(pid), "--duration", str(int(seconds)),
                             "--rate", "200", "--format", "raw", "--nonblocking", "--output", str(out)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def hot_functions(collapsed: Path, top: int = 25) -> dict:
    """From py-spy's collapsed stacks: the ``top`` functions by self samples and by inclusive
    samples (share of all samples, 0–1), idle event-loop waits included as they are."""
    self_n: dict[str, int] = {}
    incl_n: dict[str, int] = {}
    total = 0
    for line in collapsed.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        n = int(count)
        total += n
        frames = stack.split(";")
        self_n[frames[-1]] = self_n.get(frames[-1], 0) + n
        for f in set(frames):
            incl_n[f] = incl_n.get(f, 0) + n
    share = lambda d: [(k, round(v / total, 3)) for k, v in sorted(d.items(), key=lambda kv: -kv[1])[:top]]
    plumbing = ("asyncio/", "uvicorn/", "runpy", "typer/", "click/", "starlette/", "threading.py", "selectors.py",
                "concurrent/", "(waggle:", "__main__.py", "anyio/", "fastapi/routing.py", "h11")
    app = {k: v for k, v in incl_n.items() if not any(p in k for p in plumbing)}
    return {"samples": total, "self": share(self_n), "inclusive": share(incl_n), "inclusive_app": share(app)}
