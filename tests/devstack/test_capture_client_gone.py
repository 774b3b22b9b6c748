"""A client that goes away while its capture waits for its turn (waggle_capture/abandon.py,
docs/capture-server.md "When the client disconnects"), against the real server, real Chromium
and the loopback test site: the capture ends without its page ever being requested, its seal
answers with nothing sent, and the server takes the next capture normally."""

from __future__ import annotations

import json
import threading
import socket
import time
import uuid
from urllib.parse import urlsplit

import httpx

from tests.devstack.helpers import ONLY_WACZ, faults

START_AFTER_MS = 1500


def _post_then_close(server: str, key: str, body: dict, after_s: float) -> float:
    """POST /captures on a raw connection, close it ``after_s`` later without reading; returns
    the monotonic time the request was sent."""
    parts = urlsplit(server)
    data = json.dumps(body).encode()
    head = (f"POST /captures HTTP/1.1\r\nHost: {parts.netloc}\r\nContent-Type: application/json\r\n"
            f"Accept: application/json\r\nWaggle-Capture-Key: {key}\r\nContent-Length: {len(data)}\r\n\r\n")
    with socket.create_connection((parts.hostname, parts.port), timeout=10) as s:
        s.sendall(head.encode() + data)
        sent = time.monotonic()
        time.sleep(after_s)  # the client's life, not an assertion: the capture is still waiting
    return sent


def test_a_capture_whose_client_went_away_before_its_turn_sends_nothing(capture_server, test_site):
    path = f"/gone-{uuid.uuid4().hex[:12]}"
    key = f"g-{uuid.uuid4().hex[:12]}"
    sent = _post_then_close(capture_server, key, {
        "url": test_site.url(path), "captureFormats": ONLY_WACZ, "startAfterMs": START_AFTER_MS}, 0.3)
    seal = httpx.get(f"{capture_server}/captures/seal", params={"key": key, "timeoutMs": 30_000}, timeout=60).json()
    assert seal["sealed"] is True

    # The server is free at once: the next capture is accepted (no 429) and succeeds.
    nxt = httpx.post(f"{capture_server}/captures", json={"url": test_site.url("/other"), "captureFormats": ONLY_WACZ},
                     timeout=150)
    assert nxt.status_code == 200, nxt.text
    assert nxt.json()["report"]["status"] == "success"

    # Past the moment the abandoned capture's page would have gone out, the site never saw it.
    time.sleep(max(0.0, sent + START_AFTER_MS / 1000 + 0.5 - time.monotonic()))
    assert test_site.hits[path] == 0
    assert any(p == "/other" and t > sent for p, t in list(test_site.arrivals))


LONG_SETTLE = {"minMs": 1500, "maxMs": 4000, "quietMs": 200, "networkConcurrency": 0}


def test_a_held_capture_whose_client_went_away_sends_nothing(capture_server, test_site):
    """``holdAfter``: the held capture's client goes away while the previous capture still loads;
    the previous one finishes normally, the held page is never requested."""
    prev_key, held_key = f"p-{uuid.uuid4().hex[:12]}", f"h-{uuid.uuid4().hex[:12]}"
    path = f"/gone-{uuid.uuid4().hex[:12]}"
    prev: dict = {}

    def first() -> None:
        prev["response"] = httpx.post(f"{capture_server}/captures", headers={"Waggle-Capture-Key": prev_key},
                                      json={"url": test_site.url("/late?ms=300"), "captureFormats": ONLY_WACZ,
                                            "loadWait": LONG_SETTLE}, timeout=150)

    t = threading.Thread(target=first, daemon=True)
    t.start()
    time.sleep(0.3)  # the previous capture is accepted and loading (its settle lasts ≥ 1.5 s; holdAfter
    # waits up to 2 s for its acceptance anyway)
    _post_then_close(capture_server, held_key, {
        "url": test_site.url(path), "captureFormats": ONLY_WACZ, "holdAfter": {"key": prev_key, "gapMs": 400}}, 0.3)
    seal = httpx.get(f"{capture_server}/captures/seal", params={"key": held_key, "timeoutMs": 30_000},
                     timeout=60).json()
    assert seal["sealed"] is True
    t.join(150)
    assert prev["response"].status_code == 200 and prev["response"].json()["report"]["status"] == "success"
    # The next capture runs normally; by its answer the held page's release (the previous seal +
    # 0.4 s) is long past, and the site never saw it.
    nxt = httpx.post(f"{capture_server}/captures", json={"url": test_site.url("/other"), "captureFormats": ONLY_WACZ},
                     timeout=150)
    assert nxt.status_code == 200 and nxt.json()["report"]["status"] == "success"
    assert test_site.hits[path] == 0


def test_a_client_gone_before_the_context_opened_stops_it_there(capture_server, test_site):
    """No hold at all (no ``startAfterMs``): the client leaves while the capture is still before
    its context (a slow start, fault knob); it ends as its proxy opens, before any navigation."""
    path = f"/gone-{uuid.uuid4().hex[:12]}"
    key = f"s-{uuid.uuid4().hex[:12]}"
    with faults(capture_server, slow_ms=800):
        _post_then_close(capture_server, key, {"url": test_site.url(path), "captureFormats": ONLY_WACZ}, 0.3)
        seal = httpx.get(f"{capture_server}/captures/seal", params={"key": key, "timeoutMs": 30_000},
                         timeout=60).json()
    assert seal["sealed"] is True
    nxt = httpx.post(f"{capture_server}/captures", json={"url": test_site.url("/other"), "captureFormats": ONLY_WACZ},
                     timeout=150)
    assert nxt.status_code == 200 and nxt.json()["report"]["status"] == "success"
    assert test_site.hits[path] == 0  # by the next capture's answer it would long have been requested
