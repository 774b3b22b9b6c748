"""Politeness timing with real timers: the gap after completion (also after a retry), across a
level boundary (plan_level's initial delay + crawl_host), and the two-sided Crawl-delay."""

from __future__ import annotations

import time

import pytest

from f.waggle.crawl_host import capture_host
from f.waggle.hostguard import guarded_transport
from f.waggle.plan_level import plan
from f.waggle.robots import fetch_robots
from tests.flow.fakes import FakeEndpoint, HttpFake, capture_reply

FORMATS = {"png": False, "webp": False, "html": False, "links": True, "mhtml": False, "wacz": True}
CAPTURE_S = 0.05


def crawl(endpoint, urls, delay, initial=0):
    return capture_host([endpoint], "h", urls, "c1", formats=FORMATS, signing=False, scripts=[],
                        delay_ms=delay, initial_delay_ms=initial, busy_jitter_ms=(1, 2), log=lambda _m: None)


@pytest.fixture
def robots_site():
    made: list[HttpFake] = []

    def make(body):
        fake = HttpFake(lambda r: (200, {}, body) if body else (404, {}, ""))
        made.append(fake)
        return fake

    yield make
    for fake in made:
        fake.close()


TRANSPORT = guarded_transport(allow_private=True)  # built once, as plan_level.main does


def plan_host(site, delay, last=None, respect=None):
    fetch = lambda u: fetch_robots(u, transport=TRANSPORT, log=lambda _m: None)  # noqa: E731
    return plan([{"url": f"{site.url}/p", "host": site.authority, "lastFinishedAt": last}], delay, respect, None,
                fetch=fetch, read_endpoints=lambda: '["http://bh-1"]', log=lambda _m: None)["groups"][0]


def test_gap_after_completion_including_after_a_retry():
    e = FakeEndpoint("bh-1", [], delay_s=CAPTURE_S, responses=[
        lambda u, t: capture_reply(u, t, status="failed", error_type="connection"),
        lambda u, t: capture_reply(u, t),
    ])
    crawl(e, ["a", "b"], delay=200)
    t = e.times
    assert len(t) == 3  # a, a (retry), b
    for before, after in zip(t, t[1:]):
        waited = after - (before + CAPTURE_S)  # measured from the end of the previous capture
        assert 0.195 <= waited < 0.39  # from the end of the capture, and only once (< 2 × 200 ms)


def test_gap_across_a_level_boundary(robots_site):
    site = robots_site(None)
    e = FakeEndpoint("bh-1", [], delay_s=CAPTURE_S)
    [level0] = crawl(e, ["a"], delay=1000)
    level0_end = e.times[0] + CAPTURE_S
    time.sleep(0.4)  # the ledger records the report and dispatches the next level
    group = plan_host(site, 1000, last=level0["finishedAt"], respect=False)
    between = time.monotonic() - level0_end  # ≥ 0.4 s; more on a loaded machine
    passed_ms = 1000 - group["initialDelayMs"]
    assert 400 <= passed_ms <= between * 1000 + 5, (passed_ms, between)  # the time already passed, no more
    crawl(e, ["b"], delay=group["delayMs"], initial=group["initialDelayMs"])
    gap = e.times[1] - level0_end
    # the whole gap (or what already passed, when more did), not the whole gap again on top of
    # what passed (≥ 1 s + between): the bound lies halfway between the two
    limit = max(1.0, between) + min(between, 1.0) / 2
    assert 0.99 <= gap < limit, (gap, between)


def test_first_capture_waits_the_gap_after_robots_txt(robots_site):
    fetched: list[float] = []
    site = robots_site(None)
    site.handler = lambda r: (fetched.append(time.monotonic()), (404, {}, ""))[1]
    e = FakeEndpoint("bh-1", [], delay_s=CAPTURE_S)
    group = plan_host(site, 600)  # no capture of this host yet: only robots.txt was felt
    assert group["initialDelayMs"] > 500
    crawl(e, ["a"], delay=group["delayMs"], initial=group["initialDelayMs"])
    assert len(fetched) == 1
    gap = e.times[0] - fetched[0]
    assert 0.6 <= gap < 1.1, gap  # the site felt robots.txt as a request: the whole gap, once (not 1.2 s)


@pytest.mark.parametrize("robots, setting, expected_ms", [
    ("User-agent: *\nCrawl-delay: 0.3\n", 100, 300),   # the site asks for more: it wins
    ("User-agent: *\nCrawl-delay: 0.1\n", 300, 300),   # our setting is longer: it wins
])
def test_two_sided_crawl_delay_in_real_gaps(robots_site, robots, setting, expected_ms):
    site = robots_site(robots)
    group = plan_host(site, setting)
    assert group["delayMs"] == expected_ms
    e = FakeEndpoint("bh-1", [], delay_s=CAPTURE_S)
    crawl(e, ["a", "b", "c"], delay=group["delayMs"])
    gaps = [b - (a + CAPTURE_S) for a, b in zip(e.times, e.times[1:])]
    assert all(expected_ms / 1000 - 0.005 <= g < expected_ms / 1000 + 0.12 for g in gaps), gaps
