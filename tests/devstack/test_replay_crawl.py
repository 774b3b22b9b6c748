"""``waggle replay --crawl ID`` (issue 25 item 3): every archive of a crawl in one pywb collection,
so a link from one captured page to another replays; a page the crawl did not capture is pywb's
"not found" — and pywb's environment is created robustly at first use (issue 30 item 7).

The crawl is a chain index → a → b (→ c, not captured), one WACZ per page as the capture
stand-in packages them (``waggle_capture.wacz``); a fake ledger answers the crawl lookup and
its collection, whose members' signed URLs it serves itself.
"""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import httpx
import pytest

from ledger.client import replay
from tests.archive.helpers import warc_gz
from tests.devstack.test_replay import VENV, _wait_catching
from tests.flow.fakes import HttpFake

REPO = Path(__file__).resolve().parents[2]
CRAWL_ID = "7d1e2f3a-4b5c-4d6e-8f70-8192a3b4c5d6"
SITE = "http://chain.test"
CHAIN = [("index.html", "Chain 0", "a.html"), ("a.html", "Chain A", "b.html"), ("b.html", "Chain B", "c.html")]


def chain_html(title: str, link: str) -> bytes:
    return (f"<!doctype html><html><head><title>{title}</title></head><body><h1>{title}</h1>"
            f'<a id="next" href="{link}">next</a></body></html>').encode()


def page_wacz(url: str, body: bytes, tmp: Path) -> bytes:
    from waggle_capture.warc import cdxj_index
    from waggle_capture.wacz import build_wacz, pages_jsonl

    warc = tmp / "data.warc.gz"
    warc.write_bytes(warc_gz(url, body))
    out = tmp / "x.wacz"
    build_wacz(out, warc=warc, cdxj=cdxj_index(warc), pages=pages_jsonl(str(uuid.uuid4()), url, "2026-12-01T04:00:00Z", url),
               extra=[], datapackage={"title": url})
    return out.read_bytes()


@pytest.fixture(scope="module")
def chain():
    """``{archive id: (url, WACZ bytes)}`` of the three captured pages."""
    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, title, link in CHAIN:
            out[str(uuid.uuid4())] = (f"{SITE}/{name}", page_wacz(f"{SITE}/{name}", chain_html(title, link), Path(tmp)))
    return out


def fake_ledger(chain):
    def handle(req):
        if req.method == "GET" and req.path.startswith("/api/crawls?"):
            return 200, {}, {"crawls": [{"crawlId": CRAWL_ID, "state": "succeeded"}]}
        if req.method == "GET" and req.path == f"/api/crawls/{CRAWL_ID}/collection":
            resources = [{"name": f"{aid}.wacz", "path": f"{fake.url}/s3/{aid}.wacz?X-Amz-Signature=x",
                          "hash": "sha256:" + hashlib.sha256(data).hexdigest(), "bytes": len(data),
                          "archiveId": aid, "url": url} for aid, (url, data) in chain.items()]
            missing = [{"url": f"{SITE}/c.html", "depth": 3, "why": "not-captured", "reason": "beyond the depth"}]
            return 200, {}, {"profile": "multi-wacz-package", "crawlId": CRAWL_ID, "resources": resources,
                             "missing": missing, "missingCount": 1}
        m = re.match(r"^/s3/([0-9a-f-]{36})\.wacz", req.path)
        if req.method == "GET" and m and m.group(1) in chain:
            return 200, {"content-type": "application/zip"}, chain[m.group(1)][1]
        return 404, {}, {"error": "not found"}

    fake = HttpFake(handle)
    return fake


def follow(current: str, page: str) -> str:
    """The target of the replayed page's ``#next`` link as the browser resolves it: pywb leaves a
    relative link relative, so it resolves against the replay URL, inside the collection."""
    href = re.search(r'<a id="next" href="([^"]+)"', page).group(1)
    assert "/" not in href and ":" not in href, href  # a sibling page (urljoin would squash pywb's "http://")
    return current.rsplit("/", 1)[0] + "/" + href


@pytest.fixture(scope="module")
def pywb_bin():
    return replay.ensure_env(VENV, echo=lambda _m: None)


def test_a_crawl_replays_as_one_site_through_three_pages(chain, pywb_bin, tmp_path):
    ledger = fake_ledger(chain)
    env = {**os.environ, "WAGGLE_API_URL": ledger.url, "WAGGLE_TOKEN": "t", "WAGGLE_REPLAY_VENV": str(VENV),
           "COLUMNS": "200", "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen([sys.executable, "-c", "from waggle.cli import main; main()", "replay",
                             "--crawl", CRAWL_ID[:8], "--state-dir", str(tmp_path)], cwd=REPO, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        lines, found = [], None
        deadline = time.monotonic() + 180
        while found is None and time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            lines.append(line)
            found = re.search(r"(http://127\.0\.0\.1:\d+)/waggle/(\S+)", line)
        out = "".join(lines)
        assert found, out
        assert found.group(2) == f"{SITE}/index.html"  # opens at the seed
        assert "3 archive(s) in one collection, 1 page(s) not in it" in out
        assert f"not in it: {SITE}/c.html (not-captured: beyond the depth)" in out
        base = found.group(1)
        url = f"{base}/waggle/mp_/{SITE}/index.html"
        for _, title, _ in CHAIN:  # index → a → b, each from another WACZ of the one collection
            page = httpx.get(url, timeout=30)
            assert page.status_code == 200 and f"<h1>{title}</h1>" in page.text, (url, page.status_code, page.text[:300])
            url = follow(url, page.text)
        assert url.endswith(f"{SITE}/c.html") and "/waggle/" in url  # rewritten into the collection
        beyond = httpx.get(url, timeout=30)
        assert beyond.status_code == 404 and "not found" in beyond.text.lower()
        _wait_catching(proc.pid, 15)
        proc.terminate()
        assert proc.wait(30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
        ledger.close()
    got = [r.path for r in ledger.requests if r.path.startswith("/s3/")]
    assert len(got) == 3  # each member once, through its signed URL
    for aid, (_, data) in chain.items():
        assert (tmp_path / "replay" / "archives" / f"{aid}.wacz").read_bytes() == data


def test_a_member_already_downloaded_is_not_fetched_again(tmp_path):
    """``replay.have``: a crawl replayed again downloads only members it does not hold whole."""
    f = tmp_path / "m.wacz"
    f.write_bytes(b"PK member")
    digest = "sha256:" + hashlib.sha256(b"PK member").hexdigest()
    assert replay.have(f, 9, digest)
    assert not replay.have(f, 10, digest)  # another size
    assert not replay.have(f, 9, "sha256:" + "0" * 64)  # same size, other bytes
    assert not replay.have(f, 9, None) and not replay.have(tmp_path / "absent.wacz", 9, digest)


def test_crawl_and_archive_ids_go_alone(tmp_path):
    done = subprocess.run([sys.executable, "-c", "from waggle.cli import main; main()", "replay", "abcd1234",
                           "--crawl", CRAWL_ID], cwd=REPO, capture_output=True, text=True, timeout=60,
                          env={**os.environ, "WAGGLE_API_URL": "http://127.0.0.1:9", "WAGGLE_TOKEN": "t"})
    assert done.returncode == 2 and "one of the two" in done.stdout + done.stderr


def fake_python(tmp_path: Path) -> str:
    """A Python whose ``-m venv`` fails in ensurepip (as on issue 30's fresh machine) unless told
    ``--without-pip``; everything else is the real interpreter."""
    script = tmp_path / "python-without-ensurepip"
    script.write_text(f"""#!/bin/sh
case " $* " in
  *" -m venv "*)
    case " $* " in *" --without-pip "*) ;; *)
      echo "Error: Command '[..., '-m', 'ensurepip', '--upgrade', '--default-pip']' returned non-zero exit status 1." >&2
      exit 1;; esac;;
esac
exec {sys.executable} "$@"
""")
    script.chmod(0o755)
    return str(script)


def test_first_use_survives_a_python_whose_ensurepip_fails(tmp_path):
    venv = tmp_path / "env"
    replay.create_env(venv, ("six==1.16.0",), python=fake_python(tmp_path))
    done = subprocess.run([str(venv / "bin" / "python"), "-c", "import six; print(six.__version__)"],
                          capture_output=True, text=True)
    assert done.stdout.strip() == "1.16.0", done.stderr


def test_a_python_without_venv_fails_with_what_to_do(tmp_path):
    broken = tmp_path / "python-no-venv"
    broken.write_text("#!/bin/sh\necho 'No module named venv' >&2\nexit 1\n")
    broken.chmod(0o755)
    with pytest.raises(replay.ReplayError) as err:
        replay.create_env(tmp_path / "env", ("six==1.16.0",), python=str(broken))
    text = str(err.value)
    assert "No module named venv" in text and "apt-get install python3-venv" in text and "WAGGLE_REPLAY_VENV" in text
