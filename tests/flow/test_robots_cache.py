"""plan_level's robots.txt cache and its fetch that waits its turn (docs/internals.md
"robots.txt cache"), on real timers with loopback sites: one robots.txt request per host across
two levels of a crawl, a fresh fetch for an unreachable or a day-old copy, and each fetch no
earlier than its own host's remaining gap while other hosts do not wait for it."""

from __future__ import annotations

import time

import pytest

from f.waggle.common import iso_now
from f.waggle.hostguard import guarded_transport
from f.waggle.plan_level import plan
from f.waggle.robots import RobotsRules, fetch_robots
from f.waggle.robots_cache import BODY_MAX_CHARS, cache_entries, fetch_all, from_cache
from tests.flow.fakes import HttpFake

OPEN = guarded_transport(allow_private=True)
PRIVATE_LINES = "robots: robots.txt lines 4–5: `User-agent: *` … `Disallow: /private`"  # ROBOTS' lines that did it
ROBOTS = ("User-agent: other\nDisallow: /\n\nUser-agent: *\nDisallow: /private # no\nCrawl-delay: 0.4\n"
          "Sitemap: /s.xml\n")


class Site:
    """A loopback site logging when each robots.txt request arrived (``time.time()``)."""

    def __init__(self, robots: str | None = ROBOTS, status: int = 200, answer_after_s: float = 0.0) -> None:
        self.robots, self.status, self.answer_after_s = robots, status, answer_after_s
        self.robots_at: list[float] = []
        self.fake = HttpFake(self.handle)

    def handle(self, req):
        if req.path == "/robots.txt":
            self.robots_at.append(time.time())
            time.sleep(self.answer_after_s)
            return (self.status, {}, self.robots or "") if self.robots is not None else (404, {}, "")
        return 404, {}, ""

    def cand(self, path: str, last: str | None = None) -> dict:
        return {"url": f"{self.fake.url}{path}", "host": self.fake.authority, "lastFinishedAt": last}


@pytest.fixture
def site():
    made: list[Site] = []

    def make(*args, **kwargs) -> Site:
        made.append(Site(*args, **kwargs))
        return made[-1]

    yield make
    for s in made:
        s.fake.close()


def fetch(url):
    return fetch_robots(url, transport=OPEN, timeout_s=5, log=lambda _m: None)


def run(candidates, delay=100, robots=None, lines=None):
    return plan(candidates, delay, None, None, fetch=fetch, read_endpoints=lambda: '["http://bh-1"]', robots=robots,
                log=lines.append if lines is not None else (lambda _m: None))


def test_one_robots_request_across_two_levels_of_a_crawl(site):
    a = site()
    level0 = run([a.cand("/"), a.cand("/private/x")])
    assert len(a.robots_at) == 1 and [s["reason"] for s in level0["skipped"]] == [PRIVATE_LINES]
    [cached] = level0["robots"]
    assert cached["host"] == a.fake.authority and cached["state"] == "allowed"
    assert "other" not in cached["body"] and "sitemap" not in cached["body"]  # only the groups for us
    # the ledger stores it and sends it with the next level: no request, the same decisions
    lines: list[str] = []
    level1 = run([a.cand("/b", last=iso_now()), a.cand("/private/y")], robots=level0["robots"], lines=lines)
    assert len(a.robots_at) == 1  # the site's log: robots.txt was requested once
    assert [g["urls"] for g in level1["groups"]] == [[f"{a.fake.url}/b"]]
    assert [s["reason"] for s in level1["skipped"]] == [PRIVATE_LINES]  # the cached copy keeps the lines
    assert level1["groups"][0]["delayMs"] == 400  # the cached Crawl-delay still applies
    assert level1["robots"] == []  # nothing fetched, nothing new to cache
    assert any("1 host(s) cached, 0 fetched" in line for line in lines), lines


def test_a_cached_copy_costs_no_robots_gap_only_the_gap_since_the_last_capture(site):
    a = site()
    cached = run([a.cand("/")], delay=600)["robots"]
    group = run([a.cand("/b", last=iso_now(time.time() - 0.4))], delay=600, robots=cached)["groups"][0]
    assert len(a.robots_at) == 1
    assert 100 <= group["initialDelayMs"] <= 200, group  # 600 − 400 ms already passed; no wait after robots


@pytest.mark.parametrize("stale", [
    {"state": "unreachable", "body": None},                       # transient: fetched again
    {"fetchedAt": iso_now(time.time() - 25 * 3600)},             # older than 24 h (RFC 9309 §2.4)
    {"fetchedAt": iso_now(time.time() + 3600)},                  # dated in the future
    {"fetchedAt": "yesterday"},
    {"body": None},                                              # allowed without its rules
    {"state": "maybe"},
])
def test_an_unusable_cached_copy_is_fetched_again(site, stale):
    a = site()
    entry = {"host": a.fake.authority, "fetchedAt": iso_now(), "state": "allowed", "body": "user-agent: *\n", **stale}
    result = run([a.cand("/private/x")], robots=[entry])
    assert len(a.robots_at) == 1 and result["skipped"][0]["reason"] == PRIVATE_LINES
    assert [e["state"] for e in result["robots"]] == ["allowed"]


def test_unreachable_is_reported_for_the_ledger_and_fetched_again_next_level(site):
    a = site(status=503)
    level0 = run([a.cand("/")])
    assert [(e["state"], e["body"]) for e in level0["robots"]] == [("unreachable", None)]
    assert level0["skipped"][0]["reason"] == "robots-unreachable"
    a.status = 200
    level1 = run([a.cand("/")], robots=level0["robots"])  # even if a ledger sent it back
    assert len(a.robots_at) == 2 and level1["groups"][0]["urls"] == [f"{a.fake.url}/"]


def test_unavailable_is_cached_as_no_restriction(site):
    a = site(robots=None)  # 404
    level0 = run([a.cand("/")])
    assert [(e["state"], e["body"]) for e in level0["robots"]] == [("unavailable", None)]
    level1 = run([a.cand("/private/x")], robots=level0["robots"])
    assert len(a.robots_at) == 1 and level1["groups"][0]["urls"] == [f"{a.fake.url}/private/x"]


def test_the_cached_body_decides_as_the_file_did():
    text = ROBOTS + "User-agent: waggle/2.0\nAllow: /private/open\nDisallow: /w$\n"
    original = RobotsRules(text)
    again = RobotsRules(original.text)
    assert again.text == original.text and again.crawl_delay_s() == original.crawl_delay_s()
    for path in ("/", "/private/x", "/private/open", "/w", "/wx", "/robots.txt"):
        assert again.allowed(f"http://h{path}") == original.allowed(f"http://h{path}"), path


def test_too_large_or_oversized_bodies_are_not_cached():
    from f.waggle.robots import ALLOWED, RobotsOutcome

    rules = RobotsRules("User-agent: *\n" + "".join(f"Disallow: /{i}\n" for i in range(5001)))
    assert rules.too_large and rules.text is None
    big = RobotsRules("User-agent: *\nDisallow: /" + "x" * BODY_MAX_CHARS + "\n")
    small = RobotsRules("User-agent: *\nDisallow: /x\n")
    out = cache_entries({"a": (RobotsOutcome(ALLOWED, rules), 1.0), "b": (RobotsOutcome(ALLOWED, big), 1.0),
                         "c": (RobotsOutcome(ALLOWED, small), 1.0)})
    assert [e["host"] for e in out] == ["c"]  # a and b are fetched again next level
    assert from_cache([{"host": "a", "fetchedAt": iso_now(), "state": "allowed", "body": big.text}], time.time(),
                      log=lambda _m: None) == {}


def test_the_fetch_waits_its_hosts_remaining_gap_and_no_other_host_waits_for_it(site):
    """Host a was captured 0.1 s ago with a 1 s delay: its robots.txt goes out no earlier than
    1 s after that capture; host b (never captured) is fetched at once, while a waits."""
    a, b = site(robots=None), site(robots=None)
    last = time.time() - 0.1
    t0 = time.time()
    lines: list[str] = []
    result = run([a.cand("/", last=iso_now(last)), b.cand("/")], delay=1000, lines=lines)
    elapsed = time.time() - t0
    assert a.robots_at[0] - last >= 1.0 - 0.002  # iso_now keeps ms
    assert b.robots_at[0] - t0 < 0.3 and b.robots_at[0] < a.robots_at[0]
    assert elapsed < 1.5, elapsed  # bounded: the longest gap plus one fetch
    ga = next(g for g in result["groups"] if g["host"] == a.fake.authority)
    assert ga["initialDelayMs"] > 800  # and the first capture waits the delay after robots.txt
    assert any("1 waited their host's gap" in line and "fetched" in line for line in lines), lines


def test_hosts_are_fetched_concurrently(site):
    slow = [site(robots=None, answer_after_s=0.4) for _ in range(4)]
    t0 = time.monotonic()
    result = run([s.cand("/") for s in slow])
    elapsed = time.monotonic() - t0
    assert all(len(s.robots_at) == 1 for s in slow) and len(result["groups"]) == 4
    assert elapsed < 0.4 * 4 * 0.6, elapsed  # sequentially it would take 1.6 s


def test_fetch_all_starts_the_earliest_first_and_keeps_job_order():
    started: list[str] = []

    def fake_fetch(url):
        from f.waggle.robots import UNAVAILABLE, RobotsOutcome

        started.append(url)
        return RobotsOutcome(UNAVAILABLE)

    now = time.time()
    out = fetch_all([("late", "late", now + 0.3), ("soon", "soon", now + 0.1), ("now", "now", 0.0)], fake_fetch,
                    workers=1)
    assert started == ["now", "soon", "late"] and list(out) == ["late", "soon", "now"]
    assert out["late"][1] - now >= 0.3 and out["soon"][1] - now >= 0.1


def test_bodies_past_the_levels_budget_are_not_cached_but_smaller_ones_after_them_are():
    from f.waggle.robots import ALLOWED, RobotsOutcome
    from f.waggle.robots_cache import TOTAL_MAX_CHARS

    big = RobotsOutcome(ALLOWED, RobotsRules("User-agent: *\nDisallow: /" + "x" * 500_000 + "\n"))
    small = RobotsOutcome(ALLOWED, RobotsRules("User-agent: *\nDisallow: /x\n"))
    fetched = {f"big{i}": (big, 1.0) for i in range(5)} | {"small": (small, 1.0)}
    out = cache_entries(fetched)
    assert [e["host"] for e in out] == ["big0", "big1", "big2", "big3", "small"]
    assert sum(len(e["body"]) for e in out) <= TOTAL_MAX_CHARS


def test_an_expired_copy_is_fetched_again_after_its_crawl_delay_since_the_last_capture(site):
    """The ledger sends a copy past its TTL marked stale: its rules are not used (robots.txt is
    fetched and the new file decides), but the fetch waits the old Crawl-delay (1 s) since the
    host's last capture, not only the 100 ms setting."""
    a = site(robots="User-agent: *\nDisallow: /new\n")
    last = time.time() - 0.2
    stale = {"host": a.fake.authority, "fetchedAt": iso_now(time.time() - 7200), "state": "allowed",
             "body": "user-agent: *\ndisallow: /old\ncrawl-delay: 1\n", "stale": True}
    result = run([a.cand("/old", last=iso_now(last)), a.cand("/new")], delay=100, robots=[stale])
    assert len(a.robots_at) == 1 and a.robots_at[0] - last >= 1.0 - 0.002
    assert result["groups"][0]["urls"] == [f"{a.fake.url}/old"]  # the fetched file's rules
    assert result["groups"][0]["delayMs"] == 100  # the new file has no Crawl-delay
