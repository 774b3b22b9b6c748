"""The capture server's image, run the way Dockerfile.capture runs it (Docker does not run here).

``waggle capture serve`` starts in a directory laid out as the image's ``/app``: only the flow
files the Dockerfile copies are importable under ``f.waggle``, and the modules the image does
not install (``devstack`` and the dev extras but ``capture``'s) refuse to import. The server then
answers ``GET /status`` and captures a page of the test site into S3 with a WACZ.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import httpx

from tests.devstack.helpers import ONLY_WACZ, capture, s3_get

REPO = Path(__file__).resolve().parents[2]

# What the image lacks: the local stack and the dev extras, except the capture extra's Playwright
# and cdxj-indexer; and every f.waggle module Dockerfile.capture does not copy into /app.
RUN_AS_IMAGE = (
    "import os, sys, importlib.abc\n"
    "BLOCK = {'devstack', 'pgserver', 'py_mini_racer', 'wacz', 'pywb', 'openfga_cli', 'celpy'}\n"
    "APP = os.getcwd()\n"
    "class Image(importlib.abc.MetaPathFinder):\n"
    "    def find_spec(self, name, path, target=None):\n"
    "        if name.split('.')[0] in BLOCK: raise ImportError('not in the capture image: ' + name)\n"
    "        if name.startswith('f.waggle.') and not os.path.isfile(os.path.join(APP, *name.split('.')) + '.py'):\n"
    "            raise ImportError('Dockerfile.capture does not copy ' + name)\n"
    "sys.meta_path.insert(0, Image())\n"
    "sys.argv[0] = 'waggle'\n"
    "from waggle.cli import main\n"
    "main()\n"
)


def _copied_flow_files() -> list[str]:
    """The ``f/…`` files Dockerfile.capture copies into /app."""
    text = (REPO / "Dockerfile.capture").read_text()
    return [p for line in re.findall(r"^COPY (?!--from)(.+) /app/f/waggle/$", text, re.M) for p in line.split()]


def _image_app_dir(tmp_path: Path) -> Path:
    app = tmp_path / "app"
    files = _copied_flow_files()
    assert files, "Dockerfile.capture copies no flow file to /app/f/waggle/"
    for rel in files:
        (app / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(REPO / rel, app / rel)
    return app


def test_waggle_capture_serve_runs_as_the_image_runs_it(tmp_path, s3_server, test_site):
    app = _image_app_dir(tmp_path)
    ready = tmp_path / "ready.json"
    env = {**{k: v for k, v in os.environ.items() if not k.startswith(("WAGGLE_", "BROWSERHIVE_"))},
           "PYTHONPATH": str(app),  # as the image's ENV
           "BROWSERHIVE_S3_ENDPOINT": s3_server.endpoint, "BROWSERHIVE_S3_BUCKET": s3_server.bucket}
    proc = subprocess.Popen(
        [sys.executable, "-c", RUN_AS_IMAGE, "capture", "serve", "--host", "127.0.0.1", "--port", "0",
         "--ready-file", str(ready), "--allow-private"],
        cwd=app, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 90
        while not ready.exists():
            assert proc.poll() is None, f"waggle capture serve exited {proc.returncode}:\n{proc.stdout.read()[-3000:]}"
            assert time.monotonic() < deadline, "waggle capture serve did not listen within 90 s"
            time.sleep(0.1)
        url = json.loads(ready.read_text())["url"]
        status = httpx.get(f"{url}/status", timeout=10).json()
        assert status["build"]["version"].startswith("12.") and status["build"]["revision"] == "waggle-capture"
        assert "sealWait" in status["extensions"] and status["process"]["captures"] == 0
        r = capture(url, url=test_site.url("/page"), captureFormats=ONLY_WACZ)
        assert r.status_code == 200, r.text
        assert s3_get(s3_server, r.json()["report"]["artifacts"]["wacz"])[:2] == b"PK"
        assert httpx.get(f"{url}/status", timeout=10).json()["process"]["captures"] == 1
    finally:
        proc.terminate()
        proc.wait(30)


def test_the_image_lacks_what_it_does_not_copy(tmp_path):
    """The layout above can fail: without the flow files the server does not start."""
    app = tmp_path / "app"
    app.mkdir()
    done = subprocess.run([sys.executable, "-c", RUN_AS_IMAGE, "capture", "serve", "--port", "0"], cwd=app,
                          env={**os.environ, "PYTHONPATH": str(app)}, capture_output=True, text=True, timeout=120)
    assert done.returncode != 0
    assert "No module named 'f'" in done.stderr and "from f.waggle.robots import" in done.stderr


def test_serve_help_is_the_servers_own():
    done = subprocess.run([sys.executable, "-c", RUN_AS_IMAGE, "capture", "serve", "--help"], cwd=REPO,
                          capture_output=True, text=True, timeout=120, env={**os.environ, "COLUMNS": "200"})
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.startswith("usage: waggle capture serve")
    for flag in ("--s3-endpoint", "--chromium", "--allow-private", "--signing-url", "--task-total-ms"):
        assert flag in done.stdout, flag
    bad = subprocess.run([sys.executable, "-c", RUN_AS_IMAGE, "capture", "serve", "--url-policy", "x=block"],
                         cwd=REPO, capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and "want PATTERN=deny|no-archive|no-body" in bad.stderr
