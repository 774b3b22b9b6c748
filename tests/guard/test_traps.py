"""Trap defences used when planning the next level (cases C6 and C7)."""

from __future__ import annotations

from ledger.crawl import traps
from ledger.crawl.budget import plan_next_level
from ledger.crawl.urls import parse_http_url


def P(url):  # noqa: N802 - reads like the planner's ParsedUrl
    return parse_http_url(url)


def test_c7_relative_link_loop_rejected_after_two_repetitions():
    """A page at /a/ links relatively to www.example.net/policies/ on every level."""
    url = "https://example.org/a/"
    seen = []
    for _ in range(6):
        url = url + "www.example.net/policies/"
        seen.append((url, traps.trap_reason(url)))
    assert [r for _, r in seen[:2]] == [None, None]  # one and two occurrences pass
    assert seen[2][1] in (traps.REPEATED_SEGMENT, traps.REPEATED_HOSTNAME)
    assert all(r is not None for _, r in seen[2:])


def test_repeated_segment_and_hostname_rules_separately():
    assert traps.trap_reason("http://h.test/x/y/x/y/") is None
    assert traps.trap_reason("http://h.test/x/y/x/y/x/") == traps.REPEATED_SEGMENT
    assert traps.trap_reason("http://h.test/a/a/a") == traps.REPEATED_SEGMENT
    assert traps.trap_reason("http://h.test/A/a/%61") == traps.REPEATED_SEGMENT  # decoded, case-folded
    # the same host name in different segments (each segment distinct) and in the query
    assert (
        traps.trap_reason("http://h.test/go_www.ex.net/p/to_www.ex.net/q/via:www.ex.net/")
        == traps.REPEATED_HOSTNAME
    )
    assert traps.trap_reason("http://h.test/r?u=www.ex.net&v=www.ex.net&w=WWW.EX.NET") == traps.REPEATED_HOSTNAME
    assert traps.trap_reason("http://h.test/r?u=www.ex.net&v=www.ex.net") is None
    # empty segments and ordinary deep paths are not traps
    assert traps.trap_reason("http://h.test/a//b//c//d") is None
    assert traps.trap_reason("http://h.test/2026/11/29/story/index.html") is None
    assert traps.trap_reason("http://h.test/docs/v1/api/v1/index.html") is None


def test_url_length_limit_is_2048_characters():
    base = "http://h.test/"
    at_limit = base + "a" * (2048 - len(base))
    assert len(at_limit) == 2048 and traps.trap_reason(at_limit) is None
    assert traps.trap_reason(at_limit + "b") == traps.URL_TOO_LONG
    # the serialized (percent-encoded) form counts too: 700 × "é" becomes 4,200 characters
    idn = base + "é" * 700
    assert len(idn) < 2048 and traps.trap_reason(idn) == traps.URL_TOO_LONG


def test_screen_counts_each_reason_and_keeps_order():
    cands = [
        P("http://a.test/1"),
        P("http://a.test/x/x/x"),
        P("http://b.test/" + "z" * 3000),
        P("http://a.test/2"),
        P("http://b.test/1"),
        P("http://a.test/3"),
        P("http://a.test/4"),
    ]
    kept, drops = traps.screen(cands, known_per_host={"a.test": 1}, max_pages_per_host=3)
    assert [c.url for c in kept] == ["http://a.test/1", "http://a.test/2", "http://b.test/1"]
    assert drops == {"repeated_segment": 1, "url_too_long": 1, "max_pages_per_host": 2}


def test_screen_without_cap_and_with_string_candidates():
    kept, drops = traps.screen(["http://a.test/1", "http://a.test/2"], known_per_host={"a.test": 99}, max_pages_per_host=None)
    assert kept == ["http://a.test/1", "http://a.test/2"] and drops == {}
    kept, drops = traps.filter_traps(["http://a.test:8080/1", "http://a.test:8080/2"], {"a.test:8080": 1}, 2)
    assert kept == ["http://a.test:8080/1"] and drops == {"max_pages_per_host": 1}


def test_merge_drops():
    assert traps.merge_drops({"url_too_long": 1}, None, {"url_too_long": 2, "max_pages_per_host": 1}) == {
        "url_too_long": 3,
        "max_pages_per_host": 1,
    }


def test_c6_calendar_trap_cannot_eat_other_hosts_budget():
    """Level by level through the real planner: a calendar host links to next/previous months
    forever; a second host has 30 ordinary pages. Budget 40, per-host cap 10."""
    max_pages, cap = 40, 10
    per_host = {"cal.test": 1, "news.test": 1}
    known = 2
    frontier_cal = [(2026, 11)]
    news_left = [f"http://news.test/story/{i}" for i in range(30)]
    drops_total: dict[str, int] = {}
    seen = {"http://cal.test/cal?y=2026&m=11"}
    depth = 0
    while True:
        depth += 1
        cands = []
        for y, m in frontier_cal:
            for dm in (-1, 1):
                yy, mm = (y + (m + dm - 1) // 12, (m + dm - 1) % 12 + 1)
                url = f"http://cal.test/cal?y={yy}&m={mm}"
                if url not in seen:  # the ledger offers only not-yet-known URLs
                    seen.add(url)
                    cands.append(P(url))
        cands += [P(u) for u in news_left[:5]]
        plan = plan_next_level(
            cands, next_depth=depth, max_depth=50, max_pages=max_pages, known=known,
            known_per_host=per_host, max_pages_per_host=cap,
        )
        drops_total = traps.merge_drops(drops_total, plan.drops)
        if not plan.urls:
            break
        known += len(plan.urls)
        frontier_cal = []
        for c in plan.urls:
            per_host[c.host] = per_host.get(c.host, 0) + 1
            if c.host == "cal.test":
                q = dict(p.split("=") for p in c.url.split("?")[1].split("&"))
                frontier_cal.append((int(q["y"]), int(q["m"])))
            else:
                news_left.remove(c.url)
        if plan.stop_reason:
            break
        assert depth < 40, "the crawl must end"
    assert per_host["cal.test"] == cap and per_host["news.test"] == cap
    assert drops_total.get("max_pages_per_host", 0) > 0
    assert known <= max_pages
