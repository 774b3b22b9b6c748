"""The path_walk trap rule (issue 24 item 7): URLs of one host that differ only in numeric path
segments, walking level after level (a date-path calendar ``/cal/2026/01/01/`` → ``…/02/``
forever), are cut after ``WAGGLE_TRAP_PATH_WALK_LEVELS`` levels; siblings on one level do not
count. Driven through the planner level by level with the counts carried as ``shape_store`` does."""

from __future__ import annotations

import datetime

import pytest

from ledger.crawl import param_traps as pt
from tests.guard.test_param_traps import Crawl


def day_path(n: int) -> str:
    d = datetime.date(2026, 1, 1) + datetime.timedelta(days=n)
    return f"https://cal.test/cal/{d:%Y/%m/%d}/"


def walk(crawl: Crawl, link_of, levels: int = 10) -> int:
    """Levels 1.. with one page per level linking the next; returns how many levels kept a page."""
    kept_levels = 0
    for depth in range(1, levels + 1):
        if not crawl.level(depth, [link_of(depth)]):
            break
        kept_levels = depth
    return kept_levels


def test_date_path_calendar_is_stopped_by_path_walk():
    crawl = Crawl()
    assert walk(crawl, day_path) == pt.PATH_WALK_LEVELS_DEFAULT
    assert crawl.drops == {pt.PATH_WALK: 1}


@pytest.mark.parametrize("link_of", [
    lambda n: f"https://cal.test/cal/2026-01-{n:02d}/",                # one dashed date segment
    lambda n: f"https://cal.test/archive/2026/{n}.html",               # numbered file
    lambda n: f"https://blog.test/page/{n + 1}/",                      # /page/N+1/ "older" chain
    lambda n: f"https://cal.test/cal/2026/{n}/1/?view=week",           # numeric path with a fixed query
    lambda n: f"https://cal.test/{n}/{n + 1}/{n + 2}",                 # every segment numeric
])
def test_numeric_path_walks_of_every_spelling(link_of):
    crawl = Crawl(path_walk_levels=3)
    levels = [bool(crawl.level(depth, [link_of(depth)])) for depth in range(1, 8)]
    assert levels == [True, True, True, False, False, False, False]
    assert set(crawl.drops) == {pt.PATH_WALK}


def test_siblings_on_one_level_are_not_a_walk():
    crawl = Crawl(path_walk_levels=2)
    days = [f"https://cal.test/cal/2026/01/{d:02d}/" for d in range(1, 32)]
    assert crawl.level(1, days) == days
    assert crawl.drops == {}


def test_the_bound_is_per_shape_and_per_host():
    crawl = Crawl(path_walk_levels=2)
    assert walk(crawl, day_path) == 2
    # another host, another prefix, another depth of numbers: their own counts
    assert crawl.level(3, ["https://other.test/cal/2026/01/01/"])
    assert crawl.level(3, ["https://cal.test/news/2026/01/01/"])
    assert crawl.level(3, ["https://cal.test/cal/2026/01/"])


@pytest.mark.parametrize("link_of", [
    lambda n: f"https://s.test/post-{n}/",              # a slug with a number is not numeric
    lambda n: f"https://s.test/v{n}/docs/",             # version-like segment
    lambda n: f"https://s.test/item/{'abcdefghijkl'[n]}/",  # no number at all
])
def test_non_numeric_segments_are_not_walks(link_of):
    crawl = Crawl(path_walk_levels=2)
    assert walk(crawl, link_of, levels=10) == 10
    assert crawl.drops == {}


def test_zero_turns_the_rule_off():
    crawl = Crawl(path_walk_levels=0)
    assert walk(crawl, day_path) == 10 and crawl.drops == {}  # Crawl plans with max_depth 10


def test_path_walk_shapes():
    assert pt.path_walk_of("https://h/cal/2026/01/02/") == "https://h/cal/#/#/#/"
    assert pt.path_walk_of("https://h:8080/a/2026-01-02.html?x=1") == "https://h:8080/a/#-#-#.html?x=1"
    assert pt.path_walk_of("https://h/a/b") is None
    assert pt.path_walk_of("https://h/post-3/") is None
    assert pt.shapes_of("https://h/cal/2026/01/02/?m=3").path_walk == "https://h/cal/#/#/#/?m=3"
    assert pt.shapes_of("https://h/cal/2026;jsessionid=AB/").path_walk == "https://h/cal/#/"
    assert pt.needs_counts(["https://h/a", "https://h/cal/1/"]) and not pt.needs_counts(["https://h/a"])


@pytest.mark.parametrize("key, want", [
    ("https://10.0.0.1/a/b", None),  # a digit after "//" is the authority's, not a segment
    ("https://10.0.0.1/a/7/", "https://10.0.0.1/a/#/"),
    ("https://h/a?next=/2026/01", None),  # "/<digit>" in the query only: no numeric segment
    ("https://h/a/12?next=/2026/01", "https://h/a/#?next=/2026/01"),
    ("https://h:8080/a", None),
    ("https://h/d4/r0/l0", None),  # segments with digits that do not start with one
    ("https://h/v1.2/x", None),
])
def test_path_walk_of_a_key_with_digits_outside_its_path_segments(key, want):
    """The quick reject (no ``/<digit>`` anywhere in the key, decision 411) gives what the
    path's own check gives: digits in the authority, the query or inside a segment are no walk."""
    assert pt.path_walk_of(key) == want
