"""Hosts of one server share one gap in the flow (f/waggle/servers.py, decision 241) and a slow
host's gap follows its document time (f/waggle/slowhost.py, decision 242)."""

from __future__ import annotations

import threading
import time
from datetime import datetime, timezone

from f.waggle import servers, slowhost
from f.waggle.crawl_host import HostGap
from f.waggle.robots import RobotsOutcome
from f.waggle.plan_level import plan


def _iso(t: float) -> str:
    return datetime.fromtimestamp(t, timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def test_adapted_gap_is_k_times_the_document_time_never_below_the_floor():
    assert slowhost.adapted_gap_ms(2000, 400, 5.0) == 2000  # 5 × 400 = floor: the floor holds
    assert slowhost.adapted_gap_ms(1200, 400, 5.0) == 2000
    assert slowhost.adapted_gap_ms(1200, 401, 5.0) == 2005
    assert slowhost.adapted_gap_ms(3000, 100, 5.0) == 3000  # a fast page never shortens the delay
    assert slowhost.adapted_gap_ms(300, 20_000, 5.0) == slowhost.ADAPT_CAP_MS  # the adapted part is capped
    assert slowhost.adapted_gap_ms(60_000, 20_000, 5.0) == 60_000  # … but never below the floor
    assert slowhost.adapted_gap_ms(1000, None, 5.0) == 1000
    assert slowhost.adapted_gap_ms(1000, 900, 0.0) == 1000  # factor 0: off


def test_document_ms_and_factor_read_only_sane_values():
    assert slowhost.document_ms({"documentMs": 412}) == 412
    assert slowhost.document_ms({"documentMs": 411.2}) == 412
    for bad in ({}, {"documentMs": None}, {"documentMs": -1}, {"documentMs": "400"}, {"documentMs": True}, None):
        assert slowhost.document_ms(bad) is None
    assert slowhost.factor_of(None) == slowhost.DEFAULT_DELAY_FACTOR
    assert slowhost.factor_of(2) == 2.0 and slowhost.factor_of(-3) == 0.0
    assert slowhost.factor_of(1e9) == slowhost.MAX_DELAY_FACTOR


def test_host_gap_adapts_to_the_last_page_and_back_off_keeps_the_floor():
    said: list[str] = []
    gap = HostGap(1200, said.append, factor=5.0)
    gap.adapt(400)
    assert gap.ms == 2000 and gap.floor == 1200
    gap.adapt(100)  # the last page decides: back to the delay, never below it
    assert gap.ms == 1200
    gap.adapt(None)
    assert gap.ms == 1200
    gap.adapt(1000)
    gap.back_off(429)  # doubles the floor (the delay), keeps the longer adapted gap
    assert gap.floor == 2400 and gap.ms == 5000
    gap.adapt(10)
    assert gap.ms == 2400  # never back below the backed-off delay
    assert any("delay factor 5" in s for s in said)


def test_hosts_of_one_server_become_one_item_with_the_larger_delay():
    groups = [
        {"host": "a.test", "urls": ["http://a.test/1"], "delayMs": 500, "initialDelayMs": 0, "notBefore": 10.0},
        {"host": "c.test", "urls": ["http://c.test/1"], "delayMs": 300, "initialDelayMs": 0, "notBefore": 10.0},
        {"host": "b.test", "urls": ["http://b.test/1", "http://b.test/2"], "delayMs": 900, "initialDelayMs": 700,
         "notBefore": 10.7, "robotsTxt": "user-agent: *\ndisallow: /x\n"},
    ]
    merged = servers.merge_groups(groups, {"a.test": "127.0.0.1", "b.test": "127.0.0.1", "c.test": "c.test"})
    assert [g["host"] for g in merged] == ["127.0.0.1 (a.test, b.test)", "c.test"]
    one = merged[0]
    assert one["server"] == "127.0.0.1" and one["delayMs"] == 900
    assert one["initialDelayMs"] == 700 and one["notBefore"] == 10.7
    assert one["urls"] == ["http://a.test/1", "http://b.test/1", "http://b.test/2"]
    assert [m["host"] for m in one["members"]] == ["a.test", "b.test"]
    assert all(m["delayMs"] == 900 for m in one["members"])
    assert one["members"][1]["robotsTxt"].startswith("user-agent")  # each host keeps its own robots.txt
    assert merged[1] is groups[1]  # a server with one host is unchanged


def test_members_are_captured_one_after_the_other_the_server_gap_apart():
    calls: list[tuple[str, int]] = []
    clock = [1000.0]

    def run(member, wait_ms, at, gap_out):
        calls.append((member["host"], wait_ms))
        clock[0] += wait_ms / 1000.0 + 0.1
        gap_out["ms"] = 2500 if member["host"] == "a.test" else 900  # a.test was slow: its gap carries on
        return [{"url": u, "status": "captured", "gapFrom": _iso(clock[0])} for u in member["urls"]]

    members = [{"host": "a.test", "urls": ["http://a.test/"]}, {"host": "b.test", "urls": ["http://b.test/"]},
               {"host": "d.test", "urls": ["http://d.test/"]}]
    out = servers.capture_members(members, run, delay_ms=900, initial_delay_ms=300, not_before=None,
                                  now=lambda: clock[0], log=lambda _s: None)
    assert [r["url"] for r in out] == ["http://a.test/", "http://b.test/", "http://d.test/"]
    assert calls[0] == ("a.test", 300)
    assert calls[1][0] == "b.test" and 2490 <= calls[1][1] <= 2500  # after a.test: its slow gap, not 900
    assert calls[2][0] == "d.test" and 890 <= calls[2][1] <= 900  # after b.test: the delay again


def test_next_member_wait_counts_from_the_latest_gap_start():
    now = 5000.0
    results = [{"gapFrom": _iso(now - 0.2)}, {"status": "skipped"}, {"finishedAt": _iso(now - 1.0)}]
    assert 790 <= servers.next_member_wait_ms(results, 1000, now) <= 800
    assert servers.next_member_wait_ms(results, 100, now) == 0
    assert servers.next_member_wait_ms([{"status": "skipped"}], 1000, now) == 0


def test_spaced_fetch_never_overlaps_one_server_and_keeps_its_delay():
    spans: dict[str, list[tuple[float, float]]] = {}
    lock = threading.Lock()

    def fetch(url):
        start = time.monotonic()
        time.sleep(0.03)
        with lock:
            spans.setdefault(url, []).append((start, time.monotonic()))
        return url

    wrapped = servers.spaced_fetch(fetch, {"a.test": "S", "b.test": "S"}, {"S": 150}, now=time.monotonic)
    threads = [threading.Thread(target=wrapped, args=(f"http://{h}/robots.txt",)) for h in ("a.test", "b.test", "c.test")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    (a0, a1), (b0, b1) = spans["http://a.test/robots.txt"][0], spans["http://b.test/robots.txt"][0]
    first_end, second_start = (a1, b0) if a0 < b0 else (b1, a0)
    assert second_start - first_end >= 0.15  # the server's delay between its two fetches
    c0 = spans["http://c.test/robots.txt"][0][0]
    assert c0 - min(a0, b0) < 0.1  # another server is not held up


def test_plan_merges_hosts_the_ledger_named_one_server_and_spaces_their_robots_fetches():
    fetched: list[tuple[str, float, float]] = []

    def fetch(url):
        start = time.time()
        time.sleep(0.02)
        fetched.append((url, start, time.time()))
        return RobotsOutcome("unavailable", None, "404")

    candidates = [
        {"url": "http://localhost:8000/a", "host": "localhost:8000", "server": "127.0.0.1:8000", "hostDelayMs": 0},
        {"url": "http://127.0.0.1:8000/b", "host": "127.0.0.1:8000", "server": "127.0.0.1:8000"},
        {"url": "http://other.test/", "host": "other.test"},
    ]
    out = plan(candidates, 400, True, 4, fetch=fetch, read_endpoints=lambda: '["http://e"]', log=lambda _s: None)
    hosts = sorted(g["host"] for g in out["groups"])
    assert hosts == ["127.0.0.1:8000 (localhost:8000, 127.0.0.1:8000)", "other.test"]
    group = next(g for g in out["groups"] if "members" in g)
    assert [m["host"] for m in group["members"]] == ["localhost:8000", "127.0.0.1:8000"]
    same = sorted((s, e) for u, s, e in fetched if "8000" in u)
    assert same[1][0] - same[0][1] >= 0.4  # the second host's robots.txt a delay after the first's
    assert group["initialDelayMs"] >= 300  # the first capture waits the delay after the last of them

