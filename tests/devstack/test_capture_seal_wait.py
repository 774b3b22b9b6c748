"""Extensions ``sealWait`` and ``startAfterMs`` of our capture server (issue 11, BRIEF contracts
1–3; docs/capture-server.md extensions 8–9), against the real server, real Chromium and the
loopback test site. Times are the machine-wide monotonic clock the site logs with too; bounds
are lower bounds of the contract or generous ratios (the machine is loaded)."""

from __future__ import annotations

import threading
import time
import uuid

import httpx
import pytest

from tests.devstack.helpers import ONLY_WACZ

POLLING = {"minMs": 300, "maxMs": 600, "quietMs": 200, "networkConcurrency": 0}


def _post(server: str, key: str | None = None, **body) -> tuple[httpx.Response, float, float]:
    """``POST /captures``; returns (response, sent, answered) in monotonic seconds."""
    headers = {"Waggle-Capture-Key": key} if key else {}
    sent = time.monotonic()
    r = httpx.post(f"{server}/captures", json=body, headers=headers, timeout=150)
    return r, sent, time.monotonic()


def _seal(server: str, key: str, timeout_ms: int = 60_000) -> tuple[httpx.Response, float]:
    r = httpx.get(f"{server}/captures/seal", params={"key": key, "timeoutMs": timeout_ms},
                  timeout=timeout_ms / 1000 + 30)
    return r, time.monotonic()


def _in_thread(fn, *args, **kw) -> tuple[threading.Thread, dict]:
    out: dict = {}

    def run() -> None:
        out["value"] = fn(*args, **kw)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t, out


def test_status_advertises_the_extensions(capture_server):
    extensions = httpx.get(f"{capture_server}/status").json()["extensions"]
    assert {"sinceLastRequestMs", "sealWait", "startAfterMs"} <= set(extensions)


def test_seal_answers_before_the_capture_and_nothing_reaches_the_site_after_it(capture_server, test_site):
    """The seal wait is sent before the capture (its key unknown yet), answered while the
    capture is still packaging its WACZ, and a page polling every 20 ms sends nothing after it."""
    key = f"k-{uuid.uuid4().hex}"
    waiter, sealed = _in_thread(_seal, capture_server, key)
    time.sleep(0.2)  # the wait is in before the capture
    r, _, answered = _post(capture_server, key, url=test_site.url("/poll"), captureFormats=ONLY_WACZ,
                           loadWait=POLLING)
    waiter.join(30)
    assert r.status_code == 200, r.text
    seal, seal_at = sealed["value"]
    assert seal.status_code == 200, seal.text
    body = seal.json()
    assert body["key"] == key and body["sealed"] is True
    assert isinstance(body["sinceLastRequestMs"], int) and body["sinceLastRequestMs"] >= 0
    assert seal_at < answered
    # the seal's own bound holds: the last response the site wrote came before answer − field
    last_ping = max(t for p, t in list(test_site.responses) if p == "/ping")
    assert seal_at - body["sinceLastRequestMs"] / 1000 >= last_ping
    time.sleep(1.0)
    assert [t for p, t in list(test_site.arrivals) if p == "/ping" and t > seal_at] == []
    # and so the capture's own answer says at least as long ago as the seal did
    assert answered - r.json()["sinceLastRequestMs"] / 1000 >= last_ping


def test_a_late_wait_is_answered_at_once(capture_server, test_site):
    key = f"late-{uuid.uuid4().hex[:8]}"
    r, _, _ = _post(capture_server, key, url=test_site.url("/other"), captureFormats=ONLY_WACZ)
    assert r.status_code == 200, r.text
    t0 = time.monotonic()
    seal, at = _seal(capture_server, key, 20_000)
    assert seal.json()["sealed"] is True and seal.json()["sinceLastRequestMs"] >= 0
    assert at - t0 < 10  # not the 20 s timeout


def test_a_capture_without_requests_seals_with_null(capture_server):
    key = f"none-{uuid.uuid4().hex[:8]}"
    r, _, _ = _post(capture_server, key, url="http://169.254.169.254/latest/meta-data/", captureFormats=ONLY_WACZ)
    assert r.json()["report"]["status"] == "failed"
    seal, _ = _seal(capture_server, key, 5_000)
    # the capture's identity is named too (extension "robots"): its manifest, a failed report, is there
    assert seal.json() == {"key": key, "sealed": True, "sinceLastRequestMs": None, "taskId": r.json()["taskId"],
                           "manifestLocation": r.json()["manifest"]["location"]}


def test_an_unknown_key_times_out_unsealed(capture_server):
    t0 = time.monotonic()
    seal, at = _seal(capture_server, "never-submitted", 300)
    assert seal.status_code == 200
    assert seal.json() == {"key": "never-submitted", "sealed": False, "sinceLastRequestMs": None}
    assert at - t0 >= 0.3


def test_a_busy_refusal_registers_no_key(capture_server, test_site):
    """A capture refused with 429 does not exist: its key stays unknown."""
    first, _ = _in_thread(_post, capture_server, None, url=test_site.url("/slow?ms=1500"), captureFormats=ONLY_WACZ)
    deadline = time.monotonic() + 20
    while not httpx.get(f"{capture_server}/status").json()["busy"]:
        assert time.monotonic() < deadline
        time.sleep(0.02)
    r, _, _ = _post(capture_server, "refused-key", url=test_site.url("/other"), captureFormats=ONLY_WACZ)
    assert r.status_code == 429
    seal, _ = _seal(capture_server, "refused-key", 200)
    assert seal.json()["sealed"] is False
    first.join(60)


@pytest.mark.parametrize("params, fragment", [
    ({"key": "a b", "timeoutMs": "100"}, "Waggle-Capture-Key"),
    ({"key": "x" * 65, "timeoutMs": "100"}, "Waggle-Capture-Key"),
    ({"timeoutMs": "100"}, "key is required"),
    ({"key": "ok", "timeoutMs": "60001"}, "timeoutMs"),
    ({"key": "ok", "timeoutMs": "-1"}, "timeoutMs"),
    ({"key": "ok", "timeoutMs": "1.5"}, "timeoutMs"),
    ({"key": "ok"}, "timeoutMs"),
])
def test_bad_seal_waits_are_refused(capture_server, params, fragment):
    r = httpx.get(f"{capture_server}/captures/seal", params=params)
    assert r.status_code == 400 and r.headers["x-amzn-errortype"] == "ValidationException"
    assert fragment in r.json()["message"]


@pytest.mark.parametrize("key", ["", "a/b", "é", "x" * 65])
def test_a_bad_capture_key_is_refused_before_anything_starts(capture_server, test_site, key):
    hits = sum(test_site.hits.values())
    r = httpx.post(f"{capture_server}/captures", json={"url": test_site.url("/other"), "captureFormats": ONLY_WACZ},
                   headers={"Waggle-Capture-Key": key.encode("utf-8")}, timeout=30)
    assert r.status_code == 400 and r.headers["x-amzn-errortype"] == "ValidationException"
    assert "Waggle-Capture-Key" in r.json()["message"]
    assert sum(test_site.hits.values()) == hits


def _first_arrival(site, path: str, after: float) -> float:
    return min(t for p, t in list(site.arrivals) if p == path and t >= after)


def test_start_after_delays_the_first_request_not_less(capture_server, test_site):
    """The site's first request comes no earlier than receipt + startAfterMs (the request was
    sent before it was received), while the same capture without it starts well sooner."""
    r, sent, _ = _post(capture_server, url=test_site.url("/other"), captureFormats=ONLY_WACZ)
    assert r.status_code == 200, r.text
    plain_head = _first_arrival(test_site, "/other", sent) - sent
    r, sent, _ = _post(capture_server, url=test_site.url("/other"), captureFormats=ONLY_WACZ, startAfterMs=1500)
    assert r.status_code == 200 and r.json()["report"]["status"] == "success", r.text
    head = _first_arrival(test_site, "/other", sent) - sent
    assert head >= 1.5, head
    assert head - 1.5 < max(1.0, 3 * plain_head), (head, plain_head)  # prepared during the wait
    phases = httpx.get(f"{capture_server}/status").json()["process"]["lastPhasesMs"]
    assert phases["start-after"] >= 0.5 * 1500  # the wait is its own phase, after the session opened


def test_the_navigation_starts_early_and_the_proxy_holds_its_first_request(capture_server, test_site):
    """The navigation starts before ``startAfterMs`` ends (Chromium's own latency overlaps the
    wait); the context's proxy holds the connection, so the site still sees nothing earlier."""
    r, sent, _ = _post(capture_server, url=test_site.url("/other"), captureFormats=ONLY_WACZ, startAfterMs=1500)
    assert r.status_code == 200 and r.json()["report"]["status"] == "success", r.text
    assert _first_arrival(test_site, "/other", sent) - sent >= 1.5
    phases = httpx.get(f"{capture_server}/status").json()["process"]["lastPhasesMs"]
    released = sum(ms for name, ms in phases.items() if name in (
        "wait-idle", "check-address", "browser", "open-session", "start-after"))
    assert released < 1500, phases  # the navigation was released before the wait ended


def test_status_answers_during_the_start_wait(capture_server, test_site):
    """The wait does not block the server: GET /status answers (busy) while it lasts."""
    t, out = _in_thread(_post, capture_server, None, url=test_site.url("/other"), captureFormats=ONLY_WACZ,
                        startAfterMs=2000)
    time.sleep(0.8)
    t0 = time.monotonic()
    st = httpx.get(f"{capture_server}/status", timeout=10).json()
    assert st["busy"] is True and time.monotonic() - t0 < 0.5 * 2.0
    t.join(60)
    assert out["value"][0].status_code == 200


@pytest.mark.parametrize("value", [-1, 60001, 1.5, "100", True])
def test_bad_start_after_is_refused(capture_server, test_site, value):
    hits = sum(test_site.hits.values())
    r, _, _ = _post(capture_server, url=test_site.url("/other"), captureFormats=ONLY_WACZ, startAfterMs=value)
    assert r.status_code == 400 and r.headers["x-amzn-errortype"] == "ValidationException"
    assert r.json()["fieldList"][0]["path"] == "/startAfterMs"
    assert "/startAfterMs" in r.json()["message"]
    assert sum(test_site.hits.values()) == hits


def test_the_next_capture_loads_while_the_sealed_one_packages(capture_server, test_site):
    """After A's seal the browser is free: B is accepted and loads while A's WACZ upload (to a
    sink that takes 1.5 s) is still going; a third capture while B loads gets 429."""
    from tests.flow.fakes import HttpFake

    def slow_sink(req):
        if req.method == "PUT" and req.path.endswith(".wacz"):
            time.sleep(1.5)
        return 200, {}, {"location": f"sink://{req.path}"}

    sink = HttpFake(slow_sink)
    try:
        key = f"pkg-{uuid.uuid4().hex[:8]}"
        first, out = _in_thread(_post, capture_server, key, url=test_site.url("/other"), captureFormats=ONLY_WACZ,
                                artifactSink={"url": sink.url, "token": "t"})
        seal, sealed_at = _seal(capture_server, key, 30_000)
        assert seal.json()["sealed"] is True
        second, out2 = _in_thread(_post, capture_server, None, url=test_site.url("/slow?ms=800"),
                                  captureFormats=ONLY_WACZ)
        started = time.monotonic()
        while not any(p == "/slow" and t >= sealed_at for p, t in list(test_site.arrivals)):
            assert time.monotonic() - started < 10
            time.sleep(0.01)
        third, _, _ = _post(capture_server, None, url=test_site.url("/other"), captureFormats=ONLY_WACZ)
        first.join(60)
        second.join(60)
    finally:
        sink.close()
    a, _, a_answered = out["value"]
    b, _, _ = out2["value"]
    assert a.status_code == 200 and a.json()["report"]["status"] == "success", a.text
    assert b.status_code == 200 and b.json()["report"]["status"] == "success", b.text
    b_first = _first_arrival(test_site, "/slow", sealed_at)
    assert b_first < a_answered  # B's page loaded while A was still uploading
    assert third.status_code == 429  # B was loading: one capture loads at a time
