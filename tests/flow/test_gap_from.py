"""Where the host's gap runs from (issue 11 items 2 and 6, BRIEF contracts 1–2): from the page's
last request when the capture answer carries ``sinceLastRequestMs``, clamped to
[submission, answer]; from the answer when it does not (a real BrowserHive v12). Real timers,
ratios and generous bounds (the machine is loaded)."""

from __future__ import annotations

import time

import httpx
import pytest

from f.waggle.common import parse_iso
from f.waggle.crawl_host import HttpEndpoint, capture_host, gap_start, remaining_gap_s
from tests.flow.fakes import FakeEndpoint, HttpFake, capture_reply

FORMATS = {"png": False, "webp": False, "html": False, "links": True, "mhtml": False, "wacz": True}


def with_since(ms, **kw):
    return lambda u, t: {**capture_reply(u, t, **kw), "sinceLastRequestMs": ms}


def crawl(endpoints, urls, delay):
    return capture_host(endpoints, "h", urls, "c1", formats=FORMATS, signing=False, scripts=[], delay_ms=delay,
                        busy_jitter_ms=(1, 2), log=lambda _m: None)


def ms_between(a: str, b: str) -> float:
    return (parse_iso(b) - parse_iso(a)) * 1000


# -- the rule -------------------------------------------------------------------------------------

@pytest.mark.parametrize("body, expected", [
    ({"sinceLastRequestMs": 250}, 9.75),       # the page's last request ended 250 ms before the answer
    ({"sinceLastRequestMs": 0}, 10.0),
    ({"sinceLastRequestMs": 5000}, 8.0),        # claims a time before the submission: clamped to it
    ({"sinceLastRequestMs": -300}, 10.0),       # claims a time after the answer: clamped to it
    ({}, 10.0),                                 # a real BrowserHive v12: today's rule
    ({"sinceLastRequestMs": "250"}, 10.0),      # not an integer: as if absent
    ({"sinceLastRequestMs": 250.5}, 10.0),
    ({"sinceLastRequestMs": True}, 10.0),
    ("not json", 10.0),
])
def test_gap_start_clamped_to_submission_and_answer(body, expected):
    assert gap_start(body, submitted=8.0, received=10.0) == pytest.approx(expected)


def test_remaining_gap_is_never_negative():
    assert remaining_gap_s(500, gap_from=10.0, now=10.2) == pytest.approx(0.3)
    assert remaining_gap_s(500, gap_from=10.0, now=11.0) == 0.0


# -- PageResult gapFrom ---------------------------------------------------------------------------

def test_answer_with_the_field_reports_gap_from_before_finished():
    e = FakeEndpoint("bh-1", [], delay_s=0.3, responses=[with_since(200)])
    [r] = crawl([e], ["a"], 0)
    before_answer = ms_between(r["gapFrom"], r["finishedAt"])
    assert 195 <= before_answer <= 205 and r["submittedAt"] <= r["gapFrom"] <= r["finishedAt"]


def test_answer_without_the_field_gap_from_is_finished_at():
    e = FakeEndpoint("bh-1", [], delay_s=0.05)
    [r] = crawl([e], ["a"], 0)
    assert r["gapFrom"] == r["finishedAt"]


def test_a_field_before_the_submission_is_clamped_to_it():
    e = FakeEndpoint("bh-1", [], delay_s=0.1, responses=[with_since(60_000)])
    [r] = crawl([e], ["a"], 0)
    assert r["gapFrom"] == r["submittedAt"] < r["finishedAt"]


def test_a_field_after_the_answer_is_clamped_to_it():
    e = FakeEndpoint("bh-1", [], delay_s=0.05, responses=[with_since(-5000)])
    [r] = crawl([e], ["a"], 0)
    assert r["gapFrom"] == r["finishedAt"]


def test_failures_carry_gap_from_too():
    e = FakeEndpoint("bh-1", [], delay_s=0.1, responses=[with_since(80, status="http_error", error_type="http",
                                                                     http_status=404)])
    [r] = crawl([e], ["a"], 0)
    assert r["status"] == "failed" and 75 <= ms_between(r["gapFrom"], r["finishedAt"]) <= 85


# -- the sleep before the next capture and before a retry (real timers) ---------------------------

CAPTURE_S = 0.3


def waits(e: FakeEndpoint) -> list[float]:
    """Seconds from each answer (submission + CAPTURE_S) to the next submission."""
    return [b - (a + CAPTURE_S) for a, b in zip(e.times, e.times[1:])]


def test_next_capture_waits_the_gap_from_the_last_request_not_from_the_answer():
    tail_ms, gap_ms = 250, 400
    with_field = FakeEndpoint("bh-1", [], delay_s=CAPTURE_S, responses=[with_since(tail_ms)])
    without = FakeEndpoint("bh-2", [], delay_s=CAPTURE_S)
    crawl([with_field], ["a", "b", "c"], gap_ms)
    crawl([without], ["a", "b", "c"], gap_ms)
    for w in waits(with_field):
        # from the last request (answer − 250 ms) the site feels the whole gap, and not much more
        felt = w + tail_ms / 1000
        assert 0.395 <= felt < 0.4 * 1.5, felt
    assert all(0.395 <= w < 0.6 for w in waits(without))  # v12: the gap runs from the answer
    assert sum(waits(with_field)) / sum(waits(without)) < 0.7  # (400 − 250) / 400 ≈ 0.4 in theory


def test_a_tail_longer_than_the_gap_means_no_wait():
    e = FakeEndpoint("bh-1", [], delay_s=CAPTURE_S, responses=[with_since(280)])
    crawl([e], ["a", "b"], 200)
    assert waits(e)[0] < 0.1  # the gap (200 ms) had passed since the last request when the answer came


def test_a_retry_waits_the_gap_from_the_last_request():
    e = FakeEndpoint("bh-1", [], delay_s=CAPTURE_S, responses=[
        with_since(250, status="failed", error_type="connection"), with_since(250)])
    [r] = crawl([e], ["a"], 400)
    [w] = waits(e)
    assert r["status"] == "captured" and 0.395 <= w + 0.25 < 0.6


# -- over real HTTP against a loopback capture fake -------------------------------------------------

def test_server_felt_gap_over_http_is_the_delay_from_the_last_request():
    """The fake's page makes its last request 50 ms after the submission arrives and answers
    250 ms later with ``sinceLastRequestMs: 250``; the next submission must arrive ≥ the gap
    after that last request — and well before gap + tail (the old rule)."""
    last_request: list[float] = []

    def handler(req):
        last_request.append(time.monotonic() + 0.05)
        time.sleep(0.3)
        return 200, {}, {**capture_reply(req.json()["url"], "x"), "sinceLastRequestMs": 250}

    fake = HttpFake(handler)
    try:
        with httpx.Client() as client:
            endpoint = HttpEndpoint(fake.url, client)
            results = capture_host([endpoint], "h", ["a", "b", "c", "d"], "c1", formats=FORMATS, signing=False,
                                   scripts=[], delay_ms=500, busy_jitter_ms=(1, 2), log=lambda _m: None)
    finally:
        fake.close()
    arrivals = [r.at for r in fake.requests]
    felt = [b - a for a, b in zip(last_request, arrivals[1:])]
    assert [r["status"] for r in results] == ["captured"] * 4
    assert all(f >= 0.5 for f in felt), felt                      # never below the delay
    assert all(f / 0.5 < 1.3 for f in felt), felt                 # the old rule gave ≥ 1.5 (500 + 250 ms)
