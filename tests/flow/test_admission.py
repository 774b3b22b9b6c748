"""Each capture of a host is admitted with the host's shared delay as the ledger says it *then*
(decision 301, f/waggle/host_admission.py): the start race of tests/e2e/test_start_race.py made
deterministic — the long crawl registers exactly between plan_level's re-read and the level's
first capture — and its neighbours: a crawl that registers mid-level, a crawl that ends (its delay
stops applying, never below the crawl's own), a ledger that cannot say. Real timers and real
HTTP for robots.txt; bounds are ratios of the delays."""

from __future__ import annotations

import time

import pytest

from f.waggle.crawl_host import capture_host
from f.waggle.host_admission import Admission, LedgerReader
from f.waggle.host_gap import HostGap
from f.waggle.plan_level import plan
from tests.flow.fakes import FakeEndpoint, HttpFake
from tests.flow.test_pipeline import FORMATS, SealingFake, felt
from tests.flow.test_plan_level import cand, fetch, serving  # noqa: F401

SHORT_MS, LONG_MS = 100, 1000


class Ledger:
    """The ledger's ``hostDelayMs`` for the host as each read finds it; ``after_read(n)`` may
    register or end a crawl right after the ``n``-th admission read answered."""

    def __init__(self, ms: int, after_read=lambda n, ledger: None) -> None:
        self.ms, self.reads, self._after = ms, 0, after_read

    def __call__(self, _host: str) -> int:
        self.reads += 1
        answer = self.ms
        self._after(self.reads, self)
        return answer


def endpoint(kind: str):
    """(endpoint, navigation times (monotonic s) and last-request ends of its captures)."""
    if kind == "pipelined":
        visits: list = []
        return SealingFake("bh-1", visits, free_at_seal=True), lambda: ([v.navigated for v in sorted(visits, key=lambda v: v.navigated)],
                                                     felt(visits))
    e = FakeEndpoint("bh-1", [])
    return e, lambda: (list(e.times), [b - a for a, b in zip(e.times, e.times[1:])])


def run(e, urls, delay_ms, admission, lines, **kw):
    return capture_host([e], "h", urls, "c1", formats=FORMATS, signing=False, scripts=[], delay_ms=delay_ms,
                        busy_jitter_ms=(20, 40), log=lines.append, admission=admission, **kw)


@pytest.mark.parametrize("kind", ["sequential", "pipelined"])
@pytest.mark.parametrize("admitting", [True, False])
def test_a_crawl_registered_between_the_reread_and_the_first_capture_holds_from_that_capture(serving, kind, admitting):
    site = serving("User-agent: *\nAllow: /\n")
    host = site.fake.authority
    ledger = Ledger(SHORT_MS)

    def reread(hosts):  # plan_level's read before robots.txt; the long crawl commits the moment it answered
        answer = {h: {"hostDelayMs": ledger.ms, "lastFinishedAt": None} for h in hosts}
        ledger.ms = LONG_MS
        return answer

    result = plan([cand(site, "/a"), cand(site, "/b"), cand(site, "/c")], SHORT_MS, True, 4, fetch=fetch,
                  read_endpoints=lambda: '["http://bh-1"]', log=lambda _m: None, current=reread)
    (group,) = result["groups"]
    assert group["delayMs"] == SHORT_MS and group["ownDelayMs"] == SHORT_MS  # the plan missed it: the race
    robots_at = site.fake.requests[0].at
    e, seen = endpoint(kind)
    lines: list[str] = []
    results = run(e, group["urls"], group["delayMs"], Admission(host, ledger, lines.append) if admitting else None,
                  lines, initial_delay_ms=group["initialDelayMs"], not_before=group["notBefore"],
                  own_delay_ms=group["ownDelayMs"], gap_from=group["gapFrom"])
    assert [r["status"] for r in results] == ["captured"] * 3
    starts, gaps = seen()
    first = starts[0] - robots_at
    if admitting:  # the first capture, and every one after it, keeps the long crawl's delay
        assert first / (LONG_MS / 1000) >= 1.0 and min(gaps) / (LONG_MS / 1000) >= 1.0, (first, gaps)
        assert ledger.reads == 3 and any("longer delay: gap 100 → 1000 ms" in ln for ln in lines), lines
    else:  # what the race did before admission: the level kept the short delay
        # (the shortest of them: under load one step can take long, but every one waiting the long
        # delay would be the admission's doing, and it is off)
        assert min(first, *gaps) / (LONG_MS / 1000) < 0.5, (first, gaps)
        assert ledger.reads == 0 and not any("longer delay" in ln for ln in lines), lines


@pytest.mark.parametrize("kind", ["sequential", "pipelined"])
def test_a_crawl_registered_mid_level_slows_every_capture_admitted_after_it(kind):
    def register(n, ledger):  # the long crawl commits right after the second page's admission
        if n == 1:
            ledger.ms = LONG_MS

    ledger = Ledger(SHORT_MS, register)
    e, seen = endpoint(kind)
    lines: list[str] = []
    run(e, ["/1", "/2", "/3", "/4"], SHORT_MS, Admission("h", ledger, lines.append), lines)
    _starts, gaps = seen()
    assert gaps[0] / (LONG_MS / 1000) < 0.5, gaps  # admitted before it registered
    assert min(gaps[1:]) / (LONG_MS / 1000) >= 1.0, gaps
    assert ledger.reads == 3


@pytest.mark.parametrize("kind", ["sequential", "pipelined"])
def test_a_crawl_that_ended_stops_slowing_the_host_but_the_crawls_own_delay_stays(kind):
    def end(n, ledger):  # the long crawl ends after the second page's admission; then a ledger saying 0
        ledger.ms = SHORT_MS if n == 1 else 0

    ledger = Ledger(LONG_MS, end)
    e, seen = endpoint(kind)
    lines: list[str] = []
    run(e, ["/1", "/2", "/3", "/4"], LONG_MS, Admission("h", ledger, lines.append), lines, own_delay_ms=SHORT_MS)
    _starts, gaps = seen()
    assert gaps[0] / (LONG_MS / 1000) >= 1.0, gaps
    # the gap being waited when the read said so ends early as it can (read 0.2 s before its end), the next ones short
    assert gaps[1] / (LONG_MS / 1000) < 1.0 and max(gaps[2:]) / (LONG_MS / 1000) < 0.5, gaps
    assert min(gaps[1:]) / (SHORT_MS / 1000) >= 1.0, gaps
    assert any("has ended: gap 1000 → 100 ms" in ln for ln in lines), lines


def test_a_ledger_that_cannot_say_keeps_the_gap_and_is_logged_a_few_times():
    def broken(_host):
        raise RuntimeError("HTTP 503 ledger down")

    e, seen = endpoint("sequential")
    lines: list[str] = []
    run(e, [f"/{i}" for i in range(6)], 300, Admission("h", broken, lines.append), lines, own_delay_ms=SHORT_MS)
    _starts, gaps = seen()
    assert min(gaps) / 0.3 >= 1.0, gaps
    assert sum("could not be read" in ln for ln in lines) == 3, lines


def test_the_gap_follows_the_shared_delay_above_the_own_and_keeps_back_off_and_slow_host():
    gap = HostGap(3000, lambda _m: None, factor=5.0, own=500)
    gap.share(200)
    assert (gap.ms, gap.floor) == (500, 500)  # never below the crawl's own delay and Crawl-delay
    gap.share(4000)
    assert gap.ms == 4000
    gap.adapt(1000)  # a slow page: 5 × 1 s
    assert gap.ms == 5000
    gap.share(500)
    assert gap.ms == 5000  # the slow host's gap is its own
    gap.adapt(10)
    gap.back_off(429)
    gap.share(0)
    assert gap.ms == 1000  # the back-off stays after the other crawl ended
    assert HostGap(700, lambda _m: None).floor == 700 and HostGap(700, lambda _m: None, own=900).own == 700


def test_the_reader_asks_the_politeness_route_for_the_one_host_over_one_connection():
    stand_in = HttpFake(lambda r: (200, {}, {"hosts": {"s.test": {"hostDelayMs": 3000, "lastFinishedAt": None}}}))
    bad = HttpFake(lambda r: (409, {}, {"error": "crawl is not running"}))
    try:
        read = LedgerReader(stand_in.url, "flow-token", "c-1")
        t0 = time.monotonic()
        assert [read("s.test"), read("s.test")] == [3000, 3000]
        assert (time.monotonic() - t0) < 1.0
        read.close()
        refused = LedgerReader(bad.url, "flow-token", "c-1")
        with pytest.raises(RuntimeError, match="HTTP 409"):
            refused("s.test")
        refused.close()
    finally:
        stand_in.close()
        bad.close()
    (first, _second) = stand_in.requests
    assert first.path == "/api/crawls/c-1/politeness?host=s.test"
    assert first.headers["authorization"] == "Bearer flow-token"


def test_a_held_capture_is_admitted_when_submitted_and_a_longer_delay_then_ends_the_holding():
    """holdAfter (gaps under 1.2 s): the next page is submitted held behind the loading one, its
    admission the read just before that submission; once a crawl with a long delay registered,
    the next read makes the gap long: no more holds, every later capture the long delay apart."""
    from tests.flow.test_pipeline import HoldingFake

    def register(n, ledger):
        if n == 1:
            ledger.ms = 1300

    ledger = Ledger(400, register)
    visits: list = []
    e = HoldingFake("bh-1", visits)
    lines: list[str] = []
    run(e, ["a", "b", "c", "d"], 400, Admission("h", ledger, lines.append), lines)
    gaps = felt(visits)
    assert [r["url"] for r in e.held] == ["b"] and e.held[0]["holdAfter"]["gapMs"] == 400
    assert gaps[0] / 0.4 >= 1.0 and gaps[0] / 1.3 < 1.0, gaps  # admitted (held) before it registered
    assert min(gaps[1:]) / 1.3 >= 1.0, gaps


class MemberLedger(Ledger):
    """A ledger read the capture server can make too (``hold_member``, extension holdAdmission)."""

    def hold_member(self, host: str) -> dict:
        return {"url": f"http://ledger.test/api/crawls/c1/politeness?host={host}", "token": "flow-token"}


@pytest.mark.parametrize("offered", [True, False])
def test_a_held_capture_carries_the_ledger_read_or_is_not_held_where_the_server_cannot_make_it(offered):
    """Decision 302: with admission on, a held capture (holdAfter) carries ``admission`` — the read
    the server makes right before the release; an endpoint that does not advertise
    ``holdAdmission`` (an older capture server) gets no held capture at all: each page is submitted
    at its gap the usual way (sealWait/startAfterMs), admitted by the flow right before it."""
    from f.waggle.pipeline import EXT_HOLD_ADMISSION
    from tests.flow.test_pipeline import HoldingFake

    visits: list = []
    e = HoldingFake("bh-1", visits)
    if offered:
        e.extensions = e.extensions | {EXT_HOLD_ADMISSION}
    ledger = MemberLedger(400)
    lines: list[str] = []
    results = run(e, ["a", "b", "c", "d"], 400, Admission("h", ledger, lines.append), lines)
    assert [r["status"] for r in results] == ["captured"] * 4
    assert min(felt(visits)) / 0.4 >= 1.0, felt(visits)
    if offered:
        assert len(e.held) == 3 and all(r["holdAfter"]["admission"] == ledger.hold_member("h") for r in e.held), e.held
    else:
        assert e.held == [] and ledger.reads == 3  # admitted by the flow before each next submission
    # admission off (no ledger variables, a test): holds as before, without the member
    e2 = HoldingFake("bh-1", [])
    e2.extensions = e2.extensions | {EXT_HOLD_ADMISSION}
    run(e2, ["a", "b"], 400, None, [])
    assert len(e2.held) == 1 and "admission" not in e2.held[0]["holdAfter"]


def test_the_reader_names_its_read_for_the_capture_server():
    read = LedgerReader("http://127.0.0.1:9/", "flow-token", "c-1")
    try:
        assert read.hold_member("s.test:8080") == {
            "url": "http://127.0.0.1:9/api/crawls/c-1/politeness?host=s.test%3A8080", "token": "flow-token"}
        assert Admission("s.test:8080", read, print).hold_member() == read.hold_member("s.test:8080")
        assert Admission("s.test", None, print).hold_member() is None
        assert Admission("s.test", Ledger(100), print).hold_member() is None
    finally:
        read.close()
