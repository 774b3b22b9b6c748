"""Extensions 14 ``captureAtDeadline`` and 15 ``screenshotsInWacz`` of our capture server
(docs/capture-server.md), against the real server (page-load budget cut to 2 s), real Chromium
and a loopback site with an image that never answers.

* With ``captureAtDeadline`` the page is captured at the deadline: ``success`` with
  ``incomplete`` naming the hanging image, the WACZ holds the page and what loaded (warcio,
  ``wacz validate``) and says the same in its datapackage.
* Without it (as a real BrowserHive v12) the same page ends ``timeout``, no archive.
* A page whose main document never answers ends ``timeout`` with the extension too.
* With ``screenshotsInWacz`` the png is a ``resource`` record ``urn:view:<url>``, indexed, listed
  in the datapackage — and still written as its own artifact (v12).
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import httpx
import pytest

from tests.devstack.conftest import FAST_SETTLE
from tests.devstack.helpers import (ONLY_WACZ, capture, capture_server_process, cdxj_lines, s3_get, wacz_members,
                                    warc_records)
from tests.devstack.site import tiny_png
from tests.fixtures.loopback import LoopbackSite

PAGE_LOAD_MS = 2000
VENV_BIN = Path(sys.executable).parent

PAGE = (b"<!doctype html><html><head><title>hanging</title></head><body><h1>Hello at the deadline</h1>"
        b'<img src="/ok.png"><img src="/hang.png"></body></html>')
QUIET = PAGE.replace(b'<img src="/hang.png">', b"")


class HangingSite:
    """``/page`` (one image loads, ``/hang.png`` never answers), ``/quiet`` (the same without the
    hanging image), ``/nodoc`` (the document never answers), ``/ok.png``; hanging handlers are released at :meth:`stop`. Counts GETs per path."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.hits: dict[str, int] = {}
        site = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:
                pass

            def do_GET(self) -> None:  # noqa: N802
                site.hits[self.path] = site.hits.get(self.path, 0) + 1
                route = self.path.split("?")[0]
                if route in ("/hang.png", "/nodoc"):
                    site.release.wait(60)  # never within a capture's page-load budget
                    return
                pages = {"/page": PAGE, "/quiet": QUIET}
                body, ctype = (pages[route], "text/html") if route in pages else (tiny_png(), "image/png")
                self.send_response(200)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self._site = LoopbackSite(Handler)

    def url(self, path: str) -> str:
        return self._site.url + path

    def stop(self) -> None:
        self.release.set()
        self._site.stop()


@pytest.fixture(scope="module")
def site() -> Iterator[HangingSite]:
    s = HangingSite()
    try:
        yield s
    finally:
        s.stop()


@pytest.fixture(scope="module")
def short_server(s3_server, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A capture server whose page-load budget is :data:`PAGE_LOAD_MS`."""
    with capture_server_process(s3_server, tmp_path_factory.mktemp("capture-deadline"), "--allow-private",
                                "--settle", FAST_SETTLE, "--page-load-ms", str(PAGE_LOAD_MS)) as url:
        yield url


def timed_capture(server: str, **body) -> tuple[dict, float]:
    began = time.monotonic()
    r = capture(server, **body)
    assert r.status_code == 200, r.text
    return r.json(), time.monotonic() - began


def test_status_advertises_both_extensions(short_server):
    assert {"captureAtDeadline", "screenshotsInWacz"} <= set(httpx.get(f"{short_server}/status").json()["extensions"])


@pytest.mark.parametrize("field", ["captureAtDeadline", "screenshotsInWacz"])
def test_a_non_boolean_member_is_refused(short_server, site, field):
    r = capture(short_server, url=site.url("/page"), captureFormats=ONLY_WACZ, **{field: "yes"})
    assert r.status_code == 400 and r.headers["x-amzn-errortype"] == "ValidationException", r.text
    assert r.json()["fieldList"][0]["path"] == f"/{field}"


def test_a_hanging_image_is_captured_at_the_deadline_as_incomplete(short_server, site, s3_server, tmp_path):
    formats = {**ONLY_WACZ, "png": True, "html": True}
    body, took = timed_capture(short_server, url=site.url("/page"), captureFormats=formats, captureAtDeadline=True)
    report = body["report"]
    assert report["status"] == "success", report
    hang = site.url("/hang.png")
    assert report["incomplete"] == {"reason": "page-load-deadline", "deadlineMs": PAGE_LOAD_MS,
                                    "pendingUrls": [hang], "pendingCount": 1}
    assert report["completeness"]["complete"] is False and hang in report["completeness"]["missingBodyUrls"]
    assert report["settle"]["endedBy"] == "deadline" and "atMs" not in report["settle"]["load"]
    assert set(report["artifacts"]) == {"png", "html", "wacz"}
    # answered soon after the deadline, not after the 130 s task budget: packaging is a fraction
    assert took < 6 * PAGE_LOAD_MS / 1000, took
    wacz = s3_get(s3_server, report["artifacts"]["wacz"])
    members = wacz_members(wacz)
    package = json.loads(members["datapackage.json"])
    assert package["browserhive:capture"]["incomplete"] == report["incomplete"]
    assert package["browserhive:capture"]["completeness"] == report["completeness"]
    responses = {rec.rec_headers.get_header("WARC-Target-URI"): data
                 for rec, data in warc_records(members["archive/data.warc.gz"]) if rec.rec_type == "response"}
    assert b"Hello at the deadline" in responses[site.url("/page")]
    assert responses[site.url("/ok.png")] == tiny_png()
    assert hang not in responses
    f = tmp_path / "deadline.wacz"
    f.write_bytes(wacz)
    v = subprocess.run([str(VENV_BIN / "wacz"), "validate", "-f", str(f)], capture_output=True, text=True, timeout=120)
    assert v.returncode == 0, v.stdout + v.stderr


def test_without_the_member_the_page_times_out_as_with_v12(short_server, site):
    body, _ = timed_capture(short_server, url=site.url("/page"), captureFormats=ONLY_WACZ)
    report = body["report"]
    assert report["status"] == "timeout" and report["errorDetails"]["timeoutMs"] == PAGE_LOAD_MS, report
    assert report["artifacts"] == {} and "incomplete" not in report


def test_no_main_document_at_the_deadline_stays_a_timeout(short_server, site):
    body, _ = timed_capture(short_server, url=site.url("/nodoc"), captureFormats=ONLY_WACZ, captureAtDeadline=True)
    report = body["report"]
    assert report["status"] == "timeout" and report["errorDetails"]["type"] == "timeout", report
    assert report["artifacts"] == {} and "incomplete" not in report


def test_a_page_that_loads_has_no_incomplete_member(short_server, site):
    body, _ = timed_capture(short_server, url=site.url("/quiet"), captureFormats=ONLY_WACZ, captureAtDeadline=True)
    assert body["report"]["status"] == "success" and "incomplete" not in body["report"]


@pytest.mark.parametrize("full_page,scheme", [(False, "urn:view:"), (True, "urn:fullPage:")])
def test_screenshots_are_resource_records_in_the_wacz(short_server, site, s3_server, full_page, scheme):
    url = site.url("/quiet")
    formats = {**ONLY_WACZ, "png": True, "webp": True}
    body, _ = timed_capture(short_server, url=url, captureFormats=formats, screenshotsInWacz=True, fullPage=full_page)
    report = body["report"]
    assert report["status"] == "success", report
    assert {"png", "webp", "wacz"} <= set(report["artifacts"])  # the v12 artifacts are still written
    members = wacz_members(s3_get(s3_server, report["artifacts"]["wacz"]))
    png = s3_get(s3_server, report["artifacts"]["png"])
    resources = {rec.rec_headers.get_header("WARC-Target-URI"): (rec.rec_headers.get_header("Content-Type"), data)
                 for rec, data in warc_records(members["archive/data.warc.gz"]) if rec.rec_type == "resource"}
    webp_scheme = scheme[:-1] + "-webp:"
    assert resources[scheme + url] == ("image/png", png)
    assert resources[webp_scheme + url][0] == "image/webp"
    indexed = {js["url"]: js for _k, _ts, js in cdxj_lines(members["indexes/index.cdx"])}
    assert indexed[scheme + url]["mime"] == "image/png"
    assert webp_scheme + url in indexed
    shots = json.loads(members["datapackage.json"])["browserhive:capture"]["screenshots"]
    assert {s["uri"] for s in shots} == {scheme + url, webp_scheme + url}


def test_without_screenshots_in_wacz_the_wacz_has_no_resource_record(short_server, site, s3_server):
    body, _ = timed_capture(short_server, url=site.url("/quiet"), captureFormats={**ONLY_WACZ, "png": True})
    report = body["report"]
    members = wacz_members(s3_get(s3_server, report["artifacts"]["wacz"]))
    assert [r for r, _ in warc_records(members["archive/data.warc.gz"]) if r.rec_type == "resource"] == []
    assert "screenshots" not in json.loads(members["datapackage.json"])["browserhive:capture"]


FLOW_FORMATS = {"png": False, "webp": False, "html": False, "links": True, "mhtml": False, "wacz": True}


def _crawl_one(server: str, url: str, negotiate: bool) -> tuple[dict, list[str]]:
    from f.waggle import pipeline
    from f.waggle.crawl_host import HttpEndpoint, capture_host

    logs: list[str] = []
    with httpx.Client() as client:
        ext = pipeline.read_extensions(client, server) if negotiate else frozenset()  # none: a plain v12
        results = capture_host([HttpEndpoint(server, client, extensions=ext)], "h", [url], "c1",
                               formats=FLOW_FORMATS, signing=False, scripts=[], delay_ms=200, log=logs.append)
    assert len(results) == 1
    return results[0], logs


def test_crawl_host_asks_for_the_deadline_capture_where_advertised_and_does_not_retry(short_server, site):
    url = site.url("/page?flow")
    result, logs = _crawl_one(short_server, url, negotiate=True)
    assert result["status"] == "captured", result
    assert result["manifestSummary"]["status"] == "success" and result["manifestSummary"]["wacz"]
    assert site.hits["/page?flow"] == 1  # one capture, no retry
    assert any("captured incomplete (page-load-deadline)" in m and site.url("/hang.png") in m for m in logs), logs


def test_crawl_host_against_a_plain_v12_keeps_timeout_and_one_retry(short_server, site):
    url = site.url("/page?v12")
    result, logs = _crawl_one(short_server, url, negotiate=False)
    assert result["status"] == "failed" and result["failureClass"] == "transient", result
    assert result["skipReason"].startswith(f"timeout: page load exceeded {PAGE_LOAD_MS} ms"), result
    assert site.hits["/page?v12"] == 2  # the first attempt and one retry
    assert any(f"retrying {url} (timeout" in m for m in logs), logs
