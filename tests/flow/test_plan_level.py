"""plan_level (reference/scheduler.md §7.2 plus the parallelism cap and the Crawl-delay cap, C2).

robots.txt is served by real HTTP fakes on 127.0.0.1; fetches go through the production
transport (the private-host guard with its loopback opt-out).
"""

from __future__ import annotations

import time

import pytest

from f.waggle.common import iso_now
from f.waggle.hostguard import guarded_transport
from f.waggle.plan_level import (
    CAPTURE_ESTIMATE_MS,
    CRAWL_DELAY_CAP_MS,
    chain_ms,
    delay_for,
    endpoint_count,
    is_sleeper,
    parallelism_for,
    plan,
)
from f.waggle.robots import MAX_RULES, fetch_robots
from tests.flow.fakes import HttpFake

HIDDEN = "User-agent: *\nDisallow: /links/hidden\n"
HIDDEN_LINES = "robots: robots.txt lines 1–2: `User-agent: *` … `Disallow: /links/hidden`"  # the skip reason names them
OPEN = guarded_transport(allow_private=True)


class Robots:
    """``robotsServing(body)``: serves ``body`` at /robots.txt (404 when None) on one host."""

    def __init__(self, body: str | None) -> None:
        self.fake = HttpFake(lambda r: (404, {}, "") if body is None else (200, {}, body))

    @property
    def fetched(self) -> list[str]:
        return [r.path for r in self.fake.requests]


@pytest.fixture
def serving():
    made: list[Robots] = []

    def make(body):
        r = Robots(body)
        made.append(r)
        return r

    yield make
    for r in made:
        r.fake.close()


def fetch(url):
    return fetch_robots(url, transport=OPEN, timeout_s=2, log=lambda _m: None)


def run(candidates, delay=2000, respect=None, hp=None, endpoints='["http://bh-1","http://bh-2"]', lines=None, now=None):
    """``plan`` with the test's fetcher; ``now`` (epoch s) freezes its clock."""
    return plan(candidates, delay, respect, hp, fetch=fetch, read_endpoints=lambda: endpoints,
                log=(lines.append if lines is not None else (lambda _m: None)),
                now=time.time if now is None else (lambda: now))


def cand(site, path, last=None):
    return {"url": f"{site.fake.url}{path}", "host": site.fake.authority, "lastFinishedAt": last}


# -- whether robots is read ----------------------------------------------------------------

def test_null_respect_robots_still_reads_robots(serving):
    site = serving(HIDDEN)
    result = run([cand(site, "/links/hidden")], respect=None)
    assert site.fetched == ["/robots.txt"]
    assert result["groups"] == [] and result["skipped"] == [{"url": f"{site.fake.url}/links/hidden", "reason": HIDDEN_LINES, "failureClass": "permanent"}]


def test_omitted_respect_robots_still_reads_robots(serving):
    site = serving(HIDDEN)
    result = plan([cand(site, "/links/hidden")], 2000, None, None, fetch=fetch,
                  read_endpoints=lambda: '["http://bh-1"]', log=lambda _m: None)
    assert len(site.fetched) == 1 and len(result["skipped"]) == 1


def test_false_means_no_fetch_at_all(serving):
    site = serving(HIDDEN)
    lines: list[str] = []
    result = run([cand(site, "/links/hidden")], respect=False, lines=lines)
    assert site.fetched == [] and result["skipped"] == [] and result["groups"][0]["urls"] == [f"{site.fake.url}/links/hidden"]
    assert any("IGNORED" in line for line in lines)


def test_no_robots_404_no_restriction(serving):
    site = serving(None)
    assert run([cand(site, "/a")])["groups"][0]["urls"] == [f"{site.fake.url}/a"]


def test_log_says_robots_was_read(serving):
    site = serving(None)
    lines: list[str] = []
    run([cand(site, "/a")], lines=lines)
    assert any("robots read" in line and "parallelism" in line for line in lines)


# -- Crawl-delay, the two-sided test ----------------------------------------------------------

def test_robots_longer_wins(serving):
    site = serving("User-agent: *\nCrawl-delay: 3\n")
    result = run([cand(site, "/a")], delay=500)
    assert result["groups"][0]["delayMs"] == 3000
    assert result["slowed"] == [{"host": site.fake.authority, "crawlDelayMs": 3000, "delayMs": 3000, "capped": False}]


def test_setting_longer_wins(serving):
    site = serving("User-agent: *\nCrawl-delay: 1\n")
    result = run([cand(site, "/a")], delay=5000)
    assert result["groups"][0]["delayMs"] == 5000 and result["slowed"] == []


def test_no_crawl_delay_keeps_setting(serving):
    site = serving(HIDDEN)
    assert run([cand(site, "/a")], delay=2000)["groups"][0]["delayMs"] == 2000


def test_fractional_crawl_delay_rounds(serving):
    site = serving("User-agent: *\nCrawl-delay: 2.5004\n")
    assert run([cand(site, "/a")], delay=100)["groups"][0]["delayMs"] == 2500


def test_c2_crawl_delay_10_with_2000_setting(serving):
    site, other = serving("User-agent: *\nCrawl-delay: 10\n"), serving(None)
    result = run([cand(site, "/a"), cand(other, "/b")], delay=2000)
    assert [g["delayMs"] for g in result["groups"]] == [10_000, 2000]  # other hosts unaffected


def test_c2_crawl_delay_600_is_capped_logged_and_reported(serving):
    site = serving("User-agent: *\nCrawl-delay: 600\n")
    lines: list[str] = []
    result = run([cand(site, "/a")], delay=2000, lines=lines)
    assert result["groups"][0]["delayMs"] == CRAWL_DELAY_CAP_MS
    assert result["slowed"] == [{"host": site.fake.authority, "crawlDelayMs": 600_000,
                                 "delayMs": CRAWL_DELAY_CAP_MS, "capped": True}]
    assert any("capped" in line and site.fake.authority in line for line in lines)


def test_delay_for_never_shortens_below_the_cap():
    assert delay_for(2000, 100.0) == (100_000, 100_000, False)
    assert delay_for(2000, 600.0) == (CRAWL_DELAY_CAP_MS, 600_000, True)
    assert delay_for(CRAWL_DELAY_CAP_MS + 5, 600.0)[0] == CRAWL_DELAY_CAP_MS + 5  # own setting kept


# -- waiting across levels --------------------------------------------------------------------

def test_touched_a_second_ago(serving):
    site = serving(None)
    clock = float(int(time.time()))  # frozen, whole seconds: iso_now's milliseconds are exact
    result = run([cand(site, "/a", iso_now(clock - 1.0))], delay=3000, respect=False, now=clock)
    assert result["groups"][0]["initialDelayMs"] == 2000


def test_finished_long_ago_is_zero(serving):
    site = serving(None)
    assert run([cand(site, "/a", iso_now(time.time() - 60))], delay=3000, respect=False)["groups"][0]["initialDelayMs"] == 0


@pytest.mark.parametrize("last", [None, "not a date"])
def test_first_level_or_unparsable_is_zero(serving, last):
    site = serving(None)
    assert run([cand(site, "/a", last)], delay=3000, respect=False)["groups"][0]["initialDelayMs"] == 0


@pytest.mark.parametrize("last", [None, 60.0, 1.0])
def test_robots_txt_is_a_request_the_first_capture_waits_after(serving, last):
    """The robots.txt fetch of this level is the host's latest request: whatever the earlier
    history, the first capture waits (nearly) the whole delay after it."""
    site = serving(None)
    stamp = None if last is None else iso_now(time.time() - last)
    initial = run([cand(site, "/a", stamp)], delay=3000)["groups"][0]["initialDelayMs"]
    assert site.fetched == ["/robots.txt"] and 2800 < initial <= 3000


def test_initial_delay_uses_the_robots_delay(serving):
    site = serving("User-agent: *\nCrawl-delay: 3\n")
    result = run([cand(site, "/a", iso_now(time.time() - 1.0))], delay=500)
    assert 2800 < result["groups"][0]["initialDelayMs"] <= 3000  # the Crawl-delay, after robots.txt


def test_host_delay_of_another_crawl_slows_the_host_and_its_first_gap(serving):
    """Issue 12: ``hostDelayMs`` (the larger delay of the crawls on the host) wins over the own
    delay for every gap of the level, the first one (from another crawl's capture) included;
    a smaller one or none changes nothing; the robots Crawl-delay still wins when longer."""
    site = serving(None)
    lines: list[str] = []
    clock = float(int(time.time()))
    item = {**cand(site, "/a", iso_now(clock - 1.0)), "hostDelayMs": 4000}
    group = run([item, {**cand(site, "/b"), "hostDelayMs": 4000}], delay=500, lines=lines, respect=False,
                now=clock)["groups"][0]
    assert group["delayMs"] == 4000 and group["initialDelayMs"] == 3000
    assert any("another crawl" in line and "4000 ms" in line for line in lines)
    assert run([{**cand(site, "/a"), "hostDelayMs": 100}], delay=500)["groups"][0]["delayMs"] == 500
    slow = serving("User-agent: *\nCrawl-delay: 6\n")
    assert run([{**cand(slow, "/a"), "hostDelayMs": 4000}], delay=500)["groups"][0]["delayMs"] == 6000


# -- grouping by host -------------------------------------------------------------------------

def test_the_longest_chain_comes_first_and_its_wait_has_an_absolute_end(serving):
    """The for-each starts groups in order: a host sleeping a long gap must not queue behind
    short hosts (bench politeness-*: a 20 s host fourth of four at width 2 started ~8 s late and
    then waited its whole rest again). ``notBefore`` is the plan's clock + ``initialDelayMs``."""
    quick, slow = serving(None), serving("User-agent: *\nCrawl-delay: 20\n")
    before = time.time()
    groups = run([cand(quick, "/a"), cand(slow, "/a", iso_now(time.time() - 1.0)), cand(quick, "/b")],
                 delay=500)["groups"]
    after = time.time()
    assert [g["host"] for g in groups] == [slow.fake.authority, quick.fake.authority]
    for g in groups:
        assert before + g["initialDelayMs"] / 1000 - 0.01 <= g["notBefore"] <= after + g["initialDelayMs"] / 1000 + 0.01
    assert groups[0]["initialDelayMs"] > 15_000



def test_one_group_per_host_in_first_seen_order(serving):
    a, b = serving(None), serving(None)
    result = run([cand(a, "/1"), cand(b, "/x"), cand(a, "/2")])
    assert [g["host"] for g in result["groups"]] == [a.fake.authority, b.fake.authority]
    assert result["groups"][0]["urls"] == [f"{a.fake.url}/1", f"{a.fake.url}/2"]


def test_robots_fetched_once_per_host(serving):
    a = serving(None)
    run([cand(a, "/1"), cand(a, "/2"), cand(a, "/3")])
    assert a.fetched == ["/robots.txt"]


def test_host_field_as_given_and_scheme_of_first_url(serving):
    a = serving(None)
    run([{"url": f"{a.fake.url}/1", "host": a.fake.authority}])
    assert a.fake.requests[0].headers["host"] == a.fake.authority


def test_all_disallowed_host_disappears(serving):
    a = serving("User-agent: *\nDisallow: /\n")
    result = run([cand(a, "/1"), cand(a, "/2")])
    assert result["groups"] == [] and [s["reason"] for s in result["skipped"]] == ["robots: robots.txt lines 1–2: `User-agent: *` … `Disallow: /`"] * 2


def test_mixed_host_keeps_allowed(serving):
    a = serving(HIDDEN)
    result = run([cand(a, "/links/hidden"), cand(a, "/links/leaf/1")])
    assert result["groups"][0]["urls"] == [f"{a.fake.url}/links/leaf/1"]
    assert result["skipped"] == [{"url": f"{a.fake.url}/links/hidden", "reason": HIDDEN_LINES, "failureClass": "permanent"}]


def test_too_many_rules_skips_the_host_and_says_why(serving):
    many = "User-agent: *\n" + "".join(f"Disallow: /x/{i}/\n" for i in range(MAX_RULES + 1))
    a = serving(many)
    lines: list[str] = []
    result = run([cand(a, "/open"), cand(a, "/x/1/")], lines=lines)
    assert result["groups"] == []
    assert [s["reason"] for s in result["skipped"]] == ["robots-too-large", "robots-too-large"]
    assert [s["failureClass"] for s in result["skipped"]] == ["permanent", "permanent"]
    assert any(f"{MAX_RULES + 1} rules" in line for line in lines)


def test_repeated_rules_count_once(serving):
    # the same two rules repeated past the cap are two rules: the host is crawled normally
    a = serving("User-agent: *\n" + "Disallow: /x/\nAllow: /x/ok\n" * (MAX_RULES + 1))
    result = run([cand(a, "/x/no"), cand(a, "/x/ok"), cand(a, "/y")])
    assert result["groups"][0]["urls"] == [f"{a.fake.url}/x/ok", f"{a.fake.url}/y"]
    assert result["skipped"] == [{"url": f"{a.fake.url}/x/no", "reason": "robots: robots.txt lines 1–2: `User-agent: *` … `Disallow: /x/`", "failureClass": "permanent"}]


# -- parallelism ------------------------------------------------------------------------------

@pytest.mark.parametrize("hp, n, want", [(None, 2, 2), (None, 9, 4), (1, 3, 1), (0, 3, 1), (8, 3, 3), (4, 1, 1)])
def test_parallelism_for_without_sleepers_is_the_endpoint_count(hp, n, want):
    assert parallelism_for(hp, n) == want
    assert parallelism_for(hp, n, [group(3, 2000), group(1, 500, initial=400)]) == want


def group(n, delay, initial=0):
    return {"host": "h", "urls": [f"/{i}" for i in range(n)], "delayMs": delay, "initialDelayMs": initial}


# Issue 8 item 2: hosts outnumber browsers only where the cap is the worse schedule.
@pytest.mark.parametrize("groups, want", [
    # the bench's levels 1 and 2: one 20 s Crawl-delay host (the critical path) keeps its own
    # browser; the three others fit into the second one within its chain
    ([group(2, 20000, 15000)] + [group(2, 500)] * 3, 2),
    ([group(4, 20000, 15000)] + [group(4, 500)] * 3, 2),
    # as many sleepers as browsers: with the cap they would idle every browser in turn
    ([group(2, 20000), group(2, 20000), group(3, 500), group(3, 500)], 4),
    # one sleeper, but far more work than the second browser finishes within its chain
    ([group(4, 20000)] + [group(4, 500)] * 10, 4),
    # a long initial delay alone makes a sleeper (the rest of the cross-level gap)
    ([group(1, 20000, 18000), group(1, 20000, 18000), group(2, 500)], 4),
])
def test_parallelism_for_sleepers(groups, want):
    assert parallelism_for(None, 2, groups) == want
    assert parallelism_for(3, 2, groups) == min(3, want)  # never above host_parallelism


def test_chain_and_sleeper_estimates():
    assert chain_ms(group(3, 2000, 500)) == 500 + 3 * CAPTURE_ESTIMATE_MS + 2 * 2000
    assert not is_sleeper(group(3, 2000)) and is_sleeper(group(2, CAPTURE_ESTIMATE_MS * 2 + 1))


def test_parallelism_in_plan(serving):
    a = serving(None)
    assert run([cand(a, "/1")], hp=None, endpoints='["http://1","http://2","http://3"]')["parallelism"] == 3
    assert run([cand(a, "/1")], hp=2, endpoints='["http://1","http://2","http://3"]')["parallelism"] == 2
    # three hosts asking Crawl-delay 20 on one browser: they share it instead of queueing
    slow = [serving("User-agent: *\nCrawl-delay: 20\n") for _ in range(3)]
    many = [c for s in slow for c in (cand(s, "/1"), cand(s, "/2"))]
    assert run(many, hp=None, endpoints='["http://1"]')["parallelism"] == 2


@pytest.mark.parametrize("raw, word", [("bh-1:50051", "JSON"), ("[]", "non-empty"), ('{"a":1}', "non-empty")])
def test_endpoint_count_refusals(raw, word):
    with pytest.raises(ValueError) as info:
        endpoint_count(raw)
    assert word in str(info.value)


def test_bad_endpoints_fail_only_after_robots(serving):
    a = serving(None)
    with pytest.raises(ValueError):
        run([cand(a, "/1")], endpoints="[]")
    assert a.fetched == ["/robots.txt"]


# -- the benchmark's baseline lives in the benchmark --------------------------------------------

def _main_of(path, monkeypatch, now=None):
    """``main`` of the plan_level file at ``path``, with its variables faked; ``now`` (epoch s)
    freezes the plan's clock."""
    import functools
    import importlib.util

    spec = importlib.util.spec_from_file_location(f"plan_level_copy_{abs(hash(str(path)))}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    monkeypatch.setattr(module, "read_optional_variable", lambda path: None)
    monkeypatch.setattr(module, "read_variable", lambda path: '["http://bh-1"]')
    if now is not None:
        monkeypatch.setattr(module, "plan", functools.partial(module.plan, now=lambda: now))
    return module.main


def test_the_benchmarks_patched_copy_turns_the_cross_level_rule_off_and_the_product_has_no_switch(tmp_path, monkeypatch):
    """tests/bench/politeness.py runs its baseline on a patched copy of f/; the shipped plan_level
    reads no benchmark variable and keeps the remaining gap."""
    from pathlib import Path

    from tests.bench.politeness import baseline_flow_root

    shipped = Path(__file__).resolve().parents[2] / "f/waggle/plan_level.py"
    assert "waggle_bench" not in shipped.read_text()
    copy = baseline_flow_root(tmp_path) / "f/waggle/plan_level.py"
    clock = float(int(time.time()))  # one frozen "now", whole seconds: exact however loaded the machine is
    frontier = [{"url": "https://a.example/x", "host": "a.example", "lastFinishedAt": iso_now(clock - 0.5)}]
    as_shipped = _main_of(shipped, monkeypatch, now=clock)(frontier, 3000, False, 4)
    baseline = _main_of(copy, monkeypatch, now=clock)(frontier, 3000, False, 4)
    assert as_shipped["groups"][0]["initialDelayMs"] == 2500
    assert baseline["groups"][0]["initialDelayMs"] == 0


# -- decision 105: the group carries the host's rules for the capture's navigations --------------

def test_a_group_carries_its_hosts_robots_rules_in_normal_form(serving):
    from f.waggle.robots import RobotsRules  # noqa: PLC0415

    site, open_site = serving(HIDDEN), serving(None)
    groups = {g["host"]: g for g in run([cand(site, "/a"), cand(open_site, "/b")])["groups"]}
    rules = groups[site.fake.authority]["robotsTxt"]
    assert rules == RobotsRules(HIDDEN).text and not RobotsRules(rules).allowed(f"{site.fake.url}/links/hidden")
    assert "robotsTxt" not in groups[open_site.fake.authority]  # 404: no restrictions, nothing to send
    assert "robotsTxt" not in run([cand(site, "/a")], respect=False)["groups"][0]
