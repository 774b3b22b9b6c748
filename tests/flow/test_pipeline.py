"""Pipelined captures of one host (issue 11; f/waggle/pipeline.py; BRIEF contracts 1–4): the
pure rules, and the schedule against in-process endpoints that implement the extensions (the real
capture server and Chromium: tests/devstack/test_crawl_host_pipeline.py, tests/e2e/test_felt_gaps.py).

:class:`SealingFake` plays a capture server with one browser: a capture's navigation starts at
receipt + ``startAfterMs``, its page's last request ends ``LAST_S`` later, its network is sealed
``SEAL_S`` after the navigation (``GET /captures/seal`` answers then) and the answer comes
``ANSWER_S`` after it; 429 while busy — until the answer, or (``free_at_seal``, as our capture
server) until the seal. Real timers; bounds are ratios of the delay."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

import pytest

from f.waggle import pipeline
from f.waggle.crawl_host import Answer, capture_host, clock
from tests.flow.fakes import capture_reply

FORMATS = {"png": False, "webp": False, "html": False, "links": True, "mhtml": False, "wacz": True}
LAST_S, SEAL_S, ANSWER_S = 0.05, 0.15, 0.6
BOTH = frozenset({pipeline.EXT_SINCE, pipeline.EXT_SEAL, pipeline.EXT_START})


@dataclass
class Visit:
    """One capture as the 'site' and the server saw it (time.monotonic() s)."""

    url: str
    received: float
    navigated: float
    last: float
    answered: float = 0.0


class SealingFake:
    def __init__(self, target: str, visits: list[Visit], *, extensions: frozenset[str] = BOTH,
                 seal_fails: bool = False, replies: dict | None = None, free_at_seal: bool = False) -> None:
        self.target, self.visits, self.extensions = target, visits, extensions
        self.free_at_seal = free_at_seal
        self.seal_fails, self.replies = seal_fails, dict(replies or {})
        self.requests: list[tuple[dict, dict | None]] = []
        self._busy = threading.Lock()
        self._seals: dict[str, tuple[threading.Event, list]] = {}
        self._guard = threading.Lock()

    def _entry(self, key: str) -> tuple[threading.Event, list]:
        with self._guard:
            return self._seals.setdefault(key, (threading.Event(), []))

    def capture(self, request: dict, headers: dict | None = None) -> Answer:
        if not self._busy.acquire(blocking=False):
            return Answer(429, "Busy", {"message": "a capture is already running on this browser"})
        held = [True]

        def free() -> None:
            if held[0]:
                held[0] = False
                self._busy.release()

        try:
            received = time.monotonic()
            self.requests.append((request, headers))
            key = (headers or {}).get(pipeline.KEY_HEADER)
            navigated = received + request.get("startAfterMs", 0) / 1000
            visit = Visit(request["url"], received, navigated, navigated + LAST_S)
            self.visits.append(visit)
            time.sleep(max(0.0, navigated + SEAL_S - time.monotonic()))
            if key:
                event, holder = self._entry(key)
                holder.append(visit)
                event.set()
            if self.free_at_seal:
                free()
            time.sleep(max(0.0, navigated + ANSWER_S - time.monotonic()))
            reply = self.replies.pop(request["url"], None)
            body = reply(request["url"], self.target) if reply else capture_reply(request["url"], self.target)
            visit.answered = time.monotonic()
            return Answer(200, None, {**body, "sinceLastRequestMs": int((visit.answered - visit.last) * 1000)})
        finally:
            free()

    def seal(self, key: str, timeout_ms: int) -> tuple[dict, float] | None:
        if self.seal_fails:
            return None
        event, holder = self._entry(key)
        if not event.wait(timeout_ms / 1000):
            return {"key": key, "sealed": False, "sinceLastRequestMs": None}, clock()
        since = int((time.monotonic() - holder[0].last) * 1000)
        return {"key": key, "sealed": True, "sinceLastRequestMs": since}, clock()


def crawl(endpoints, urls, delay, **kw):
    logs: list[str] = []
    results = capture_host(endpoints, "h", urls, "c1", formats=FORMATS, signing=False, scripts=[], delay_ms=delay,
                           busy_jitter_ms=(20, 40), log=logs.append, **kw)
    return results, logs


def felt(visits: list[Visit]) -> list[float]:
    ordered = sorted(visits, key=lambda v: v.navigated)
    return [b.navigated - a.last for a, b in zip(ordered, ordered[1:])]


def overlapping(visits: list[Visit]) -> int:
    """The most captures in flight (received → answered) at one moment."""
    edges = sorted([(v.received, 1) for v in visits] + [(v.answered, -1) for v in visits])
    most = now = 0
    for _, step in edges:
        now += step
        most = max(most, now)
    return most


def submitted_before_previous_answer(results: list[dict]) -> int:
    return sum(b["submittedAt"] < a["finishedAt"] for a, b in zip(results, results[1:]))


# -- the pure rules ---------------------------------------------------------------------------------

@pytest.mark.parametrize("gap, expected", [
    (0, {"quietMs": 300, "minMs": 300}),        # the floor: fidelity for slow pages
    (400, {"quietMs": 300, "minMs": 300}),
    (500, {"quietMs": 300, "minMs": 300}),
    (800, {"quietMs": 600, "minMs": 600}),
    (1199, {"quietMs": 999, "minMs": 999}),
    (1200, None),                               # a long gap keeps the server's settle
    (2000, None),
    (20000, None),
])
def test_settle_follows_the_gap(gap, expected):
    assert pipeline.settle_for_gap(gap) == expected


def test_load_wait_is_sent_by_the_gap_rule():
    visits: list[Visit] = []
    e = SealingFake("bh-1", visits, extensions=frozenset())
    crawl([e], ["a"], 500)
    crawl([e], ["b"], 2000)
    assert e.requests[0][0]["loadWait"] == {"quietMs": 300, "minMs": 300}
    assert "loadWait" not in e.requests[1][0]


def test_seal_gap_from_is_clamped_like_the_answer():
    from f.waggle.crawl_host import gap_start
    assert gap_start({"key": "k", "sealed": True, "sinceLastRequestMs": 200}, 8.0, 10.0) == pytest.approx(9.8)
    assert gap_start({"key": "k", "sealed": True, "sinceLastRequestMs": 5000}, 8.0, 10.0) == 8.0
    assert gap_start({"key": "k", "sealed": True, "sinceLastRequestMs": None}, 8.0, 10.0) == 10.0


def test_keyed_sends_start_after_only_where_advertised():
    sent: list = []

    class Rec:
        def __init__(self, ext):
            self.target, self.extensions = "x", ext

        def capture(self, request, headers=None):
            sent.append((request, headers, time.monotonic()))

    tracker = pipeline.Tracker()
    gap_end = clock() + 0.3
    t0 = time.monotonic()
    pipeline.Keyed(Rec(BOTH), tracker, lambda: gap_end, clock, time.sleep).capture({"url": "a"})
    request, headers, at = sent[-1]
    assert 200 < request["startAfterMs"] <= 300 and headers == {pipeline.KEY_HEADER: tracker.key}
    assert at - t0 < 0.15  # submitted at once: the server waits
    pipeline.Keyed(Rec(frozenset({pipeline.EXT_SEAL})), tracker, lambda: gap_end, clock, time.sleep).capture({"url": "b"})
    request, headers, at = sent[-1]
    assert "startAfterMs" not in request and at - t0 >= 0.29  # slept the rest of the gap instead
    pipeline.Keyed(Rec(frozenset()), tracker, lambda: None, clock, time.sleep).capture({"url": "c"})
    assert sent[-1][:2] == ({"url": "c"}, None)


def test_seal_before_formats_only_where_advertised_and_the_gap_is_short():
    """``sealBeforeFormats`` goes with the short-gap ``loadWait`` to an endpoint that lists it;
    never to one that does not (a real BrowserHive v12 keeps today's request), nor for a long gap."""
    visits: list[Visit] = []
    first = BOTH | {pipeline.EXT_SEAL_FIRST}
    for ext, delay, expected in [(first, 500, True), (first, 2000, None), (BOTH, 500, None),
                                 (frozenset(), 500, None)]:
        e = SealingFake("bh-1", visits, extensions=ext)
        crawl([e], ["a"], delay)
        assert e.requests[-1][0].get(pipeline.EXT_SEAL_FIRST) is expected, (ext, delay)


def test_requests_refused_after_the_seal_are_logged():
    from f.waggle.crawl_host import judge_answer
    body = capture_reply("http://h/a", "bh-1")
    logs: list[str] = []
    judge_answer("http://h/a", "c1", body, (1.0, 2.0, 1.5), logs.append)
    assert logs == []
    body["report"]["afterSeal"] = {"refused": 2, "urls": ["http://h/lazy.png", "http://h/x"]}
    judge_answer("http://h/a", "c1", body, (1.0, 2.0, 1.5), logs.append)
    assert logs == ["http://h/a: 2 request(s) after the seal refused, not archived: http://h/lazy.png http://h/x"]


# -- the schedule -----------------------------------------------------------------------------------

def test_two_endpoints_pipeline_and_the_site_feels_the_delay():
    visits: list[Visit] = []
    eps = [SealingFake("bh-1", visits), SealingFake("bh-2", visits)]
    results, _ = crawl(eps, ["a", "b", "c", "d", "e"], 400)
    assert [r["url"] for r in results] == ["a", "b", "c", "d", "e"]
    assert [r["status"] for r in results] == ["captured"] * 5
    gaps = felt(visits)
    assert all(g >= 0.4 for g in gaps), gaps
    assert max(gaps) < 0.4 * 1.5, gaps  # not delay + the answer's tail (0.55 s) as when sequential
    assert submitted_before_previous_answer(results) >= 3
    assert overlapping(visits) == 2
    assert all(e.requests[0][0].get("startAfterMs", 0) <= 400 for e in eps)
    for r in results:  # the seal's gapFrom was reported, before the answer
        assert r["submittedAt"] <= r["gapFrom"] < r["finishedAt"]


def test_one_endpoint_free_at_the_seal_pipelines_too():
    """Our capture server takes the next capture once the previous one sealed: one browser is enough."""
    visits: list[Visit] = []
    e = SealingFake("bh-1", visits, free_at_seal=True)
    results, _ = crawl([e], ["a", "b", "c", "d"], 400)
    assert [r["status"] for r in results] == ["captured"] * 4
    gaps = felt(visits)
    assert all(g >= 0.4 for g in gaps) and max(gaps) < 0.4 * 1.5, gaps
    assert overlapping(visits) == 2 and submitted_before_previous_answer(results) >= 2


def test_one_endpoint_busy_until_its_answer_waits_for_it_and_stays_polite():
    visits: list[Visit] = []
    e = SealingFake("bh-1", visits)
    results, _ = crawl([e], ["a", "b", "c"], 300)
    assert [r["status"] for r in results] == ["captured"] * 3
    assert all(g >= 0.3 for g in felt(visits)), felt(visits)
    assert overlapping(visits) == 1


def test_without_extensions_captures_are_sequential_as_before():
    visits: list[Visit] = []
    eps = [SealingFake("bh-1", visits, extensions=frozenset()), SealingFake("bh-2", visits, extensions=frozenset())]
    results, _ = crawl(eps, ["a", "b", "c"], 300)
    assert submitted_before_previous_answer(results) == 0
    assert all(g >= 0.3 for g in felt(visits))
    assert all(h is None and "startAfterMs" not in r for e in eps for r, h in e.requests)


def test_a_failing_seal_wait_falls_back_to_the_answer():
    visits: list[Visit] = []
    eps = [SealingFake("bh-1", visits, seal_fails=True), SealingFake("bh-2", visits, seal_fails=True)]
    results, _ = crawl(eps, ["a", "b", "c"], 300)
    assert [r["status"] for r in results] == ["captured"] * 3
    assert submitted_before_previous_answer(results) == 0
    assert all(g >= 0.3 for g in felt(visits))


def test_a_retry_joins_the_chain_and_keeps_the_gap():
    visits: list[Visit] = []
    flaky = {"b": lambda u, t: capture_reply(u, t, status="failed", error_type="connection")}
    eps = [SealingFake("bh-1", visits, replies=flaky), SealingFake("bh-2", visits, replies=dict(flaky))]
    results, logs = crawl(eps, ["a", "b", "c", "d"], 300)
    assert [r["url"] for r in results] == ["a", "b", "c", "d"]
    assert [r["status"] for r in results] == ["captured"] * 4
    assert sum(v.url == "b" for v in visits) == 2 and any("retrying b" in line for line in logs)
    assert all(g >= 0.3 for g in felt(visits)), felt(visits)
    assert overlapping(visits) <= 2


def test_a_503_document_backs_off_once_its_answer_is_known():
    visits: list[Visit] = []
    busy = {"a": lambda u, t: capture_reply(u, t, status="http_error", error_type="http", http_status=503)}
    eps = [SealingFake("bh-1", visits, replies=busy), SealingFake("bh-2", visits, replies=dict(busy))]
    results, logs = crawl(eps, ["a", "b"], 300)
    assert any("main document answered 503" in line for line in logs)
    gaps = felt(visits)
    assert gaps and all(g >= 0.6 for g in gaps[1:]), gaps  # after the answer was known: the doubled gap


def test_the_cross_level_rest_is_kept_and_may_use_start_after():
    visits: list[Visit] = []
    e = SealingFake("bh-1", visits)
    t0 = time.monotonic()
    results, _ = crawl([e], ["a"], 500, initial_delay_ms=600)
    assert visits[0].navigated - t0 >= 0.6
    assert 0 < e.requests[0][0]["startAfterMs"] <= 600 and results[0]["status"] == "captured"


# -- a redirect target listed in the same level -----------------------------------------------------

def _redirects_to(final):
    def reply(u, t):
        body = capture_reply(u, t)
        body["report"]["finalUrl"] = final
        return body
    return reply


def test_a_redirect_target_after_the_next_page_is_not_captured_again():
    """a → c; b is submitted at a's seal (a still in flight), and a must answer before c's turn:
    c is known then, recorded skipped and never submitted."""
    visits: list[Visit] = []
    eps = [SealingFake("bh-1", visits, replies={"http://h/a": _redirects_to("http://h/c")}),
           SealingFake("bh-2", visits)]
    results, logs = crawl(eps, ["http://h/a", "http://h/b", "http://h/c", "http://h/d"], 300)
    assert [r["status"] for r in results] == ["captured", "captured", "skipped", "captured"]
    assert results[2]["skipReason"] == "already captured in this level as the redirect target of http://h/a"
    assert sorted(v.url for v in visits) == ["http://h/a", "http://h/b", "http://h/d"]
    assert all(g >= 0.3 for g in felt(visits)), felt(visits)  # the skipped page took no gap, removed none


def test_a_redirect_target_known_by_its_turn_is_skipped_an_in_flight_one_is_not():
    # a gap longer than a's answer (0.6 s after its navigation): a answered before b's turn
    visits: list[Visit] = []
    e = SealingFake("bh-1", visits, free_at_seal=True, replies={"http://h/a": _redirects_to("http://h/b")})
    results, _ = crawl([e], ["http://h/a", "http://h/b"], 1500)
    assert [r["status"] for r in results] == ["captured", "skipped"] and [v.url for v in visits] == ["http://h/a"]
    # a gap shorter than that: b was submitted while a was still in flight — captured too (both recorded)
    visits = []
    e = SealingFake("bh-1", visits, free_at_seal=True, replies={"http://h/a": _redirects_to("http://h/b")})
    results, _ = crawl([e], ["http://h/a", "http://h/b"], 300)
    assert [r["status"] for r in results] == ["captured", "captured"] and len(visits) == 2
    assert results[0]["finalUrl"] == "http://h/b"


HOLDING = BOTH | {pipeline.EXT_HOLD, pipeline.EXT_SEAL_FIRST}


class HoldingFake(SealingFake):
    """Also ``holdAfter`` (extension 12) as our capture server has it: a held capture is taken
    while the previous one loads and navigates at the previous page's last request + ``gapMs``,
    once that one sealed; ``refuse_holds``: every held submission answered 409 (not taken)."""

    def __init__(self, *args, refuse_holds: bool = False, **kw) -> None:
        super().__init__(*args, extensions=HOLDING, free_at_seal=True, **kw)
        self.refuse_holds = refuse_holds
        self.held: list[dict] = []

    def capture(self, request: dict, headers: dict | None = None) -> Answer:
        hold = request.get(pipeline.EXT_HOLD)
        if hold is None:
            return super().capture(request, headers)
        self.held.append(request)
        if self.refuse_holds:
            return Answer(409, "ConflictException", {"message": "holdAfter: no such capture"})
        event, holder = self._entry(hold["key"])
        event.wait(30)
        self._busy.acquire()  # free at the previous seal
        self._busy.release()
        start = holder[0].last + hold["gapMs"] / 1000 - time.monotonic()
        return super().capture({**request, "startAfterMs": max(0, int(start * 1000) + 1)}, headers)


def test_a_short_gap_host_is_submitted_held_before_the_previous_seal():
    visits: list[Visit] = []
    e = HoldingFake("bh-1", visits)
    results, _ = crawl([e], ["a", "b", "c", "d"], 400)
    assert [r["status"] for r in results] == ["captured"] * 4 and [v.url for v in visits] == ["a", "b", "c", "d"]
    assert all(g >= 0.4 for g in felt(visits)), felt(visits)
    assert len(e.held) == 3 and all(r["holdAfter"]["gapMs"] == 400 and r["holdAfter"]["backoffGapMs"] == 800
                                    for r in e.held)
    # submitted before the previous page's last request (the first page's comes 50 ms after its POST)
    assert sum(b["submittedAt"] < a["gapFrom"] for a, b in zip(results, results[1:])) >= 2


def test_held_submissions_carry_the_delay_factor():
    """The held capture is submitted before the previous page's document time is known: the crawl's
    delayFactor goes with it, so the server keeps a slow page's longer gap (decision 242)."""
    visits: list[Visit] = []
    e = HoldingFake("bh-1", visits)
    results, _ = crawl([e], ["a", "b", "c"], 400, delay_factor=3.0)
    assert [r["status"] for r in results] == ["captured"] * 3
    assert e.held and all(r["holdAfter"]["delayFactor"] == 3.0 for r in e.held)
    e0 = HoldingFake("bh-1", [])
    crawl([e0], ["a", "b", "c"], 400, delay_factor=0.0)
    assert e0.held and all("delayFactor" not in r["holdAfter"] for r in e0.held)


def test_held_submissions_not_taken_go_the_usual_way_in_order():
    visits: list[Visit] = []
    e = HoldingFake("bh-1", visits, refuse_holds=True)
    results, logs = crawl([e], ["a", "b", "c"], 400)
    assert [r["status"] for r in results] == ["captured"] * 3 and [v.url for v in visits] == ["a", "b", "c"]
    assert all(g >= 0.4 for g in felt(visits)), felt(visits)
    assert e.held and any("not taken" in m for m in logs)
    assert [m for m in logs if m.endswith("] 2/3 b")] == ["[h] 2/3 b"]  # started once (progress)


def test_a_long_gap_host_is_not_held():
    visits: list[Visit] = []
    e = HoldingFake("bh-1", visits)
    results, _ = crawl([e], ["a", "b"], 1300)
    assert [r["status"] for r in results] == ["captured"] * 2 and e.held == []


class RetryAfterFake(SealingFake):
    """Page ``a``'s first capture answers 429 with ``retryAfterMs`` (our capture server's
    extension 18), in its seal answer too."""

    def __init__(self, *args, retry_after_ms: int, **kw) -> None:
        limited = lambda u, t: {**capture_reply(u, t, status="http_error", error_type="http",  # noqa: E731
                                                http_status=429), "retryAfterMs": retry_after_ms}
        super().__init__(*args, replies={"a": limited}, **kw)
        self.retry_after_ms, self._told = retry_after_ms, False

    def seal(self, key: str, timeout_ms: int):
        got = super().seal(key, timeout_ms)
        if got is not None and got[0]["sealed"] and self._entry(key)[1][0].url == "a" and not self._told:
            self._told = True
            got[0].update(httpStatusCode=429, retryAfterMs=self.retry_after_ms)
        return got


def test_retry_after_in_the_seal_answer_backs_off_before_the_next_submission():
    """The seal answer's ``retryAfterMs`` backs the gap off at once (the answer comes 0.45 s
    later, after the next page would have been submitted with the old gap), and only once."""
    visits: list[Visit] = []
    e = RetryAfterFake("bh-1", visits, retry_after_ms=900, free_at_seal=True)
    results, logs = crawl([e], ["a", "b", "c"], 300)
    assert [r["status"] for r in results] == ["captured"] * 3  # a retried after Retry-After
    gaps = felt(visits)
    assert all(g >= 0.9 for g in gaps), gaps  # not 0.3 s, nor the doubled 0.6 s
    assert len([line for line in logs if "main document answered" in line]) == 1, logs
    assert any("Retry-After 900 ms" in line and "300 → 900 ms" in line for line in logs), logs


class LimitedAtSealFake(SealingFake):
    """Every page answers 429 without Retry-After; its seal answer says so (extension 18)."""

    def __init__(self, *args, **kw) -> None:
        super().__init__(*args, **kw)
        self.replies = _Always(lambda u, t: capture_reply(u, t, status="http_error", error_type="http", http_status=429))

    def seal(self, key: str, timeout_ms: int):
        got = super().seal(key, timeout_ms)
        if got is not None and got[0]["sealed"]:
            got[0]["httpStatusCode"] = 429
        return got


class _Always(dict):
    def __init__(self, reply) -> None:
        super().__init__()
        self._reply = reply

    def pop(self, _key, _default=None):
        return self._reply


def test_a_429_in_the_seal_answer_doubles_the_gap_before_the_next_submission():
    """Without Retry-After the seal answer's ``httpStatusCode`` 429 doubles the gap at once:
    every capture's gap is double the one before (not the old gap until the answer came)."""
    visits: list[Visit] = []
    e = LimitedAtSealFake("bh-1", visits, free_at_seal=True)
    crawl([e], ["a", "b"], 200)  # a, a again, b, b again: 429 each
    gaps = felt(visits)
    assert len(gaps) == 3 and [g >= need for g, need in zip(gaps, (0.4, 0.8, 1.6))] == [True] * 3, gaps


class DeadFake(SealingFake):
    """An endpoint whose server is gone (connection refused), counting the probes it got."""

    def __init__(self, target: str, visits: list[Visit]) -> None:
        super().__init__(target, visits)
        self.probes = 0

    def capture(self, request: dict, headers: dict | None = None) -> Answer:
        self.probes += 1
        raise ConnectionError("connection refused")


def test_pipelined_an_unreachable_endpoint_is_probed_once_per_host_level():
    """Issue 24 item 9 through the pipeline: the dead endpoint is tried once (page a) and then
    left alone for the rest of the host's level; the other one does every page, politely."""
    visits: list[Visit] = []
    dead = DeadFake("bh-1", visits)
    results, logs = crawl([dead, SealingFake("bh-2", visits, free_at_seal=True)], ["a", "b", "c", "d"], 300)
    assert [r["status"] for r in results] == ["captured"] * 4
    assert dead.probes == 1
    assert all(g >= 0.3 for g in felt(visits)), felt(visits)
    assert sum("bh-1 unreachable, not tried again" in m for m in logs) == 1
