"""``waggle replay``: serve archives on loopback with pywb, in pywb's own virtual environment.

Why its own environment: pywb 2.10 needs pyOpenSSL < 26.2 (through ``wsgiprox``/``certauth``),
and every such pyOpenSSL refuses the project's pinned cryptography 50 (pyOpenSSL 22 in the
project's venv dies at start with ``AttributeError: module 'lib' has no attribute 'GEN_EMAIL'``;
26.1 requires cryptography < 50). So the first ``waggle replay`` creates
``STATE_DIR/replay/venv`` (or ``$WAGGLE_REPLAY_VENV``) with :data:`PINS`, once; a changed pin
list rebuilds it.

First use is robust to a Python whose ``venv`` cannot run ``ensurepip`` (issue 30 item 7: a fresh
machine's first ``waggle replay`` died in ``ensurepip``): the environment is then created
``--without-pip`` and pywb installed into it by this interpreter's own pip (``pip --python``).
Two ``waggle replay`` started together create it once (a lock file beside it); a half-made
environment never counts (the pin stamp is written last). Failure says what was tried and what
to do.

Layout under ``STATE_DIR/replay``: ``archives/ID.wacz`` (downloaded through signed URLs) and
``collections/waggle`` (rebuilt each run: ``wb-manager init`` + ``add --unpack-wacz``). pywb's
``wayback`` listens on 127.0.0.1 only; pages are at ``http://127.0.0.1:PORT/waggle/URL``.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import httpx

PINS = ("pywb==2.10.0", "pyOpenSSL==24.2.1", "cryptography==43.0.3")
COLLECTION = "waggle"
HOST = "127.0.0.1"
READY_TIMEOUT_S = 60.0


class ReplayError(RuntimeError):
    """Replay could not be prepared or started; the message says what to do."""


def venv_dir(state_dir: Path) -> Path:
    given = (os.environ.get("WAGGLE_REPLAY_VENV") or "").strip()
    return Path(given) if given else state_dir / "replay" / "venv"


def _bin(venv: Path, name: str) -> Path:
    return venv / "bin" / name


def _run(argv: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run(argv, capture_output=True, text=True)


def _tail(done: subprocess.CompletedProcess, lines: int = 8) -> str:
    return "\n".join((done.stderr or done.stdout or "").strip().splitlines()[-lines:])


def create_env(venv: Path, pins: tuple[str, ...], python: str = sys.executable) -> None:
    """A new virtual environment at ``venv`` (replacing whatever is there) with ``pins``
    installed. ``python -m venv`` first; when that fails (its ``ensurepip`` step, typically),
    ``python -m venv --without-pip`` and ``python -m pip --python <venv's python> install``.
    Raises ReplayError naming both attempts and the remedies."""
    shutil.rmtree(venv, ignore_errors=True)
    venv.parent.mkdir(parents=True, exist_ok=True)
    made = _run([python, "-m", "venv", str(venv)])
    if made.returncode == 0:
        install = [str(_bin(venv, "python")), "-m", "pip", "install", "-q", "--disable-pip-version-check", *pins]
    else:
        shutil.rmtree(venv, ignore_errors=True)
        bare = _run([python, "-m", "venv", "--without-pip", str(venv)])
        if bare.returncode != 0:
            raise ReplayError(
                f"could not create pywb's environment at {venv}: `{python} -m venv` failed:\n{_tail(made)}\n"
                f"and without pip too:\n{_tail(bare)}\n"
                "Install Python's venv module (Debian: apt-get install python3-venv) or set WAGGLE_REPLAY_VENV to an"
                f" environment that has {' '.join(pins)}.")
        install = [python, "-m", "pip", "--python", str(_bin(venv, "python")), "install", "-q",
                   "--disable-pip-version-check", *pins]
    done = _run(install)
    if done.returncode != 0:
        raise ReplayError(f"could not install {' '.join(pins)} into {venv} (pip, from PyPI):\n{_tail(done)}\n"
                          "Check that PyPI is reachable (proxy settings) and run the command again.")


def ensure_env(venv: Path, echo: Callable[[str], None] = print) -> Path:
    """pywb's venv at ``venv`` with :data:`PINS` (created on first use); returns its bin dir.
    Raises ReplayError saying what failed and what to do."""
    stamp = venv / ".waggle-pins"

    def ready() -> bool:
        return stamp.is_file() and stamp.read_text() == "\n".join(PINS) and _bin(venv, "wayback").is_file()

    if ready():
        return venv / "bin"
    venv.parent.mkdir(parents=True, exist_ok=True)
    with open(venv.parent / f".{venv.name}.lock", "w") as lock:  # one creator at a time
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not ready():  # another waggle may have made it while this one waited
            echo(f"preparing pywb in its own environment ({venv}; first use only, about a minute)")
            create_env(venv, PINS)
            stamp.write_text("\n".join(PINS))
    return venv / "bin"


def have(path: Path, size: int | None, digest: str | None) -> bool:
    """True when ``path`` already holds the archive of this ``size`` and ``sha256:`` ``digest``
    (a crawl replayed again downloads only its new members)."""
    if size is None or not digest or not digest.startswith("sha256:") or not path.is_file():
        return False
    if path.stat().st_size != size:
        return False
    h = hashlib.sha256()
    with path.open("rb") as f:
        while block := f.read(1024 * 1024):
            h.update(block)
    return h.hexdigest() == digest.removeprefix("sha256:")


def build_collection(root: Path, waczs: list[Path], bin_dir: Path) -> None:
    """``root/collections/waggle`` holding exactly ``waczs`` (rebuilt from scratch)."""
    shutil.rmtree(root / "collections" / COLLECTION, ignore_errors=True)
    root.mkdir(parents=True, exist_ok=True)
    manager = str(bin_dir / "wb-manager")
    for argv in ([manager, "init", COLLECTION], [manager, "add", "--unpack-wacz", COLLECTION, *map(str, waczs)]):
        done = subprocess.run(argv, cwd=root, capture_output=True, text=True)
        if done.returncode != 0:
            raise ReplayError(f"pywb could not import the archives ({argv[1]}): {(done.stderr or done.stdout)[-800:]}")


def free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def start_server(root: Path, bin_dir: Path, port: int) -> subprocess.Popen:
    """``wayback`` on 127.0.0.1:``port`` serving ``root``; returns once it answers. Raises
    ReplayError (the process stopped) when it does not answer within READY_TIMEOUT_S."""
    log = open(root / "wayback.log", "ab")  # noqa: SIM115 - the child keeps it
    proc = subprocess.Popen([str(bin_dir / "wayback"), "--bind", HOST, "--port", str(port)], cwd=root,
                            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.monotonic() + READY_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            break
        try:
            if httpx.get(f"http://{HOST}:{port}/", timeout=2.0).status_code < 500:
                return proc
        except httpx.HTTPError:
            time.sleep(0.2)
    stop(proc)
    raise ReplayError(f"pywb did not start on {HOST}:{port}; see {root / 'wayback.log'}")


def stop(proc: subprocess.Popen, timeout_s: float = 10.0) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def page_url(port: int, source_url: str) -> str:
    """Where pywb shows ``source_url`` (the newest capture, rewritten for the browser)."""
    return f"http://{HOST}:{port}/{COLLECTION}/{source_url}"
