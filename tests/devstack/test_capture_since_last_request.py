"""Capture answer extension ``sinceLastRequestMs`` (issue 11; docs/capture-server.md): the
milliseconds from the end of the page's last network request to the answer, on the server's
monotonic clock. The test site logs, on the same machine-wide monotonic clock, when each of its
responses began its last write — a lower bound of when the request ended — and the test notes
when the answer arrived — an upper bound of when it was sent."""

from __future__ import annotations

import time

import pytest

from tests.devstack.helpers import ONLY_WACZ, capture

QUIET_200 = {"minMs": 100, "maxMs": 2000, "quietMs": 200, "networkConcurrency": 0}


def _capture_timed(server: str, **body) -> tuple[dict, float]:
    r = capture(server, **body)
    answered = time.monotonic()
    assert r.status_code == 200, r.text
    return r.json(), answered


def _last_response(site, since: float) -> float:
    return max(t for _, t in list(site.responses) if t >= since)


@pytest.mark.parametrize("path", ["/poll", "/page", "/missing"])
def test_bounds_the_last_request_the_site_answered(capture_server, test_site, path):
    """Whatever the page (polling until the seal, quiet, or a 404), answer − field never lies
    before the last response the site wrote for this capture."""
    before = time.monotonic()
    body, answered = _capture_timed(capture_server, url=test_site.url(path), captureFormats=ONLY_WACZ,
                                    loadWait=QUIET_200)
    since = body["sinceLastRequestMs"]
    assert isinstance(since, int) and since >= 0
    # + documentMs: the site's time for the main document, which answered (decision 242)
    assert set(body) == {"taskId", "report", "manifest", "sinceLastRequestMs", "documentMs"}
    assert isinstance(body["documentMs"], int) and 0 <= body["documentMs"] <= (answered - before) * 1000
    assert answered - since / 1000 >= _last_response(test_site, before)


def test_quiet_page_reports_at_least_its_quiet_window(capture_server, test_site):
    """A page that settled on a 200 ms quiet window made no request in its last 200 ms before the
    formats, so the field is at least that (the server really measures, it does not say 0)."""
    body, _ = _capture_timed(capture_server, url=test_site.url("/other"), captureFormats=ONLY_WACZ,
                             loadWait=QUIET_200)
    assert body["report"]["settle"]["endedBy"] == "quiet"
    assert body["sinceLastRequestMs"] >= 200


def test_polling_page_is_measured_from_its_last_poll(capture_server, test_site):
    """A page polling every 20 ms until the network is sealed: the field covers only the work after
    the seal, so it is far below the capture's whole time, and no poll arrives after the answer."""
    before = time.monotonic()
    body, answered = _capture_timed(capture_server, url=test_site.url("/poll"), captureFormats=ONLY_WACZ,
                                    loadWait={"minMs": 300, "maxMs": 600, "quietMs": 200, "networkConcurrency": 0})
    since = body["sinceLastRequestMs"]
    assert since < body["report"]["captureProcessingTimeMs"]
    assert answered - since / 1000 >= _last_response(test_site, before)
    time.sleep(1.0)
    assert [t for p, t in list(test_site.arrivals) if p == "/ping" and t > answered + 0.5] == []


def test_absent_when_the_page_made_no_request(capture_server, test_site):
    """The first URL is denied by a URL policy: success without any request."""
    hits = sum(test_site.hits.values())
    body, _ = _capture_timed(capture_server, url=test_site.url("/other"), captureFormats=ONLY_WACZ,
                             urlPolicies=[{"pattern": "*/other*", "action": "deny"}])
    assert body["report"]["status"] == "success"
    assert sum(test_site.hits.values()) == hits
    assert "sinceLastRequestMs" not in body


def test_absent_when_the_address_is_refused(capture_server):
    body, _ = _capture_timed(capture_server, url="http://169.254.169.254/latest/meta-data/", captureFormats=ONLY_WACZ)
    assert body["report"]["status"] == "failed"
    assert "sinceLastRequestMs" not in body
