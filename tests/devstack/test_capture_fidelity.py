"""The bytes as sent (issue 24 item 3, decision 111): every response record of a real capture
holds the entity the site sent — never charset-converted — with a matching
``WARC-Payload-Digest``, the HTTP headers received (``Content-Encoding``/``Transfer-Encoding``
only as ``X-Archive-Orig-…``, ``Content-Length`` = the stored payload, case C9), and the WARC
passes ``warcio check``. A file cut at the response limit keeps its prefix (item 4)."""

from __future__ import annotations

import base64
import hashlib
import subprocess
import sys
from pathlib import Path

import pytest

from tests.devstack.fidelity_site import CP1252, PAGES, FidelitySite
from tests.devstack.helpers import ONLY_WACZ, capture, s3_get, wacz_members, warc_records
from tests.devstack.hostile_site import BIG_BYTES, CHUNKED_BYTES, HostileSite
from tests.fixtures.loopback import LoopbackSite

SUBRESOURCES = ["/latin1.html", "/sjis.html", "/utf16.html", "/gzip.html", "/br.html", "/chunked.html",
                "/nul.html", "/pic.png", "/pic.gif"]
MOVED = {"content-encoding", "transfer-encoding"}  # kept only as X-Archive-Orig-…


@pytest.fixture(scope="module")
def site():
    s = FidelitySite().start()
    try:
        yield s
    finally:
        s.stop()


def _warc(s3_server, report: dict) -> bytes:
    return wacz_members(s3_get(s3_server, report["artifacts"]["wacz"]))["archive/data.warc.gz"]


def _responses(warc: bytes, base: str) -> dict[tuple[str, str], tuple[object, bytes]]:
    out = {}
    for rec, payload in warc_records(warc):
        uri = rec.rec_headers.get_header("WARC-Target-URI")
        if rec.rec_type == "response" and uri.startswith(base):
            out[(uri[len(base):], rec.http_headers.get_header("Content-Range") or "")] = (rec, payload)
    return out


def _b32(data: bytes) -> str:
    return "sha256:" + base64.b32encode(hashlib.sha256(data).digest()).decode()


def _assert_as_sent(rec, payload: bytes, sent, where: str) -> None:
    assert payload == sent.entity, (where, payload[:120], sent.entity[:120])
    assert rec.rec_headers.get_header("WARC-Payload-Digest") == _b32(payload), where
    assert rec.http_headers.get_statuscode() == str(sent.status), where
    stored = [(k.lower(), v) for k, v in rec.http_headers.headers]
    for k, v in sent.headers:
        name = k.lower()
        if name in MOVED or (name == "content-length" and v != str(len(payload))):
            assert (f"x-archive-orig-{name}", v) in stored, (where, k, stored)
            assert name == "content-length" or not any(s == name for s, _ in stored), (where, k, stored)
        else:
            assert (name, v) in stored, (where, k, v, stored)
    assert ("content-length", str(len(payload))) in stored, (where, stored)


def _warcio_check(warc: bytes, tmp_path: Path) -> None:
    path = tmp_path / "data.warc.gz"
    path.write_bytes(warc)
    done = subprocess.run([sys.executable, "-m", "warcio.cli", "check", "-v", str(path)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "digest pass" in done.stdout and "fail" not in done.stdout  # it did check digests


def test_a_windows_1252_page_is_stored_as_sent(capture_server, site, s3_server, tmp_path):
    """The issue's example: 0x93/0x94 stay single bytes under charset=windows-1252."""
    url = site.url("/cp1252.html")
    report = capture(capture_server, url=url, captureFormats=ONLY_WACZ).json()["report"]
    assert report["status"] == "success", report
    warc = _warc(s3_server, report)
    rec, payload = _responses(warc, site.base)[("/cp1252.html", "")]
    assert b"\x93curly\x94" in payload and b"\xe2\x80\x9c" not in payload
    _assert_as_sent(rec, payload, site.sent[("/cp1252.html", "")], "/cp1252.html")
    assert len(payload) == len(CP1252)
    _warcio_check(warc, tmp_path)


def test_every_response_of_a_page_is_stored_as_sent(capture_server, site, s3_server, tmp_path):
    """Charsets, a BOM, gzip and br, chunked, NUL bytes, images, a 206 of <audio>, a 204."""
    url = site.url("/")
    report = capture(capture_server, url=url, captureFormats=ONLY_WACZ).json()["report"]
    assert report["status"] == "success", report
    warc = _warc(s3_server, report)
    records = _responses(warc, site.base)
    for path in ["/"] + SUBRESOURCES:
        assert (path, "") in records, (path, sorted(records))
        rec, payload = records[(path, "")]
        _assert_as_sent(rec, payload, site.sent[(path, "")], path)
    ranged = [k for k in records if k[0] == "/sound.wav" and k[1]]
    assert ranged, sorted(records)  # the media element's range request(s): 206 each
    for key in ranged:
        rec, payload = records[key]
        assert rec.http_headers.get_statuscode() == "206"
        _assert_as_sent(rec, payload, site.sent[key], repr(key))
    rec, payload = records[("/empty", "")]
    assert payload == b"" and rec.http_headers.get_statuscode() == "204"
    _assert_as_sent(rec, payload, site.sent[("/empty", "")], "/empty")
    assert PAGES["/gzip.html"][2] == "gzip" and PAGES["/br.html"][2] == "br"  # the codings under test
    _warcio_check(warc, tmp_path)


@pytest.fixture(scope="module")
def hostile():
    s = HostileSite().start()
    try:
        yield s
    finally:
        s.stop()


@pytest.mark.parametrize(("path", "limit"), [("/big.bin", 2 << 20), ("/chunked.bin", 1 << 20)],
                         ids=["content-length", "no-length"])
def test_a_file_cut_at_the_limit_keeps_its_prefix(capture_server, hostile, s3_server, tmp_path, path, limit):
    """Item 4: the record holds the first ``limit`` bytes the site sent, ``WARC-Truncated:
    length``; the site was not made to send the whole file."""
    url = hostile.url(path)
    report = capture(capture_server, url=url, captureFormats=ONLY_WACZ, maxResponseBytes=limit).json()["report"]
    assert report["status"] == "success", report
    assert report["document"]["file"]["truncated"] == "too-large"
    warc = _warc(s3_server, report)
    [(rec, payload)] = [(r, p) for r, p in warc_records(warc)
                        if r.rec_type == "response" and r.rec_headers.get_header("WARC-Target-URI") == url]
    assert rec.rec_headers.get_header("WARC-Truncated") == "length"
    sent = hostile.big if path == "/big.bin" else b"z" * CHUNKED_BYTES  # what the site sends there
    assert len(payload) == limit and payload == sent[:limit]
    assert rec.http_headers.get_header("Content-Length") == str(limit)
    assert rec.rec_headers.get_header("WARC-Payload-Digest") == _b32(payload)
    if path == "/big.bin":
        assert rec.http_headers.get_header("X-Archive-Orig-Content-Length") == str(BIG_BYTES)
    assert hostile.sent[path] < BIG_BYTES  # not read to its end
    _warcio_check(warc, tmp_path)


# -- replay --------------------------------------------------------------------------------------

REPO = Path(__file__).resolve().parents[2]
REPLAY_DIR = REPO / "ledger" / "web" / "replay" / "node_modules" / "replaywebpage"
STATIC_DIR = REPO / "ledger" / "web" / "static"
TYPES = {".js": "application/javascript", ".html": "text/html; charset=utf-8", ".wasm": "application/wasm",
         ".json": "application/json", ".css": "text/css", ".wacz": "application/zip"}


class _Files(LoopbackSite):
    """ReplayWeb.page's files under /replay/, the ledger's replay page under /static/, and one
    WACZ at /a.wacz, on 127.0.0.1 (a secure context: service workers run), with byte ranges."""

    def __init__(self, wacz: bytes) -> None:
        from http.server import BaseHTTPRequestHandler

        files = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:
                pass

            def _body(self) -> tuple[bytes, str] | None:
                path = self.path.split("?", 1)[0]
                if path == "/a.wacz":
                    return wacz, TYPES[".wacz"]
                for prefix, root in (("/replay/", REPLAY_DIR), ("/static/", STATIC_DIR)):
                    if path.startswith(prefix):
                        f = (root / path[len(prefix):]).resolve()
                        if f.is_relative_to(root) and f.is_file():
                            return f.read_bytes(), TYPES.get(f.suffix, "application/octet-stream")
                return None

            def do_HEAD(self) -> None:  # noqa: N802
                self.do_GET(head=True)

            def do_GET(self, head: bool = False) -> None:  # noqa: N802
                found = self._body()
                if found is None:
                    self.send_response(404)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                data, ctype = found
                status, extra = 200, {}
                rng = self.headers.get("Range", "")
                if rng.startswith("bytes="):
                    first_s, _, last_s = rng[6:].partition("-")
                    first = int(first_s or 0)
                    last = min(int(last_s) if last_s else len(data) - 1, len(data) - 1)
                    extra = {"Content-Range": f"bytes {first}-{last}/{len(data)}"}
                    data, status = data[first:last + 1], 206
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(data)))
                self.send_header("Accept-Ranges", "bytes")
                for k, v in extra.items():
                    self.send_header(k, v)
                self.end_headers()
                if not head:
                    self.wfile.write(data)

        super().__init__(Handler)
        files.base = files.url


def test_replaywebpage_shows_the_curly_quotes_of_a_windows_1252_page(capture_server, site, s3_server, browser):
    """The archived windows-1252 page replayed by ReplayWeb.page (the ledger's replay page and
    the pinned player) reads “curly” — not the mojibake â€œ of a UTF-8 body under its header."""
    import time
    from urllib.parse import urlencode

    assert (REPLAY_DIR / "sw.js").is_file(), "ReplayWeb.page is not installed: run scripts/bootstrap"
    url = site.url("/cp1252.html")
    report = capture(capture_server, url=url, captureFormats=ONLY_WACZ).json()["report"]
    assert report["status"] == "success", report
    files = _Files(s3_get(s3_server, report["artifacts"]["wacz"]))
    context = browser.new_context()
    try:
        page = context.new_page()
        page.goto(f"{files.base}/static/replay.html?" + urlencode({"source": f"{files.base}/a.wacz", "url": url}))
        text, deadline = "", time.monotonic() + 90
        while time.monotonic() < deadline:
            frames = [f for f in page.frames if "/replay/w/" in f.url]
            try:
                text = frames[-1].inner_text("#q", timeout=1000) if frames else ""
            except Exception:  # noqa: BLE001 — the frame navigates while loading
                text = ""
            if "curly" in text:
                break
            page.wait_for_timeout(300)
        assert text.startswith("\u201ccurly\u201d \u2018single\u2019 \u2013 dash \u2026 \u20ac euro"), (
            text, [f.url for f in page.frames])
    finally:
        context.close()
        files.stop()
