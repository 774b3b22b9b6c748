"""Extension ``holdAfter`` of our capture server (issue 11, docs/capture-server.md extension 12),
against the real server, real Chromium and the loopback test site: a capture accepted while the
previous one still loads reaches the site only once that one sealed and the gap passed since its
truly last byte — a request the sealing page makes late moves the hold. Times are the
machine-wide monotonic clock the site logs with too; every bound is the contract's lower bound."""

from __future__ import annotations

import threading
import time
import uuid

import httpx

from tests.devstack.helpers import ONLY_WACZ

GAP_MS = 400
LATE_MS = 900  # the previous page's late request: well after its first byte + the gap
# The previous page settles at least 1.5 s after its load event, so it is still loading (not
# sealed) when its late request goes out and when the held capture arrives.
LONG_SETTLE = {"minMs": 1500, "maxMs": 4000, "quietMs": 200, "networkConcurrency": 0}


def _post(server: str, key: str | None, out: dict, **body) -> None:
    headers = {"Waggle-Capture-Key": key} if key else {}
    out["sent"] = time.monotonic()
    out["response"] = httpx.post(f"{server}/captures", json=body, headers=headers, timeout=150)
    out["answered"] = time.monotonic()


def _seal(server: str, key: str, out: dict) -> None:
    r = httpx.get(f"{server}/captures/seal", params={"key": key, "timeoutMs": 60_000}, timeout=90)
    out["at"], out["body"] = time.monotonic(), r.json()


def _start(fn, *args, **kw) -> tuple[threading.Thread, dict]:
    out: dict = {}
    t = threading.Thread(target=fn, args=(*args, out), kwargs=kw, daemon=True)
    t.start()
    return t, out


def _first(site, path: str, after: float) -> float:
    return min(t for p, t in list(site.arrivals) if p == path and t > after)


def test_status_advertises_hold_after(capture_server):
    assert "holdAfter" in httpx.get(f"{capture_server}/status").json()["extensions"]


def test_a_held_capture_waits_for_the_late_request_plus_the_gap(capture_server, test_site):
    """The held capture is accepted while the previous one loads (before its seal); the previous
    page's late request comes after the held navigation's first estimate (its first byte + the
    gap) and moves the release: the site feels every gap ≥ ``gapMs``."""
    t0 = time.monotonic()
    prev_key, next_key = f"p-{uuid.uuid4().hex[:12]}", f"n-{uuid.uuid4().hex[:12]}"
    sealer, sealed = _start(_seal, capture_server, prev_key)
    first, a = _start(_post, capture_server, prev_key, url=test_site.url(f"/late?ms={LATE_MS}"),
                      captureFormats=ONLY_WACZ, loadWait=LONG_SETTLE)
    time.sleep(0.3)  # the previous capture is accepted and loading
    second, b = _start(_post, capture_server, next_key, url=test_site.url("/other"), captureFormats=ONLY_WACZ,
                       holdAfter={"key": prev_key, "gapMs": GAP_MS})
    for t in (first, second, sealer):
        t.join(120)
    assert a["response"].status_code == 200, a["response"].text
    assert b["response"].status_code == 200, b["response"].text
    assert b["response"].json()["report"]["status"] == "success"
    assert b["sent"] < sealed["at"]  # started before the previous capture sealed
    late_doc = _first(test_site, "/late", t0)
    late_ping = _first(test_site, "/late-ping", t0)
    last_prev = max(t for p, t in list(test_site.responses) if p in ("/late", "/late-ping") and t > t0)
    other = _first(test_site, "/other", t0)
    # the set-up: the late request came after the hold's first estimate would have released
    assert late_ping - late_doc > GAP_MS / 1000
    # the site felt the gap from the previous page's truly last byte (its late request)
    assert other - last_prev >= GAP_MS / 1000, (other - last_prev)
    assert not [t for p, t in list(test_site.arrivals) if p in ("/late", "/late-ping") and t > other]


def test_a_held_capture_behind_a_sealed_one_waits_the_gap_from_its_last_byte(capture_server, test_site):
    """``holdAfter`` naming a capture that already ended: the gap runs from that page's last byte."""
    t0 = time.monotonic()
    key = f"done-{uuid.uuid4().hex[:12]}"
    _, a = _start(_post, capture_server, key, url=test_site.url("/other"), captureFormats=ONLY_WACZ)
    while "response" not in a:
        time.sleep(0.05)
    r = httpx.post(f"{capture_server}/captures", json={"url": test_site.url("/page"), "captureFormats": ONLY_WACZ,
                                                       "holdAfter": {"key": key, "gapMs": 1500}}, timeout=150)
    assert r.status_code == 200, r.text
    last_prev = max(t for p, t in list(test_site.responses) if p == "/other" and t > t0)
    assert _first(test_site, "/page", t0) - last_prev >= 1.5


def test_refusals(capture_server, test_site):
    """Unknown key → 409 (after waiting for it briefly); bad members and a shared session →
    400; a second capture held behind the same loading one → 429; nothing reaches the site."""
    body = {"url": test_site.url("/other"), "captureFormats": ONLY_WACZ}
    r = httpx.post(f"{capture_server}/captures", json={**body, "holdAfter": {"key": "never-seen", "gapMs": 100}})
    assert r.status_code == 409 and "never-seen" in r.json()["message"], r.text
    for bad in ({"key": "a b", "gapMs": 1}, {"key": "k", "gapMs": -1}, {"gapMs": 5}, {"key": "k", "gapMs": 60001}):
        r = httpx.post(f"{capture_server}/captures", json={**body, "holdAfter": bad})
        assert r.status_code == 400 and r.json()["fieldList"][0]["path"].startswith("/holdAfter"), r.text
    r = httpx.post(f"{capture_server}/captures", json={**body, "session": "shared",
                                                       "holdAfter": {"key": "k", "gapMs": 1}})
    assert r.status_code == 400 and "shared" in r.json()["message"]
    key = f"busy-{uuid.uuid4().hex[:12]}"
    first, a = _start(_post, capture_server, key, url=test_site.url("/late?ms=100"), captureFormats=ONLY_WACZ,
                      loadWait=LONG_SETTLE)
    time.sleep(0.3)
    second, b = _start(_post, capture_server, None, **body, holdAfter={"key": key, "gapMs": 100})
    time.sleep(0.3)
    third = httpx.post(f"{capture_server}/captures", json={**body, "holdAfter": {"key": key, "gapMs": 100}})
    plain = httpx.post(f"{capture_server}/captures", json=body)
    first.join(120)
    second.join(120)
    assert third.status_code == 429 and plain.status_code == 429
    assert a["response"].status_code == 200 and b["response"].status_code == 200
