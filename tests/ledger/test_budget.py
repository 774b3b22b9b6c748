"""Budget and stop reasons (ledger.md §7.5, §12.24) and the next-level planner's trap hook."""

from __future__ import annotations

import pytest

from ledger.crawl.budget import plan_budget, plan_next_level
from ledger.crawl.urls import parse_http_url


def budget(cands, nxt, max_depth, max_pages, known):
    return plan_budget(cands, next_depth=nxt, max_depth=max_depth, max_pages=max_pages, known=known)


@pytest.mark.parametrize(
    "n,nxt,max_depth,max_pages,known,expected_len,reason",
    [
        (3, 3, 2, 100, 1, 0, "max_depth"),     # beyond the depth limit
        (3, 2, 2, 100, 1, 3, None),            # next == max allowed
        (3, 3, 2, 5, 5, 0, "max_depth"),       # both exhausted → depth wins
        (3, 1, 2, 10, 10, 0, "max_pages"),     # known == maxPages
        (10, 1, 2, 10, 8, 2, "max_pages"),     # room 2 of 10
        (3, 1, 2, 5, 4, 1, "max_pages"),       # room 1 of 3
        (3, 1, 2, 5, 2, 3, None),              # exact fit
        (30, 1, 2, 30, 1, 29, "max_pages"),    # the seed counts against the budget
        (0, 1, 2, 30, 1, 0, None),             # nothing found, nothing applies
        (5, 1, 10, 10000, 0, 5, None),         # no limit reached
        (3, 1, 2, 3, 7, 0, "max_pages"),       # over budget already
    ],
)
def test_budget_table(n, nxt, max_depth, max_pages, known, expected_len, reason):
    cands = list(range(n))
    out, why = budget(cands, nxt, max_depth, max_pages, known)
    assert out == cands[:expected_len]
    assert why == reason


def test_budget_returns_a_copy():
    cands = [1, 2]
    out, _ = budget(cands, 1, 2, 10, 0)
    out.append(3)
    assert cands == [1, 2]


def test_plan_next_level_depth_first_then_traps_then_budget():
    urls = [parse_http_url(u) for u in [
        "https://a.test/x/y/x/y/x/y/",       # repeated segment: a trap
        "https://a.test/1", "https://a.test/2", "https://b.test/1",
    ]]
    plan = plan_next_level(urls, next_depth=3, max_depth=2, max_pages=100, known=1)
    assert (plan.urls, plan.stop_reason, plan.drops) == ([], "max_depth", {})
    plan = plan_next_level(urls, next_depth=1, max_depth=2, max_pages=3, known=1)
    # the trap is screened out before the budget, so it does not use a slot; hosts take turns
    assert [u.url for u in plan.urls] == ["https://a.test/1", "https://b.test/1"]
    assert plan.stop_reason == "max_pages"
    assert plan.drops.get("repeated_segment") == 1


def test_plan_next_level_per_host_cap():
    urls = [parse_http_url(f"https://cal.test/?m={i}") for i in range(10)] + [parse_http_url("https://other.test/")]
    plan = plan_next_level(urls, next_depth=1, max_depth=5, max_pages=100, known=2,
                           known_per_host={"cal.test": 1, "other.test": 1}, max_pages_per_host=4)
    assert [u.host for u in plan.urls].count("cal.test") == 3
    assert "https://other.test/" in [u.url for u in plan.urls]
    assert plan.drops.get("max_pages_per_host") == 7
    assert plan.stop_reason is None


# -- the budget cut interleaves hosts (issue 13 item 8) ----------------------------------------

def links(host: str, n: int) -> list:
    return [parse_http_url(f"https://{host}/p{i}") for i in range(n)]


def test_two_seeds_22_links_on_a_do_not_starve_b():
    """Two seeds (a.test, b.test), max-pages 30: level 1 has room 28. A's 22 links come first in
    discovery order; B's 22 after. Each host gets 14, each its first 14 in discovery order."""
    cands = links("a.test", 22) + links("b.test", 22)
    out, why = budget(cands, 1, 2, 30, 2)
    assert why == "max_pages" and len(out) == 28
    assert [u.url for u in out if u.host == "a.test"] == [u.url for u in links("a.test", 14)]
    assert [u.url for u in out if u.host == "b.test"] == [u.url for u in links("b.test", 14)]
    assert out == [c for c in cands if c in out]  # discovery order kept


@pytest.mark.parametrize("sizes, room, shares", [
    ((22, 8), 28, (20, 8)),      # a small host leaves its turns to the others
    ((22, 22), 28, (14, 14)),
    ((5, 5, 5), 7, (3, 2, 2)),    # the first-seen host takes the odd slot
    ((1, 30, 2), 10, (1, 7, 2)),
    ((40,), 10, (10,)),           # one host: the first ``room`` in discovery order
])
def test_round_robin_shares(sizes, room, shares):
    hosts = [f"h{i}.test" for i in range(len(sizes))]
    cands = [c for h, n in zip(hosts, sizes) for c in links(h, n)]
    out, _ = budget(cands, 1, 5, room, 0)
    assert tuple(sum(1 for u in out if u.host == h) for h in hosts) == shares


def test_interleaved_discovery_order_is_kept_within_each_host():
    cands = [parse_http_url(u) for u in ["https://b.test/1", "https://a.test/1", "https://b.test/2",
                                         "https://b.test/3", "https://a.test/2", "https://a.test/3"]]
    out, _ = budget(cands, 1, 5, 4, 0)
    assert [u.url for u in out] == ["https://b.test/1", "https://a.test/1", "https://b.test/2", "https://a.test/2"]
