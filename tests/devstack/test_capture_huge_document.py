"""A main document over the per-response limit (round 22, docs/internals.md "Huge documents
(round 22)"), against the real server, real Chromium and a loopback site with generated pages;
the limit is lowered by the request's ``maxResponseBytes`` (100 kB) to keep the pages small.

* An HTML page over the limit, with a ``Content-Length`` or without one: ``failed``, type
  ``policy``, "document larger than the … limit", no artifacts, fetched once; the flow classes it
  ``policy`` (not retried).
* A subresource over the limit stays a metadata record, ``truncated: too-large``: the capture
  succeeds, incomplete (as before).
"""

from __future__ import annotations

from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler

import pytest

from f.waggle.failures import POLICY, classify_report
from tests.devstack.helpers import ONLY_WACZ, capture, s3_get, wacz_members, warc_records
from tests.devstack.site import tiny_png
from tests.fixtures.loopback import LoopbackSite

LIMIT = 100_000
BIG = 3 * LIMIT
HUGE_PAGE = (b"<!doctype html><html><head><title>huge</title></head><body>"
             + b"<p>filler filler filler filler filler filler filler filler</p>\n" * (BIG // 64) + b"</body></html>")
IMG_PAGE = b'<!doctype html><html><head><title>img</title></head><body><img src="/big.png"></body></html>'


class GeneratedSite:
    """``/declared.html`` (the huge page with Content-Length), ``/unsized.html`` (the same, no
    length: the body ends at the close), ``/img.html`` (a small page with ``/big.png`` over the
    limit). Counts GETs per path."""

    def __init__(self) -> None:
        self.hits: dict[str, int] = {}
        site = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:
                pass

            def do_GET(self) -> None:  # noqa: N802
                site.hits[self.path] = site.hits.get(self.path, 0) + 1
                body, ctype, sized = {
                    "/declared.html": (HUGE_PAGE, "text/html", True),
                    "/unsized.html": (HUGE_PAGE, "text/html", False),
                    "/img.html": (IMG_PAGE, "text/html", True),
                    "/big.png": (tiny_png() + b"\0" * BIG, "image/png", True),
                }.get(self.path, (b"", "text/plain", True))
                self.send_response(200 if body else 404)
                self.send_header("Content-Type", ctype)
                if sized:
                    self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
                self.close_connection = True

        self._site = LoopbackSite(Handler)

    def url(self, path: str) -> str:
        return self._site.url + path

    def stop(self) -> None:
        self._site.stop()


@pytest.fixture(scope="module")
def site() -> Iterator[GeneratedSite]:
    s = GeneratedSite()
    yield s
    s.stop()


@pytest.mark.parametrize("path", ["/declared.html", "/unsized.html"])
def test_a_document_over_the_limit_fails_with_a_clear_permanent_reason(capture_server, site, path):
    before = site.hits.get(path, 0)
    r = capture(capture_server, url=site.url(path), captureFormats={**ONLY_WACZ, "html": True},
                maxResponseBytes=LIMIT)
    assert r.status_code == 200, r.text
    report = r.json()["report"]
    assert report["status"] == "failed", report
    assert report["errorDetails"]["type"] == "policy"
    message = report["errorDetails"]["message"]
    assert message.startswith(f"document larger than the {LIMIT} bytes limit ({len(HUGE_PAGE)} bytes)"), message
    assert report["artifacts"] == {}  # no half archive
    assert site.hits[path] - before == 1
    assert classify_report(report, None)[0] == POLICY  # the flow does not retry it


def test_a_subresource_over_the_limit_is_cut_and_marked(capture_server, site, s3_server):
    """(Moved from test_capture_wacz.py, whose main document over the cap is now refused.)"""
    report = capture(capture_server, url=site.url("/img.html"), captureFormats=ONLY_WACZ,
                     maxResponseBytes=LIMIT).json()["report"]
    assert report["status"] == "success", report
    assert report["completeness"] == {"bodylessUrls": [], "truncatedUrls": [site.url("/big.png")],
                                      "missingBodyUrls": [], "missingBodyCount": 0, "complete": False}
    assert report["waczStats"]["totalTruncatedTooLarge"] == 1
    recs = warc_records(wacz_members(s3_get(s3_server, report["artifacts"]["wacz"]))["archive/data.warc.gz"])
    kinds = {x.rec_type: (x, p) for x, p in recs if x.rec_headers.get_header("WARC-Target-URI") == site.url("/big.png")}
    assert kinds["response"][0].rec_headers.get_header("WARC-Truncated") == "length"
    assert kinds["response"][1] == b""
    assert b"truncated: too-large" in kinds["metadata"][1]
    assert site.url("/img.html") in {x.rec_headers.get_header("WARC-Target-URI") for x, _ in recs
                                     if x.rec_type == "response"}
