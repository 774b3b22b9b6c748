"""``Retry-After`` on a rate-limited main document (docs/capture-server.md extension 18, RFC 9110
§10.2.3), against the real capture server, real Chromium and a loopback site of its own that
answers ``429`` with ``Retry-After: 2``: a capture held behind it (``holdAfter``) reaches the site
only after Retry-After, though its ``backoffGapMs`` is shorter; the answers say ``retryAfterMs``;
and crawl_host through the real server sends nothing to the host before Retry-After has passed.
Times are the machine-wide monotonic clock the site logs with; bounds are the contract's lower
bounds."""

from __future__ import annotations

import threading
import time
import uuid
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler

import httpx
import pytest

from waggle_capture.retryafter import CAP_S, delay_s
from f.waggle import pipeline
from f.waggle.crawl_host import HttpEndpoint, capture_host
from tests.devstack.helpers import ONLY_WACZ
from tests.fixtures.loopback import LoopbackSite

RETRY_AFTER_S = 2
HTML = b"<!doctype html><title>slow down</title><p>too many requests"


@dataclass(frozen=True)
class Hit:
    path: str
    start: float  # request line read (time.monotonic())
    end: float  # response written


class RateLimitedSite(LoopbackSite):
    """Answers the first ``limited`` requests ``429`` + ``Retry-After: 2`` (every request when
    None), then ``200``; robots.txt 404. On 127.0.0.1, OS-chosen port; logs every request."""

    def __init__(self, limited: int | None = None) -> None:
        self.hits: list[Hit] = []
        site = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def parse_request(self) -> bool:
                self._start = time.monotonic()
                return super().parse_request()

            def log_message(self, *args) -> None:
                pass

            def do_GET(self) -> None:  # noqa: N802
                path = self.path.split("?", 1)[0]
                with site._lock:
                    answered = len([h for h in site.hits if h.path != "/robots.txt"]) + site._pending
                    site._pending += 1
                if path == "/robots.txt":
                    status, extra = 404, {}
                elif limited is None or answered < limited:
                    status, extra = 429, {"Retry-After": str(RETRY_AFTER_S)}
                else:
                    status, extra = 200, {}
                self.send_response(status)
                for k, v in {"Content-Type": "text/html", "Content-Length": str(len(HTML)), **extra}.items():
                    self.send_header(k, v)
                self.end_headers()
                # the answer's end, stamped before the body's write: that write releases the GIL,
                # and a stamp after it may come late under load (the client cannot have read the
                # last byte before this moment; tests/fixtures/logged_site.py does the same)
                end = time.monotonic()
                self.wfile.write(HTML)
                self.wfile.flush()
                with site._lock:
                    site._pending -= 1
                    site.hits.append(Hit(path, self._start, end))

        self._lock = threading.Lock()
        self._pending = 0
        super().__init__(Handler)

    def documents(self) -> list[Hit]:
        """The pages' own requests, in order (Chromium's ``/favicon.ico`` fetch is a page's too)."""
        return sorted((h for h in self.hits if h.path != "/favicon.ico"), key=lambda h: h.start)

    def waits(self) -> list[float]:
        """For each page after the first: its document's start − the end of the last answer
        before it (its first request: nothing of a capture goes out before its document)."""
        return [d.start - max(h.end for h in self.hits if h.start < d.start) for d in self.documents()[1:]]


@pytest.fixture
def limited_site():
    site = RateLimitedSite()
    yield site
    site.stop()


def _in_thread(fn, *args) -> tuple[threading.Thread, dict]:
    out: dict = {}

    def run() -> None:
        out["value"] = fn(*args)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t, out


def test_delay_seconds_and_http_dates():
    assert delay_s("2") == 2.0 and delay_s(" 10 ") == 10.0
    assert delay_s("Wed, 21 Oct 2015 07:28:00 GMT") == 0.0  # already past
    now = 1_700_000_000.0  # Tue, 14 Nov 2023 22:13:20 GMT
    assert delay_s("Tue, 14 Nov 2023 22:13:25 GMT", now) == 5.0
    assert delay_s("Tuesday, 14-Nov-23 22:13:25 GMT", now) == 5.0  # RFC 850
    assert delay_s("Tue Nov 14 22:13:25 2023", now) == 5.0  # asctime
    assert delay_s("99999") == CAP_S
    for bad in (None, "", "soon", "-1", "1.5"):
        assert delay_s(bad) is None, bad


def test_a_held_capture_waits_for_retry_after(capture_server, limited_site):
    """The previous page answers 429 + ``Retry-After: 2``; the capture held behind it asked for a
    0.3 s gap and a 0.6 s back-off, yet reaches the site only 2 s after that answer. The capture
    answer and the seal answer carry ``retryAfterMs: 2000``."""
    key = f"ra-{uuid.uuid4().hex[:12]}"
    sealer, sealed = _in_thread(lambda: httpx.get(f"{capture_server}/captures/seal",
                                                  params={"key": key, "timeoutMs": 60_000}, timeout=90).json())
    first, a = _in_thread(lambda: httpx.post(f"{capture_server}/captures", headers={"Waggle-Capture-Key": key},
                                             json={"url": f"{limited_site.url}/a", "captureFormats": ONLY_WACZ},
                                             timeout=150))
    time.sleep(0.3)  # accepted (loading, or already sealed: either way held behind it)
    b = httpx.post(f"{capture_server}/captures", timeout=150,
                   json={"url": f"{limited_site.url}/b", "captureFormats": ONLY_WACZ,
                         "holdAfter": {"key": key, "gapMs": 300, "backoffGapMs": 600}})
    first.join(120)
    sealer.join(120)
    assert a["value"].status_code == 200 and b.status_code == 200, (a["value"].text, b.text)
    answer = a["value"].json()
    assert answer["report"]["httpStatusCode"] == 429 and answer["retryAfterMs"] == RETRY_AFTER_S * 1000, answer
    assert sealed["value"]["sealed"] is True and sealed["value"]["httpStatusCode"] == 429
    assert sealed["value"]["retryAfterMs"] == RETRY_AFTER_S * 1000
    assert [h.path for h in limited_site.documents()] == ["/a", "/b"], limited_site.hits
    waits = limited_site.waits()
    assert waits[0] >= RETRY_AFTER_S, waits  # without Retry-After: the 0.6 s back-off


def test_crawl_host_sends_nothing_before_retry_after(capture_server):
    """The new-user trial through the real capture server: seeds a–c, a 300 ms delay, the first
    page answered 429 + ``Retry-After: 2`` (then 200). The next capture was held behind it
    (holdAfter, submitted before that answer came); no request of the host reaches the site
    before Retry-After has passed, and the host's gap is at least that for the rest of the level."""
    site = RateLimitedSite(limited=1)
    lines: list[str] = []
    try:
        with httpx.Client() as client:
            endpoints = [HttpEndpoint(capture_server, client, extensions=pipeline.read_extensions(client, capture_server))]
            urls = [f"{site.url}/{p}" for p in ("a", "b", "c")]
            results = capture_host(endpoints, "h", urls, "c1", formats=ONLY_WACZ, signing=False, scripts=[],
                                   delay_ms=300, log=lines.append)
    finally:
        site.stop()
    assert site.documents()[0].path == "/a"
    waits = site.waits()
    assert len(waits) >= 3, (site.hits, lines)
    assert all(w >= RETRY_AFTER_S for w in waits), (waits, lines)
    assert any("Retry-After 2000 ms" in line for line in lines), lines
    assert [r["status"] for r in results] == ["captured"] * 3, results  # /a retried after Retry-After
