"""Progress events from crawl_host (issue 15): the hook around each capture, and the poster that
sends them to the ledger — which must never fail or slow a capture when the ledger is down."""

from __future__ import annotations

import socket
import time

from f.waggle.common import VAR_API_URL, VAR_TOKEN
from f.waggle.crawl_host import capture_host
from f.waggle.progress import LINGER_S, poster
from tests.flow.fakes import FakeEndpoint, HttpFake, hang

FORMATS = {"png": False, "webp": False, "html": False, "links": True, "mhtml": False, "wacz": True}


def _capture(urls, on_page, fail_on=(), log=None):
    endpoints = [FakeEndpoint("bh-1", [], fail_on=tuple(fail_on))]
    return capture_host(endpoints, "m", urls, "c1", formats=FORMATS, signing=False, scripts=[], delay_ms=0,
                        busy_jitter_ms=(1, 2), log=log or (lambda _m: None), on_page=on_page)


def test_the_hook_sees_each_capture_start_and_end_in_order():
    events = []
    results = _capture(["https://m/a", "https://m/b"], lambda *e: events.append(e), fail_on=("https://m/b",))
    assert [e[:2] for e in events] == [("https://m/a", "started"), ("https://m/a", "done"),
                                        ("https://m/b", "started"), ("https://m/b", "done")]
    assert events[1][2] is results[0] and events[3][2]["status"] == "failed"


def test_a_failing_hook_never_fails_a_capture():
    lines = []

    def broken(*_event):
        raise RuntimeError("boom")

    results = _capture(["https://m/a"], broken, log=lines.append)
    assert [r["status"] for r in results] == ["captured"]
    assert any("progress hook failed (RuntimeError: boom)" in ln for ln in lines)


def _vars(api_url):
    return lambda path: {VAR_API_URL: api_url, VAR_TOKEN: "flow-token"}[path]


def _ledger(req):
    """Today's ledger: one outcome per event of a batch."""
    body = req.json()
    if "events" in body:
        return 200, {}, {"results": [{"recorded": True} for _ in body["events"]]}
    return 200, {}, {"recorded": True}


def _older(known: set[str]):
    """A ledger that refuses fields it does not know, each named, as a real one does."""
    def answer(req):
        body = req.json()
        extra = sorted(set(body) - known)
        why = "; ".join(f"unknown field {name}" for name in extra)
        return (400, {}, {"error": why}) if extra else (200, {}, {"recorded": True})
    return answer


def test_the_poster_sends_the_events_with_the_flows_token_in_order():
    ledger = HttpFake(_ledger)
    try:
        post = poster("c-1", read=_vars(ledger.url + "/"), log=lambda _m: None)
        post("https://m/a", "started")
        post("https://m/a", "done", {"status": "captured"})
        post("https://m/b", "done", {"status": "failed", "skipReason": "x"})
        post.close()
        assert [(r.method, r.path, r.headers["authorization"]) for r in ledger.requests] == \
            [("POST", "/api/crawls/c-1/progress", "Bearer flow-token")]
        assert ledger.requests[0].json() == {"events": [  # queued together: one request
            {"url": "https://m/a", "phase": "started"},
            {"url": "https://m/a", "phase": "done", "status": "captured"},
            {"url": "https://m/b", "phase": "done", "status": "failed"}]}
        assert (post.sent, post.failed) == (3, 0)
    finally:
        ledger.close()


def test_events_apart_go_alone_and_a_batch_waits_at_most_the_linger():
    ledger = HttpFake(_ledger)
    try:
        post = poster("c-1", read=_vars(ledger.url), log=lambda _m: None)
        post("https://m/a", "started")
        time.sleep(LINGER_S * 3)
        t0 = time.monotonic()
        post("https://m/a", "done", {"status": "captured"})
        while not post.sent == 2 and time.monotonic() - t0 < 5:
            time.sleep(0.01)
        waited = time.monotonic() - t0
        post("https://m/b", "started")
        post.close()
        assert [r.json() for r in ledger.requests] == [
            {"url": "https://m/a", "phase": "started"},
            {"url": "https://m/a", "phase": "done", "status": "captured"},
            {"url": "https://m/b", "phase": "started"}]
        assert waited < LINGER_S + 1.0, waited  # close() sends what is queued without lingering
    finally:
        ledger.close()


def test_a_refused_event_in_a_batch_is_counted_and_logged_alone():
    def answer(req):
        events = req.json()["events"]
        return 200, {}, {"results": [{"recorded": True}, {"recorded": False, "status": 409, "error": "not pending"}]
                         [:len(events)]}

    ledger = HttpFake(answer)
    lines: list[str] = []
    try:
        post = poster("c-1", read=_vars(ledger.url), log=lines.append)
        post("https://m/a", "started")
        post("https://m/b", "started")
        post.close()
        assert (post.sent, post.failed) == (1, 1)
        assert any("HTTP 409 not pending" in ln for ln in lines), lines
    finally:
        ledger.close()


def test_an_older_ledger_without_batches_gets_one_request_per_event():
    ledger = HttpFake(_older({"url", "phase", "status", "taskId", "manifestLocation", "manifestSummary", "links"}))
    lines: list[str] = []
    try:
        post = poster("c-1", read=_vars(ledger.url), log=lines.append)
        for url in ("https://m/a", "https://m/b"):
            post(url, "started")
        time.sleep(LINGER_S * 3)
        for url in ("https://m/c", "https://m/d"):
            post(url, "started")
        post.close()
        sent = [r.json() for r in ledger.requests]
        assert sent[0] == {"events": [{"url": "https://m/a", "phase": "started"}, {"url": "https://m/b", "phase": "started"}]}
        assert sent[1:] == [{"url": f"https://m/{x}", "phase": "started"} for x in "abcd"]  # never batched again
        assert (post.sent, post.failed) == (4, 0) and any("no batched" in ln for ln in lines)
    finally:
        ledger.close()


def test_a_ledger_down_or_hanging_costs_the_capture_nothing_and_is_logged():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    closed = f"http://127.0.0.1:{s.getsockname()[1]}"
    s.close()  # nothing listens there
    hanging = HttpFake(lambda req: hang(10))
    try:
        for api_url in (closed, hanging.url):
            lines = []
            post = poster("c-1", read=_vars(api_url), log=lines.append)
            t0 = time.monotonic()
            results = _capture([f"https://m/{i}" for i in range(3)], post)
            capture_s = time.monotonic() - t0
            post.close()
            assert [r["status"] for r in results] == ["captured"] * 3
            assert capture_s < 1.0, f"captures waited for the poster ({capture_s:.2f} s)"
            assert lines and "progress event not recorded" in lines[0], lines
            assert len([ln for ln in lines if "not recorded (" in ln]) <= 3  # no log flood
    finally:
        hanging.close()


def test_unreadable_variables_turn_progress_off_without_failing():
    lines = []

    def missing(path):
        raise RuntimeError(f"{path}: 404")

    post = poster("c-1", read=missing, log=lines.append)
    post("https://m/a", "started")
    post.close()
    assert lines == [f"progress events off: {VAR_API_URL}: 404"]


CAPTURE = {"status": "captured", "taskId": "0193b6a1-3c1d-7a2e-9f00-1234567890ab", "correlationId": "c-1",
           "manifestLocation": "s3://b/t.result.json", "manifestSummary": {"status": "success", "wacz": "s3://b/t.wacz"},
           "links": [{"href": "https://m/x"}]}


def test_a_captured_pages_done_event_carries_its_capture():
    ledger = HttpFake(_ledger)
    try:
        post = poster("c-1", read=_vars(ledger.url), log=lambda _m: None)
        post("https://m/a", "done", CAPTURE)
        post("https://m/b", "done", {**CAPTURE, "status": "failed"})  # a failed capture's task is not sent
        post.close()
        assert [r.json() for r in ledger.requests] == [{"events": [
            {"url": "https://m/a", "phase": "done", "status": "captured", "taskId": CAPTURE["taskId"],
             "manifestLocation": "s3://b/t.result.json", "manifestSummary": CAPTURE["manifestSummary"],
             "links": CAPTURE["links"]},
            {"url": "https://m/b", "phase": "done", "status": "failed"}]}]
    finally:
        ledger.close()


def _two_captures_sent_to(answer) -> tuple[list[dict], list[str], object]:
    """The requests of two captured pages' ``done`` events to a ledger answering ``answer``."""
    ledger = HttpFake(answer)
    lines: list[str] = []
    try:
        post = poster("c-1", read=_vars(ledger.url), log=lines.append)
        post("https://m/a", "done", CAPTURE)
        time.sleep(LINGER_S * 3)  # sent alone: no batch
        post("https://m/b", "done", CAPTURE)
        post.close()
        return [r.json() for r in ledger.requests], lines, post
    finally:
        ledger.close()


def test_an_older_ledger_refusing_the_capture_fields_gets_the_events_without_them():
    sent, lines, post = _two_captures_sent_to(_older({"url", "phase", "status"}))
    assert sent == [
        {"url": "https://m/a", "phase": "done", "status": "captured", "taskId": CAPTURE["taskId"],
         "manifestLocation": "s3://b/t.result.json", "manifestSummary": CAPTURE["manifestSummary"],
         "links": CAPTURE["links"]},
        {"url": "https://m/a", "phase": "done", "status": "captured"},
        {"url": "https://m/b", "phase": "done", "status": "captured"}]  # not tried again
    assert post.failed == 0 and any("older ledger" in ln for ln in lines)


def test_a_round_20_ledger_refusing_links_keeps_the_capture_fields():
    round20 = {"url", "phase", "status", "taskId", "manifestLocation", "manifestSummary"}
    sent, lines, post = _two_captures_sent_to(_older(round20))
    capture = {"status": "captured", "taskId": CAPTURE["taskId"], "manifestLocation": "s3://b/t.result.json",
               "manifestSummary": CAPTURE["manifestSummary"]}
    assert sent == [
        {"url": "https://m/a", "phase": "done", **capture, "links": CAPTURE["links"]},
        {"url": "https://m/a", "phase": "done", **capture},
        {"url": "https://m/b", "phase": "done", **capture}]  # links not tried again
    assert post.failed == 0 and any("no links" in ln for ln in lines)
