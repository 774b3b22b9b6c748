"""Chromium revalidating a URL it already holds: the site answers 304, Chromium reports the
cached 200 with the 304's headers. Found by a new-user trial: the Python logo was archived as a
200 without a Content-Type and replayed broken on every page. The archived answer carries the
type the site gave (the earlier answer's headers, updated by the 304's — RFC 9111 §4.3.4)."""

from __future__ import annotations

import email.utils
import time
from http.server import BaseHTTPRequestHandler

from tests.devstack.helpers import ONLY_WACZ, capture, s3_get, wacz_members, warc_records
from tests.fixtures.loopback import LoopbackSite

LOGO = b"<svg xmlns='http://www.w3.org/2000/svg' width='10' height='10'><rect width='10' height='10'/></svg>"
# The logo once, then asked again with `no-cache`: Chromium revalidates (If-Modified-Since).
PAGE = b"""<!doctype html><html><head><title>logo</title></head><body><img src="/logo.svg">
<script>addEventListener('load', () => fetch('/logo.svg', {cache: 'no-cache'})
  .then(r => r.text()).then(() => { document.title = 'revalidated'; }));</script></body></html>"""


class _Handler(BaseHTTPRequestHandler):
    modified = email.utils.formatdate(time.time() - 3600, usegmt=True)
    answers: list[int] = []

    def log_message(self, *args) -> None:
        pass

    def do_GET(self) -> None:  # noqa: N802
        if self.path == "/logo.svg" and self.headers.get("If-Modified-Since") == self.modified:
            self.answers.append(304)
            self.send_response(304)
            self.send_header("Last-Modified", self.modified)
            self.end_headers()
            return
        body, ctype = (LOGO, "image/svg+xml") if self.path == "/logo.svg" else (PAGE, "text/html")
        if self.path == "/logo.svg":
            self.answers.append(200)
        self.send_response(200)
        self.send_header("Content-Type", ctype)
        self.send_header("Last-Modified", self.modified)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def test_a_revalidated_resource_keeps_the_type_the_site_gave(capture_server, s3_server):
    _Handler.answers = []
    with LoopbackSite(_Handler) as site:
        r = capture(capture_server, url=site.url + "/", captureFormats=ONLY_WACZ)
    assert r.status_code == 200, r.text
    rep = r.json()["report"]
    assert rep["status"] == "success", rep
    assert 304 in _Handler.answers, _Handler.answers  # Chromium did revalidate
    members = wacz_members(s3_get(s3_server, rep["artifacts"]["wacz"]))
    warc = next(v for k, v in members.items() if k.startswith("archive/"))
    logos = [rec for rec, _ in warc_records(warc)
             if rec.rec_type in ("response", "revisit") and rec.rec_headers.get_header("WARC-Target-URI").endswith("/logo.svg")]
    assert len(logos) >= 2, [rec.rec_type for rec in logos]
    for rec in logos:
        assert rec.http_headers.get_header("Content-Type") == "image/svg+xml", rec.http_headers.headers
