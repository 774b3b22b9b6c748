"""Issue 29 item 1: scope types, include/exclude patterns and extra hops (ledger.crawl.scope),
pure — each rule with its neighbours (docs/decisions/171)."""

from __future__ import annotations

import time

import pytest

from ledger.crawl.scope import (InvalidPattern, LinkFilter, Scope, accept_links, canonical, compile_patterns,
                                prefix_of, registered_domain)
from ledger.crawl.urls import parse_http_url


def p(url):
    return parse_http_url(url)


def takes(scope: Scope, url: str) -> str:
    return scope.verdict(p(url))


def test_page_takes_the_seeds_only():
    s = Scope.build([p("https://a.example/docs/intro.html"), p("https://b.example/")], "page")
    assert takes(s, "https://a.example/docs/intro.html#top") == "in"  # same dedup key
    assert takes(s, "HTTPS://A.EXAMPLE:443/docs/intro.html") == "in"
    assert takes(s, "https://b.example/") == "in"
    for url in ("https://a.example/docs/other.html", "https://a.example/docs/intro.html?x=1", "https://a.example/"):
        assert takes(s, url) == "out", url


def test_prefix_takes_the_seeds_directory():
    seed = p("https://a.example/docs/intro.html?lang=en")
    assert prefix_of(seed) == "https://a.example/docs/"
    s = Scope.build([seed], "prefix")
    assert takes(s, "https://a.example/docs/") == "in"
    assert takes(s, "https://a.example/docs/deep/page?q=1") == "in"
    assert takes(s, "https://a.example/%64ocs/x") == "in"  # normalized: %64 is d
    for url in ("https://a.example/doc", "https://a.example/docsx/", "https://a.example/", "http://a.example/docs/x",
                "https://a.example:8443/docs/x", "https://b.example/docs/x"):
        assert takes(s, url) == "out", url
    # a seed without a trailing slash: its parent directory
    assert prefix_of(p("https://a.example/docs")) == "https://a.example/"


def test_host_takes_any_scheme_not_another_port_nor_subdomain():
    s = Scope.build([p("https://a.example/x")], "host")
    assert takes(s, "http://a.example/y") == "in"
    for url in ("https://a.example:8443/", "https://www.a.example/", "https://example/"):
        assert takes(s, url) == "out", url


def test_origin_is_the_default_and_old_names_are_aliases():
    assert canonical("same-origin") == "origin" and canonical("same-host") == "host"
    s = Scope.build([p("https://a.example/x")], "same-origin")
    assert s.kind == "origin"
    assert takes(s, "https://a.example/deeper") == "in"
    assert takes(s, "http://a.example/") == "out"
    with pytest.raises(ValueError, match="unknown scope 'any'"):
        canonical("any")


def test_domain_uses_the_public_suffix_list():
    assert registered_domain("www.a.example.co.uk") == "example.co.uk"
    assert registered_domain("user.github.io") == "user.github.io"  # private section: each user a domain
    assert registered_domain("127.0.0.1") == "127.0.0.1" and registered_domain("localhost") == "localhost"
    s = Scope.build([p("https://www.example.co.uk/")], "domain")
    for url in ("https://example.co.uk/", "http://shop.example.co.uk:8080/a", "https://a.b.example.co.uk/"):
        assert takes(s, url) == "in", url
    for url in ("https://other.co.uk/", "https://example.com/", "https://co.uk/", "https://notexample.co.uk/"):
        assert takes(s, url) == "out", url
    gh = Scope.build([p("https://alice.github.io/")], "domain")
    assert takes(gh, "https://docs.alice.github.io/") == "in"
    assert takes(gh, "https://bob.github.io/") == "out"  # another user's site, not alice's domain
    ip = Scope.build([p("http://127.0.0.1:8000/")], "domain")
    assert takes(ip, "http://127.0.0.1:9000/") == "in" and takes(ip, "http://127.0.0.2/") == "out"


def test_include_widens_exclude_always_wins():
    s = Scope.build([p("https://a.example/")], "origin", include=[r"^https://cdn\.example/img/"],
                    exclude=[r"/private/", r"\?sort="])
    assert takes(s, "https://a.example/page") == "in"
    assert takes(s, "https://cdn.example/img/1.png") == "in"  # include widens
    assert takes(s, "https://cdn.example/css/1.css") == "out"
    assert takes(s, "https://a.example/private/x") == "excluded"  # exclude beats the type
    assert takes(s, "https://a.example/list?sort=asc") == "excluded"
    s2 = Scope.build([p("https://a.example/")], "page", include=["/keep"], exclude=["/keep/not"])
    assert takes(s2, "https://a.example/keep/yes") == "in"
    assert takes(s2, "https://a.example/keep/not") == "excluded"  # exclude beats include


def test_patterns_match_the_normalized_url():
    s = Scope.build([p("https://a.example/")], "origin", exclude=[r"^https://a\.example/~user$"])
    assert takes(s, "https://A.EXAMPLE/%7euser#frag") == "excluded"


@pytest.mark.parametrize("pattern, why", [("(", "missing )"), (r"(a)\1", "escape"), ("(?=x)", ""),
                                          ("", "non-empty"), ("a" * 1001, "longer than 1000"),
                                          ("x{1001}", "repetition"), ("(a{999}){999}", ""),
                                          ("\ud800", "lone surrogate")])
def test_invalid_pattern_is_named(pattern, why):
    with pytest.raises(InvalidPattern) as err:
        compile_patterns(["fine", pattern], "exclude")
    assert err.value.field == "exclude"
    assert err.value.pattern == pattern.encode("utf-8", "backslashreplace").decode()
    assert why in str(err.value) and "exclude pattern" in str(err.value)


def test_too_many_patterns():
    with pytest.raises(InvalidPattern, match="at most 100"):
        compile_patterns(["a"] * 101, "include")


def test_catastrophic_pattern_is_linear():
    """(a+)+$ backtracks exponentially in Python's re; RE2 answers in linear time."""
    s = Scope.build([p("https://a.example/")], "page", exclude=[r"(a+)+$"])
    url = "https://b.example/" + "a" * 5000 + "!"
    t = time.perf_counter()
    assert takes(s, url) == "out"
    assert time.perf_counter() - t < 0.5


def test_links_screened_with_drop_reasons():
    seeds = [p("https://a.example/")]
    s = Scope.build(seeds, "origin", exclude=["/logout"])
    out = accept_links([{"href": "https://a.example/x"}, {"href": "https://a.example/logout"},
                        {"href": "https://b.example/"}, {"href": "https://a.example/x#2"}], seeds, s)
    assert [u.url for u in out.urls] == ["https://a.example/x"]
    assert out.drops == {"excluded": 1, "out_of_scope": 1, "duplicate": 1}


def test_extra_hops_takes_one_hop_out_and_not_beyond():
    seeds = [p("https://a.example/")]
    s = Scope.build(seeds, "origin", exclude=["/ads/"], extra_hops=1)
    links = [{"href": "https://b.example/ref"}, {"href": "https://a.example/in"},
             {"href": "https://c.example/ads/x"}]
    screen = LinkFilter(seeds, s)
    got = screen.accept(links, hops=0)  # a page in scope
    assert [u.url for u in got] == ["https://b.example/ref", "https://a.example/in"]
    assert screen.outside == {"https://b.example/ref": 1}  # in-scope pages are not "outside"
    assert screen.drops == {"excluded": 1}  # an exclude wins over extra hops too
    # the page one hop out: captured, its links not expanded
    beyond = LinkFilter(seeds, s)
    assert beyond.accept([{"href": "https://d.example/"}, {"href": "https://a.example/back"}], hops=1) == []
    assert beyond.drops == {"extra_hops": 2}


def test_extra_hops_two_and_least_hops_wins():
    seeds = [p("https://a.example/")]
    s = Scope.build(seeds, "origin", extra_hops=2)
    screen = LinkFilter(seeds, s)
    assert [u.url for u in screen.accept([{"href": "https://x.example/"}], hops=1)] == ["https://x.example/"]
    assert screen.outside == {"https://x.example/": 2}
    screen.accept([{"href": "https://x.example/"}], hops=0)  # found again nearer the scope
    assert screen.outside == {"https://x.example/": 1}
    assert screen.accept([{"href": "https://y.example/"}], hops=2) == []  # at the limit: not expanded
    none = LinkFilter(seeds, Scope.build(seeds, "origin"))
    assert none.accept([{"href": "https://x.example/"}]) == [] and none.drops == {"out_of_scope": 1}


def test_page_scope_with_extra_hops_takes_the_seeds_links_only():
    seeds = [p("https://a.example/start")]
    s = Scope.build(seeds, "page", extra_hops=1)
    screen = LinkFilter(seeds, s)
    got = screen.accept([{"href": "https://a.example/next"}, {"href": "https://a.example/start"}], hops=0)
    assert [u.url for u in got] == ["https://a.example/next", "https://a.example/start"]
    assert screen.outside == {"https://a.example/next": 1}
