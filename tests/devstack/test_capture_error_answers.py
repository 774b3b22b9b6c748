"""What a site answered is archived as it answered; what it never answered is not invented.

* A subresource answered 404 with an HTML body (Python's ``http.server`` for a broken symlink) is
  part of what the site served: a WARC response record with its body, not "without body" in
  ``completeness`` — even though Blink cancels a script/stylesheet load on an error status
  (``requestfailed`` ``net::ERR_ABORTED``, no body in Chromium): the proxy kept it.
* A site that refuses the connection is a network failure (``failed``, ``net::ERR_CONNECTION_REFUSED``
  as Chromium without a proxy says), not ``http_error`` 502 from the capture's own proxy; the
  proxy's 502 never reaches the WARC as if the site had sent it.
"""

from __future__ import annotations

import socket
from http.server import BaseHTTPRequestHandler

import pytest

from f.waggle.failures import TRANSIENT, classify_report
from tests.devstack.helpers import ONLY_WACZ, capture, s3_get, wacz_members, warc_records
from tests.fixtures.loopback import LoopbackSite

NOT_FOUND = b"<!DOCTYPE HTML><html><head><title>Error response</title></head><body><h1>404</h1></body></html>"


def _free_port() -> int:
    """A loopback port nothing listens on (bound, then released): connecting is refused."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class _Handler(BaseHTTPRequestHandler):
    down_port = 0

    def log_message(self, *args) -> None:
        pass

    def _send(self, status: int, ctype: str, body: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        if self.path == "/page":
            body = (b"<!doctype html><html><head><title>docs</title><script src=\"/missing.js\"></script>"
                    b"<link rel=\"stylesheet\" href=\"/missing.css\"></head><body><h1>docs</h1>"
                    b"<img src=\"http://127.0.0.1:%d/gone.png\"></body></html>" % self.down_port)
            self._send(200, "text/html; charset=utf-8", body)
        else:
            self._send(404, "text/html;charset=utf-8", NOT_FOUND)


@pytest.fixture(scope="module")
def docs_site():
    _Handler.down_port = _free_port()
    with LoopbackSite(_Handler, daemon_threads=False) as served:
        yield served.url, _Handler.down_port


def _records(s3_server, report: dict) -> dict[str, tuple[object, bytes]]:
    wacz = wacz_members(s3_get(s3_server, report["artifacts"]["wacz"]))
    warc = next(v for k, v in wacz.items() if k.endswith(".warc.gz") or k.endswith(".warc"))
    return {rec.rec_headers.get_header("WARC-Target-URI"): (rec, payload)
            for rec, payload in warc_records(warc) if rec.rec_type == "response"}


def test_a_404_subresource_is_archived_with_its_body_and_the_page_is_complete(capture_server, docs_site, s3_server):
    base, down = docs_site
    r = capture(capture_server, url=f"{base}/page", captureFormats=ONLY_WACZ)
    assert r.status_code == 200, r.text
    rep = r.json()["report"]
    assert rep["status"] == "success", rep
    responses = _records(s3_server, rep)
    for path in ("/missing.js", "/missing.css"):
        rec, payload = responses[f"{base}{path}"]
        assert rec.http_headers.get_statuscode() == "404"
        assert payload == NOT_FOUND
    # The image host is down: never answered, so no response record and honestly missing.
    gone = f"http://127.0.0.1:{down}/gone.png"
    assert gone not in responses
    assert rep["completeness"]["missingBodyUrls"] == [gone], rep["completeness"]
    assert rep["completeness"]["missingBodyCount"] == 1 and rep["completeness"]["complete"] is False


def test_a_refused_connection_is_a_network_failure_not_http_502(capture_server, docs_site):
    _, down = docs_site
    r = capture(capture_server, url=f"http://127.0.0.1:{down}/", captureFormats=ONLY_WACZ)
    assert r.status_code == 200, r.text
    rep = r.json()["report"]
    assert rep["status"] == "failed", rep
    assert "httpStatusCode" not in rep
    assert rep["errorDetails"]["type"] == "internal"  # BrowserHive v12: net::ERR_* navigation errors
    assert "net::ERR_CONNECTION_REFUSED" in rep["errorDetails"]["message"]
    assert classify_report(rep, None)[0] == TRANSIENT  # crawl_host retries it once, as a connection error
