"""Hosts sharing browsers (issue 8 item 2) and where a host's gap is measured from (item 1).

Real timers, real threads (one per host, as the for-each runs one crawl_host job per host) and
real HTTP for the site that logs its requests; the capture servers are in-process doubles that
answer ``429 Busy`` while their one browser is capturing, as BrowserHive v12 does.
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from f.waggle.common import parse_iso
from f.waggle.crawl_host import Answer, busy_window, capture_host
from f.waggle.host_gap import clock
from f.waggle.plan_level import CAPTURE_ESTIMATE_MS, parallelism_for
from tests.flow.fakes import FakeEndpoint, HttpFake, capture_reply

FORMATS = {"png": False, "webp": False, "html": False, "links": True, "mhtml": False, "wacz": True}
JITTER_MS = (20.0, 40.0)  # busy rounds, scaled down from 0.5–1.5 s


class Browser:
    """One capture server with one browser: 429 while busy, else ``capture_s`` of work.

    Records every capture as ``(host, start, end)`` (monotonic s) and counts 429 answers.
    """

    def __init__(self, target: str, capture_s: float) -> None:
        self.target = target
        self.capture_s = capture_s
        self.captures: list[tuple[str, float, float]] = []
        self.busy_answers = 0
        self._lock = threading.Lock()

    def capture(self, request: dict) -> Answer:
        if not self._lock.acquire(blocking=False):
            self.busy_answers += 1
            return Answer(429, "Busy", {"message": "a capture is already running on this browser"})
        try:
            start = time.monotonic()
            time.sleep(self.capture_s)
            self.captures.append((request["url"].split("/")[0], start, time.monotonic()))
        finally:
            self._lock.release()
        return Answer(200, None, capture_reply(request["url"], self.target))


# (host, pages, gap ms): two hosts with a long gap listed first — the for-each starts them first —
# and two with a short one.
HOSTS = [("slow0", 2, 1200), ("slow1", 2, 1200), ("fast2", 3, 100), ("fast3", 3, 100)]
CAPTURE_S = 0.3


def crawl_level(parallelism: int) -> tuple[float, list[Browser]]:
    """All HOSTS through 2 browsers with at most ``parallelism`` hosts at once; (makespan s, browsers)."""
    browsers = [Browser("bh-1", CAPTURE_S), Browser("bh-2", CAPTURE_S)]

    def one(host: str, pages: int, gap: int) -> list[dict]:
        urls = [f"{host}/{i}" for i in range(pages)]
        return capture_host(browsers, host, urls, "c1", formats=FORMATS, signing=False, scripts=[],
                            delay_ms=gap, busy_jitter_ms=JITTER_MS, log=lambda _m: None)

    start = time.monotonic()
    with ThreadPoolExecutor(max_workers=parallelism) as pool:
        results = [f.result() for f in [pool.submit(one, *h) for h in HOSTS]]
    assert all(r["status"] == "captured" for rs in results for r in rs)
    return time.monotonic() - start, browsers


# The same level at real scale (0.3 s capture ↔ CAPTURE_ESTIMATE_MS): what plan_level decides.
SCALE = CAPTURE_ESTIMATE_MS / 1000 / CAPTURE_S
REAL_GROUPS = [{"host": h, "urls": ["/"] * n, "delayMs": g * SCALE, "initialDelayMs": 0} for h, n, g in HOSTS]


@pytest.fixture(scope="module")
def levels():
    """The same level with the old cap (parallelism = endpoints) and with the shipped rule."""
    shipped = parallelism_for(None, 2, REAL_GROUPS)
    return {"capped": crawl_level(2), "shipped": (shipped, *crawl_level(shipped))}


def test_two_sleepers_on_two_browsers_get_two_hosts_per_browser():
    assert parallelism_for(None, 2, REAL_GROUPS) == 4  # the level below runs all four hosts at once


def test_a_sleeping_host_no_longer_idles_a_browser(levels):
    capped, _ = levels["capped"]
    _, shipped, _ = levels["shipped"]
    # capped: both slots sleep 1.2 s behind the slow hosts before the fast hosts start
    # (≈ 1.8 + 1.1 s); shipped: the fast hosts' captures fill the slow hosts' gaps (≈ 1.8–2.2 s)
    assert shipped < 0.85 * capped, (shipped, capped)


def test_shared_browsers_never_overlap_a_host_and_keep_every_gap(levels):
    _, _, browsers = levels["shipped"]
    gaps = {h: g / 1000 for h, _n, g in HOSTS}
    for host, pages, _gap in HOSTS:
        mine = sorted((s, e) for b in browsers for h, s, e in b.captures if h == host)
        assert len(mine) == pages
        for (_s0, e0), (s1, _e1) in zip(mine, mine[1:]):
            # never two captures of one host at once, and the whole gap after each completion
            assert s1 - e0 >= gaps[host] - 0.002, (host, s1 - e0)


def test_waiting_hosts_do_not_spin_against_busy_browsers(levels):
    parallelism, makespan, browsers = levels["shipped"]
    busy = sum(b.busy_answers for b in browsers)
    assert busy > 0  # hosts really did wait for a browser
    # each waiting host probes each browser at most once per busy round (≥ 20 ms apart here)
    waiting_hosts = parallelism - len(browsers)
    bound = waiting_hosts * len(browsers) * (makespan / (JITTER_MS[0] / 1000) + 1)
    assert busy <= bound, (busy, bound)


def test_busy_rounds_do_not_move_submitted_at_earlier():
    """submittedAt is the politeness evidence: when the answered submission went out."""
    browser = Browser("bh-1", 0.3)
    holder = threading.Thread(target=browser.capture, args=({"url": "other/x"},))
    holder.start()  # another host holds the only browser for 0.3 s…
    while not browser._lock.locked():
        time.sleep(0.001)
    # the code's own clock (epoch read off monotonic): time.time() beside time.monotonic() can be
    # milliseconds apart under load, and the anchor taken at import is another such pair
    wall0, mono0 = clock(), time.monotonic()
    [r] = capture_host([browser], "h", ["h/a"], "c1", formats=FORMATS, signing=False, scripts=[],
                       delay_ms=0, busy_jitter_ms=(30, 50), log=lambda _m: None)
    holder.join()
    # …so this host got 429 first and its submission went out only once the browser was free
    assert browser.busy_answers >= 1
    [(_h, _s, other_end)] = [c for c in browser.captures if c[0] == "other"]
    assert parse_iso(r["submittedAt"]) - wall0 >= other_end - mono0 - 0.002


# -- where the gap is measured from ---------------------------------------------------------

def test_the_gap_runs_from_completion_whatever_settle_says():
    """A capture whose page still fetches after the reported settle (a behavior, a lazy image
    during the screenshot) must not get a shorter gap: the site-felt gap (the page's last
    request → the next capture's first request) stays ≥ the delay (issue 8 item 1)."""
    site = HttpFake(lambda r: (200, {}, "ok"))
    try:
        client = httpx.Client(timeout=5)

        class PageFetchingEndpoint:
            target = "bh-1"

            def capture(self, request: dict) -> Answer:
                client.get(f"{site.url}/{request['url']}")  # the navigation
                time.sleep(0.1)
                client.get(f"{site.url}/{request['url']}/late.js")  # after the network was quiet
                time.sleep(0.05)  # formats, WACZ, uploads, manifest
                body = capture_reply(request["url"], self.target)
                # settle as v12 reports it: quiet 10 ms after navigation returned (unanchored)
                body["report"]["settle"] = {"strategy": "fully-loaded", "endedBy": "quiet", "waitedMs": 20,
                                            "devicePixelRatio": 1, "load": {"atMs": 0},
                                            "network": {"quietAtMs": 10}, "cpu": {}, "dom": {}}
                body["report"]["captureProcessingTimeMs"] = 160
                return Answer(200, None, body)

        capture_host([PageFetchingEndpoint()], "h", ["a", "b", "c"], "c1", formats=FORMATS, signing=False,
                     scripts=[], delay_ms=300, busy_jitter_ms=JITTER_MS, log=lambda _m: None)
        client.close()
        hits = [(r.path.strip("/").split("/")[0], r.at) for r in site.requests]
        pages = {}
        for page, at in hits:
            pages.setdefault(page, []).append(at)
        spans = [(min(t), max(t)) for _p, t in sorted(pages.items())]
        assert len(spans) == 3 and all(len(t) == 2 for t in pages.values())
        felt = [nxt[0] - prev[1] for prev, nxt in zip(spans, spans[1:])]
        # ≥ the delay + the 50 ms tail after the last request; never the delay from "quiet"
        assert all(0.345 <= g < 1.5 for g in felt), felt
    finally:
        site.close()


# -- who wins the next free browser ---------------------------------------------------------

@pytest.mark.parametrize("gap, window", [(0, (500, 1500)), (2000, (500, 1500)), (4000, (500, 1500)),
                                         (8000, (250, 750)), (20000, (100, 300)), (120000, (100, 300))])
def test_busy_window_shrinks_only_for_long_gaps(gap, window):
    assert busy_window((500.0, 1500.0), gap) == pytest.approx(window)


def test_a_long_gap_host_goes_round_faster():
    """Busy rounds of a first page (no gap slept yet): 300–350 ms for a host with a 0.5 s gap,
    a fifth of that for one with a 20 s gap; compared as a ratio (sleeps only ever overshoot)."""
    def rounds(gap):
        e = FakeEndpoint("bh-1", [], busy_times=3)
        capture_host([e], "h", ["a"], "c1", formats=FORMATS, signing=False, scripts=[], delay_ms=gap,
                     busy_jitter_ms=(300, 350), log=lambda _m: None)
        return [b - a for a, b in zip(e.times, e.times[1:])]

    short, long_ = rounds(500), rounds(20000)
    assert len(short) == len(long_) == 3
    assert min(short) >= 0.299 and min(long_) >= 0.059
    assert sum(long_) / 3 <= 0.5 * sum(short) / 3, (long_, short)
