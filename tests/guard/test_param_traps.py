"""Query-parameter traps (issue 13 item 5): ``?month=N+1`` walks, calendars, facet explosions,
session ids. Pure rules (``ledger.crawl.param_traps``) driven level after level through the
planner, with the counts carried from level to level as the shape store carries them."""

from __future__ import annotations

import pytest

from ledger.crawl import param_traps as pt
from ledger.crawl.budget import plan_next_level
from ledger.crawl.urls import parse_http_url


def P(url):  # noqa: N802
    return parse_http_url(url)


class Crawl:
    """The crawl's shape counts across levels, kept the way ``shape_store`` keeps them."""

    def __init__(self, walk_levels=pt.WALK_LEVELS_DEFAULT, query_variants=pt.QUERY_VARIANTS_DEFAULT,
                 path_walk_levels=pt.PATH_WALK_LEVELS_DEFAULT):
        self.walk_levels, self.query_variants = walk_levels, query_variants
        self.path_walk_levels = path_walk_levels
        self.path_walks: dict[str, set[int]] = {}
        self.variants: dict[str, int] = {}
        self.walks: dict[str, set[int]] = {}
        self.sessionless: set[str] = set()
        self.pages: set[str] = set()
        self.drops: dict[str, int] = {}

    def level(self, depth: int, urls: list[str]) -> list[str]:
        counts = pt.ShapeCounts(next_depth=depth, walk_levels=self.walk_levels, query_variants=self.query_variants,
                                variants=dict(self.variants), walk_depths={k: set(v) for k, v in self.walks.items()},
                                sessionless=set(self.sessionless) | self.pages,
                                path_walk_levels=self.path_walk_levels,
                                path_walk_depths={k: set(v) for k, v in self.path_walks.items()})
        new = [P(u) for u in urls if P(u).key not in self.pages]
        plan = plan_next_level(new, next_depth=depth, max_depth=10, max_pages=10_000, known=len(self.pages),
                               shape_counts=counts)
        for reason, n in plan.drops.items():
            self.drops[reason] = self.drops.get(reason, 0) + n
        for p in plan.urls:  # what shape_store.save records
            self.pages.add(p.key)
            s = pt.shapes_of(p.key)
            if s.path:
                self.variants[s.path] = self.variants.get(s.path, 0) + 1
            if s.walk:
                self.walks.setdefault(s.walk, set()).add(depth)
            if s.sessionless:
                self.sessionless.add(s.sessionless)
            if s.path_walk:
                self.path_walks.setdefault(s.path_walk, set()).add(depth)
        return [p.url for p in plan.urls]


def test_month_plus_one_forever_is_stopped_by_a_trap_rule():
    """Each page links to ?month=N+1 of itself: after ``walk_levels`` levels the next month is
    dropped as parameter_walk, long before any page budget (10,000) or depth limit (10)."""
    crawl = Crawl()
    month, kept_levels = 1, 0
    for depth in range(1, 11):
        kept = crawl.level(depth, [f"https://cal.test/events?month={month + 1}"])
        if not kept:
            break
        kept_levels, month = depth, month + 1
    assert kept_levels == pt.WALK_LEVELS_DEFAULT
    assert crawl.drops == {pt.PARAMETER_WALK: 1}


@pytest.mark.parametrize("links", [
    lambda n: [f"https://cal.test/cal?y=2026&m={n}", f"https://cal.test/cal?y=2026&m={n + 2}"],  # next + previous
    lambda n: [f"https://cal.test/day?date=2026-11-{n:02d}"],  # date-valued
    lambda n: [f"https://cal.test/day?d=2026{n:04d}&view=week"],  # compact date with a fixed parameter
    lambda n: [f"https://shop.test/list?page={n}&sort=price"],  # "older" chain
])
def test_numeric_and_date_walks_of_every_spelling(links):
    crawl = Crawl(walk_levels=3)
    levels = [bool(crawl.level(depth, links(depth * 2))) for depth in range(1, 8)]
    assert levels == [True, True, True, False, False, False, False]
    assert set(crawl.drops) == {pt.PARAMETER_WALK}


def test_siblings_on_one_level_are_not_a_walk():
    crawl = Crawl(walk_levels=2)
    assert len(crawl.level(1, [f"https://s.test/list?page={n}" for n in range(2, 40)])) == 38
    assert crawl.drops == {}


def test_walk_shapes_keep_names_and_text_values_apart():
    assert pt.shapes_of("https://a.test/p?m=1&y=2").walk == pt.shapes_of("https://a.test/p?y=20&m=12").walk
    assert pt.shapes_of("https://a.test/p?m=1").walk != pt.shapes_of("https://a.test/q?m=1").walk
    assert pt.shapes_of("https://a.test/p?cat=shoes&m=1").walk != pt.shapes_of("https://a.test/p?cat=hats&m=1").walk
    assert pt.shapes_of("https://a.test/p?cat=shoes").walk is None  # no digit: not a walk


def test_query_variants_cap_per_path():
    crawl = Crawl(query_variants=10)
    facets = [f"https://shop.test/search?color={c}&size={s}" for c in "abcdef" for s in "uvwxyz"]
    kept = crawl.level(1, facets)
    assert len(kept) == 10 and crawl.drops == {pt.QUERY_VARIANTS: 26}
    assert crawl.level(2, ["https://shop.test/search?color=q&size=q"]) == []  # the cap spans levels
    assert crawl.level(2, ["https://shop.test/other?color=q"]) == ["https://shop.test/other?color=q"]


@pytest.mark.parametrize("variant", [
    "https://s.test/page?id=4&PHPSESSID=abc123", "https://s.test/page?sid=9f8e7d6c5b4a39281706&id=4",
    "https://s.test/page;jsessionid=A1B2?id=4", "https://s.test/page?id=4&ASPSESSIONIDQQ=XY",
])
def test_session_ids_do_not_make_new_pages(variant):
    crawl = Crawl()
    assert crawl.level(1, ["https://s.test/page?id=4"]) == ["https://s.test/page?id=4"]
    assert crawl.level(2, [variant]) == []
    assert crawl.drops == {pt.SESSION_ID: 1}


def test_session_variants_among_themselves():
    crawl = Crawl()
    token = "0123456789abcdef{:04d}".format
    kept = crawl.level(1, [f"https://s.test/p?sid={token(i)}" for i in range(5)] + ["https://s.test/q?x=1"])
    assert kept == [f"https://s.test/p?sid={token(0)}", "https://s.test/q?x=1"]
    assert crawl.level(2, [f"https://s.test/p?sid={token(99)}", "https://s.test/p"]) == []
    assert crawl.drops == {pt.SESSION_ID: 6}


def test_a_short_sid_is_a_page_id_not_a_session():
    """``?sid=`` names stories on some sites: only a token-like value is a session."""
    crawl = Crawl()
    assert crawl.level(1, ["https://news.test/article.pl"]) == ["https://news.test/article.pl"]
    stories = [f"https://news.test/article.pl?sid=06/01/{d:02d}" for d in range(1, 6)]
    assert crawl.level(2, stories) == stories
    assert crawl.drops == {}


def test_rules_off_and_urls_without_query_untouched():
    crawl = Crawl(walk_levels=0, query_variants=0)
    for depth in range(1, 9):
        assert crawl.level(depth, [f"https://cal.test/e?month={depth}"])
    plain = [f"https://a.test/item/{n}" for n in range(200)]
    assert len(Crawl(walk_levels=1, query_variants=1).level(1, plain)) == 200
