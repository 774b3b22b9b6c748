"""``waggle replay`` (issue 15): archives downloaded through signed URLs and served by pywb on
loopback, from pywb's own environment; a captured page comes back byte-identical.

The WACZ is a real capture of the local test site by the capture server (Chromium). pywb's
environment is created once per machine for the tests (``$TMPDIR/waggle-replay-venv-<pins>``,
about a minute the first time; PyPI) — the same code path as a user's first ``waggle replay``.
"""

from __future__ import annotations

import hashlib
import io
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

import httpx
import pytest
from warcio.archiveiterator import ArchiveIterator

from ledger.client import replay
from tests.devstack.helpers import ONLY_WACZ, capture, s3_get
from tests.flow.fakes import HttpFake

REPO = Path(__file__).resolve().parents[2]
VENV = Path(tempfile.gettempdir()) / ("waggle-replay-venv-" + hashlib.sha256("\n".join(replay.PINS).encode()).hexdigest()[:12])
ARCHIVE_ID = "5b1c9e2a-4d3f-4a6b-8c7d-0e1f2a3b4c5d"


@pytest.fixture(scope="module")
def page_wacz(capture_server, test_site, s3_server):
    """A real WACZ of /other and the page's response body as recorded in its WARC."""
    url = test_site.url("/other")
    r = capture(capture_server, url=url, captureFormats=ONLY_WACZ)
    assert r.status_code == 200, r.text
    wacz = s3_get(s3_server, r.json()["report"]["artifacts"]["wacz"])
    with zipfile.ZipFile(io.BytesIO(wacz)) as zf:
        warc = zf.read(next(n for n in zf.namelist() if n.endswith(".warc.gz")))
    body = next(rec.content_stream().read() for rec in ArchiveIterator(io.BytesIO(warc))
                if rec.rec_type == "response" and rec.rec_headers.get_header("WARC-Target-URI") == url)
    return {"url": url, "wacz": wacz, "body": body}


@pytest.fixture(scope="module")
def pywb_bin():
    return replay.ensure_env(VENV, echo=lambda _m: None)


def _ledger(page_wacz):
    """A ledger answering the three calls replay makes: the listing, signing, the signed GET."""
    def handle(req):
        if req.method == "GET" and req.path.startswith("/api/archives"):
            rows = [{"id": ARCHIVE_ID, "sourceUrl": page_wacz["url"], "capturedAt": "2026-12-01T04:00:00.000Z",
                     "waczComplete": True, "objectKey": "k.wacz"}]
            return 200, {}, {"archives": rows if "before" not in req.path else []}
        if req.method == "POST" and req.path == f"/api/archives/{ARCHIVE_ID}/url":
            return 200, {}, {"url": f"{fake.url}/s3/k.wacz?X-Amz-Signature=x", "expiresIn": 300}
        if req.method == "GET" and req.path.startswith("/s3/k.wacz"):
            return 200, {"content-type": "application/zip"}, page_wacz["wacz"]
        return 404, {}, {"error": "not found"}

    fake = HttpFake(handle)
    return fake


def test_pywb_serves_a_captured_page_byte_identical(page_wacz, pywb_bin, tmp_path):
    wacz = tmp_path / "a.wacz"
    wacz.write_bytes(page_wacz["wacz"])
    replay.build_collection(tmp_path / "replay", [wacz], pywb_bin)
    port = replay.free_port()
    server = replay.start_server(tmp_path / "replay", pywb_bin, port)
    try:
        raw = httpx.get(f"http://127.0.0.1:{port}/{replay.COLLECTION}/id_/{page_wacz['url']}", timeout=30)
        assert raw.status_code == 200 and raw.content == page_wacz["body"]
        shown = httpx.get(replay.page_url(port, page_wacz["url"]), timeout=30)
        assert shown.status_code == 200 and b"replay_iframe" in shown.content  # pywb's framed replay page
    finally:
        replay.stop(server)
    assert server.poll() is not None


@pytest.mark.parametrize("stop_signal", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_waggle_replay_downloads_by_prefix_serves_and_stops_with_pywb(page_wacz, pywb_bin, tmp_path, stop_signal):
    """Ctrl-C (SIGINT) or a SIGTERM to waggle stops pywb, which runs in a session of its own."""
    ledger = _ledger(page_wacz)
    env = {**os.environ, "WAGGLE_API_URL": ledger.url, "WAGGLE_TOKEN": "t", "WAGGLE_REPLAY_VENV": str(VENV),
           "COLUMNS": "200", "PYTHONUNBUFFERED": "1"}
    # As a terminal starts it (SIGINT raises KeyboardInterrupt): a pytest run as a background job
    # of a non-interactive shell would hand SIGINT down ignored, and Ctrl-C would go unseen.
    boot = "import signal; signal.signal(signal.SIGINT, signal.default_int_handler); "
    proc = subprocess.Popen([sys.executable, "-c", boot + "from waggle.cli import main; main()", "replay",
                             ARCHIVE_ID[:6], "--state-dir", str(tmp_path)], cwd=REPO, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        lines, found = [], None
        deadline = time.monotonic() + 120
        while found is None and time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            lines.append(line)
            found = re.search(r"(http://127\.0\.0\.1:(\d+)/waggle/)(\S+)", line)
        assert found, "".join(lines)
        assert found.group(3) == page_wacz["url"]
        assert (tmp_path / "replay" / "archives" / f"{ARCHIVE_ID}.wacz").read_bytes() == page_wacz["wacz"]
        raw = httpx.get(f"{found.group(1)}id_/{page_wacz['url']}", timeout=30)
        assert raw.content == page_wacz["body"]
        _wait_catching(proc.pid, signal.SIGTERM)  # waggle's last step before it waits on pywb
        proc.send_signal(stop_signal)
        assert proc.wait(30) == 0
        with pytest.raises(httpx.ConnectError):  # pywb stopped with it
            httpx.get(f"http://127.0.0.1:{found.group(2)}/", timeout=2)
    finally:
        if proc.poll() is None:
            proc.kill()
        ledger.close()


def _wait_catching(pid: int, signum: int, timeout_s: float = 30.0) -> None:
    """Until process ``pid`` has a handler for ``signum`` (Linux: SigCgt in /proc/PID/status), so
    a signal sent next cannot land, on a loaded machine, before the process is ready for it."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        status = Path(f"/proc/{pid}/status").read_text()
        caught = int(next(line.split()[1] for line in status.splitlines() if line.startswith("SigCgt:")), 16)
        if caught >> (signum - 1) & 1:
            return
        time.sleep(0.01)
    raise AssertionError(f"process {pid} did not install a handler for signal {signum} in {timeout_s} s")


def test_an_unknown_prefix_is_refused_before_anything_starts(page_wacz, tmp_path):
    ledger = _ledger(page_wacz)
    try:
        env = {**os.environ, "WAGGLE_API_URL": ledger.url, "WAGGLE_TOKEN": "t", "WAGGLE_REPLAY_VENV": str(tmp_path / "v")}
        done = subprocess.run([sys.executable, "-c", "from waggle.cli import main; main()", "replay", "ffff",
                               "--state-dir", str(tmp_path)], cwd=REPO, env=env, capture_output=True, text=True,
                              timeout=60)
        assert done.returncode == 1 and "no archive you may see has an id starting with 'ffff'" in done.stdout
        assert not (tmp_path / "v").exists()
    finally:
        ledger.close()
