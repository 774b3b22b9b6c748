"""Fault: BrowserHive slower than the flow's deadline (case C14's shape at the capture call).

A real capture server (Chromium) holds every capture ``--fault-slow-ms`` longer than the
deadline given to the flow's own ``HttpEndpoint``; ``crawl_host.capture_host`` must end each
page as a failure naming the deadline — promptly, without hanging, without marking the
endpoint down (no ``ServerUnavailable``), and the next page still goes to that endpoint.
The production deadline is 145 s; here 3 s, so the test stays short.
"""

from __future__ import annotations

import time
from pathlib import Path

import httpx
import pytest

from devstack.serving import start_module
from f.waggle import crawl_host
from tests.e2e.site import Site

pytestmark = pytest.mark.fault

DEADLINE_S = 3.0
SLOW_MS = 8000


def test_captures_slower_than_the_deadline_fail_the_page_not_the_level(s3_server, tmp_path: Path):
    root = tmp_path / "site"
    root.mkdir()
    (root / "a.html").write_text("<!doctype html><title>a</title>a")
    (root / "b.html").write_text("<!doctype html><title>b</title>b")
    site = Site(root, "User-agent: *\nAllow: /\n")
    proc, url = start_module(
        "waggle_capture", "--allow-private", "--fault-slow-ms", str(SLOW_MS),
        "--s3-endpoint", s3_server.endpoint, "--s3-bucket", s3_server.bucket,
        "--s3-access-key", s3_server.access_key_id, "--s3-secret-key", s3_server.secret_access_key,
        tmp_dir=tmp_path, timeout_s=120,
    )
    try:
        with httpx.Client() as client:
            endpoint = crawl_host.HttpEndpoint(url, client, deadline_s=DEADLINE_S)
            lines: list[str] = []
            started = time.monotonic()
            results = crawl_host.capture_host(
                [endpoint], "127.0.0.1", [f"{site.url}/a.html", f"{site.url}/b.html"], "crawl-deadline",
                formats={"png": False, "webp": False, "html": False, "links": False, "mhtml": False, "wacz": True},
                signing=False, scripts=[], delay_ms=0, log=lines.append,
            )
            elapsed = time.monotonic() - started
    finally:
        proc.terminate()
        proc.wait(30)
        site.stop()
    assert [r["status"] for r in results] == ["failed", "failed"], results
    assert all("deadline" in r["skipReason"] for r in results), [r.get("skipReason") for r in results]
    assert all("taskId" not in r for r in results)  # no answer, so no task id to report
    # bounded: per page at most 2 attempts, each ≤ deadline, plus busy rounds while the
    # server finishes the abandoned capture (it holds its browser SLOW_MS)
    assert elapsed < 2 * (2 * DEADLINE_S + SLOW_MS / 1000 + 10), (elapsed, lines)
