"""The host's circuit breaker (f/waggle/breaker.py, decision 231): unit rules and through
crawl_host with fake capture endpoints (real timers at millisecond scale)."""

from __future__ import annotations

from f.waggle.breaker import BLOCKED_AFTER, HELD, IN_FLIGHT, HostBreaker, blocked_after, challenge_reason
from f.waggle.crawl_host import capture_host
from tests.flow.fakes import FakeEndpoint, capture_reply

FORMATS = {"png": False, "webp": False, "html": False, "links": True, "mhtml": False, "wacz": True}
CHALLENGE = {"vendor": "Cloudflare", "signature": "cloudflare-challenge", "status": 403}


def run(endpoint, urls, after=None, delay=0, log=None):
    return capture_host([endpoint], "h", urls, "c1", formats=FORMATS, signing=False, scripts=[],
                        delay_ms=delay, busy_jitter_ms=(1, 2), log=log or (lambda _m: None), blocked_after=after)


def ok(u, t):
    return capture_reply(u, t)


def http(status, challenge=None):
    def reply(u, t):
        body = capture_reply(u, t, status="http_error", error_type="http", http_status=status, links=None)
        if challenge is not None:
            body["report"]["errorDetails"]["challenge"] = {**challenge, "status": status}
        return body
    return reply


# -- the rules --------------------------------------------------------------------------------

def test_challenge_reason_names_the_vendor_and_needs_one() -> None:
    assert challenge_reason({"errorDetails": {"type": "http", "challenge": CHALLENGE}}) == \
        "challenge page: Cloudflare (cloudflare-challenge), HTTP 403"
    for report in ({}, {"errorDetails": {"type": "http"}}, {"errorDetails": {"challenge": {"vendor": ""}}},
                   {"errorDetails": {"challenge": "Cloudflare"}}, None, {"errorDetails": []}):
        assert challenge_reason(report) is None


def test_blocked_after_setting() -> None:
    assert blocked_after(None) == BLOCKED_AFTER == 3
    assert blocked_after(0) == 0 and blocked_after(7) == 7
    assert blocked_after(-1) == blocked_after(True) == blocked_after("5") == BLOCKED_AFTER


def test_the_streak_counts_blocked_statuses_in_a_row_only() -> None:
    b = HostBreaker(after=3, say=lambda _m: None)
    for status in (403, 503):
        b.observe({"status": "failed"}, status)
    b.observe({"status": "failed"}, 404)  # a 404 is the site's answer, not a block: the streak ends
    b.observe({"status": "failed"}, 429)
    b.observe({"status": "captured"}, None)  # so does a captured page
    b.observe({"status": "failed"}, 403)
    b.observe({"status": "failed"}, None)  # and a failure without a document (timeout)
    assert b.reason is None and b.held("x") is None
    results = [{"status": "failed", "skipReason": "http_error: HTTP 403 (HTTP 403)"} for _ in range(3)]
    for r, status in zip(results, (403, 429, 403)):
        b.observe(r, status)
    assert b.reason == "3 blocked answers in a row (HTTP 403, 429, 403)"
    assert [r["status"] for r in results] == ["failed", "failed", "blocked"]  # the last one tripped it
    assert results[2]["skipReason"].startswith("3 blocked answers in a row (HTTP 403, 429, 403); last: http_error")
    assert b.held("http://h/x") == {"url": "http://h/x", "status": "blocked", "skipReason": HELD + b.reason}


def test_zero_turns_the_status_fallback_off_but_not_signatures() -> None:
    b = HostBreaker(after=0, say=lambda _m: None)
    for _ in range(10):
        b.observe({"status": "failed"}, 403)
    assert b.reason is None
    b.observe({"status": "blocked", "skipReason": "challenge page: X (x), HTTP 403"}, 403)
    assert b.reason == "challenge page: X (x), HTTP 403"


# -- through crawl_host ---------------------------------------------------------------------------

def test_a_challenge_pauses_the_host_at_once_and_is_not_retried() -> None:
    said: list[str] = []
    e = FakeEndpoint("bh-1", [], responses=[ok, ok, http(503, CHALLENGE)])
    results = run(e, ["a", "b", "c", "d", "e"], log=said.append)
    assert [r["status"] for r in results] == ["captured", "captured", "blocked", "blocked", "blocked"]
    assert [r["url"] for r in e.requests] == ["a", "b", "c"]  # a 503 challenge is not retried; d, e never sent
    c = results[2]
    assert c["skipReason"] == "challenge page: Cloudflare (cloudflare-challenge), HTTP 503"
    assert c["failureClass"] == "policy" and "submittedAt" in c and "gapFrom" in c  # its gap still counts
    assert results[3] == {"url": "d", "status": "blocked", "skipReason": HELD + c["skipReason"]}
    assert any("host paused for the rest of the crawl" in m for m in said)


def test_blocked_statuses_in_a_row_pause_the_host_after_the_setting() -> None:
    e = FakeEndpoint("bh-1", [], responses=[ok, http(403), http(403), http(403)])
    results = run(e, ["a", "b", "c", "d", "e", "f"], after=2)
    assert [r["status"] for r in results] == ["captured", "failed", "blocked", "blocked", "blocked", "blocked"]
    assert [r["url"] for r in e.requests] == ["a", "b", "c"]
    assert results[3]["skipReason"] == HELD + "2 blocked answers in a row (HTTP 403, 403)"


def test_a_site_with_some_forbidden_pages_is_not_paused() -> None:
    e = FakeEndpoint("bh-1", [], responses=[ok, http(403), http(403), ok, http(403), http(403), ok])
    results = run(e, list("abcdefg"), after=3)
    assert "blocked" not in {r["status"] for r in results}
    assert len(e.requests) == 7


def test_the_gap_is_kept_up_to_the_tripping_page() -> None:
    e = FakeEndpoint("bh-1", [], responses=[ok, http(403, CHALLENGE)])
    results = run(e, ["a", "b", "c"], delay=150)
    assert [r["status"] for r in results] == ["captured", "blocked", "blocked"]
    assert e.times[1] - e.times[0] >= 0.145


def test_pages_in_flight_when_it_trips_are_blocked_too_and_say_why():
    """Decision 402 (a trial: p3/p4 were ``failed`` beside ``blocked`` p2/p5). Pipelined and held
    captures (our capture server, a short gap) are in flight when the streak's last answer trips
    the breaker: answered 403 too, they are ``blocked``, saying they were requested before the
    pause took effect; the pages never requested say the host is paused."""
    from tests.flow.test_pipeline import HoldingFake, Visit, crawl

    urls = list("abcdefgh")
    visits: list[Visit] = []
    e = HoldingFake("bh-1", visits, replies={u: http(403) for u in urls[1:]})
    results, logs = crawl([e], urls, 400, blocked_after=3)
    assert [r["status"] for r in results] == ["captured", "failed", "failed"] + ["blocked"] * 5, \
        [(r["url"], r["status"], r.get("skipReason")) for r in results]
    requested = {v.url for v in visits}
    tripped, *rest = results[3:]
    assert tripped["skipReason"].startswith("3 blocked answers in a row (HTTP 403, 403, 403); last: ")
    in_flight = [r for r in rest if r["url"] in requested]
    never = [r for r in rest if r["url"] not in requested]
    assert in_flight and never, requested  # both kinds happen here: the test holds the rule
    for r in in_flight:
        assert r["skipReason"].startswith(IN_FLIGHT + "3 blocked answers in a row (HTTP 403, 403, 403)"), r
        assert "the site answered: " in r["skipReason"] and "403" in r["skipReason"].rsplit("answered: ", 1)[1]
        assert "submittedAt" in r  # it was requested: its politeness evidence stays
    for r in never:
        assert r == {"url": r["url"], "status": "blocked", "skipReason": HELD + "3 blocked answers in a row (HTTP 403, 403, 403)"}
    assert urls.index(never[0]["url"]) > urls.index(in_flight[-1]["url"])  # the pause holds from the trip on


def test_after_the_trip_an_in_flight_page_that_answered_otherwise_keeps_its_outcome():
    b = HostBreaker(after=1, say=lambda _m: None)
    b.observe({"status": "failed", "skipReason": "http_error: HTTP 403"}, 403)
    captured, missing = {"status": "captured"}, {"status": "failed", "skipReason": "http_error: HTTP 404"}
    b.observe(captured, None)
    b.observe(missing, 404)
    assert captured == {"status": "captured"} and missing["status"] == "failed"
