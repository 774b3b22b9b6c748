"""Two crawls sharing a host through the whole local stack (issue 12): the host's own access
log shows captures of both crawls and no gap below the larger delay (and each crawl's own host
is crawled at the same time); both succeed and leave no lease behind."""

from __future__ import annotations

import psycopg

from tests.bench.concurrent import CrawlPlan, felt_gaps, make_hosts, run_crawls

PLANS = (
    CrawlPlan(((0, "/aa"), (1, "/aa")), 1000),
    CrawlPlan(((0, "/ab"), (2, "/aa")), 2500),
)


def test_two_crawls_share_a_host_politely(local_stack):
    hosts = make_hosts(3, {})
    try:
        run = run_crawls(local_stack.api_url, local_stack.token(), local_stack.info["database_url"], hosts, PLANS,
                         timeout_s=420)
    finally:
        for h in hosts:
            h.stop()
    assert [c["view"]["state"] for c in run["crawls"]] == ["succeeded", "succeeded"], "\n".join(
        str(c["view"].get("error")) for c in run["crawls"])
    pages = "\n".join(f"{p['crawl'][:8]} {p['url']} depth {p['depth']} {p['state']} {p['reason']}"
                      for p in run["pages"])
    assert [c["view"]["pagesCaptured"] for c in run["crawls"]] == [6, 6], pages
    gaps = felt_gaps(run, hosts, {})
    assert gaps["unattributed"] == []
    shared = gaps["per_host"]["host0"]
    assert shared["captures"] == 6 and shared["crawls"] == 2
    assert any(g["cross_crawl"] for g in shared["gaps"])  # the host went from one crawl to the other
    assert gaps["below"] == [], gaps["below"]
    # the crawls overlapped in time (they ran at once, not one after the other)
    spans = {}
    for p in run["pages"]:
        if p["submitted"] is not None:
            lo, hi = spans.get(p["crawl"], (p["submitted"], p["finished"]))
            spans[p["crawl"]] = (min(lo, p["submitted"]), max(hi, p["finished"]))
    (a0, a1), (b0, b1) = spans.values()
    assert a0 < b1 and b0 < a1
    with psycopg.connect(local_stack.info["database_url"]) as conn:
        assert conn.execute("SELECT count(*) FROM host_leases").fetchone()[0] == 0
        assert conn.execute("SELECT count(*) FROM host_waits").fetchone()[0] == 0
