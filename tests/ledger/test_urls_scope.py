"""URL parsing, scope and link acceptance (ledger.md §7.4, §12.23; field case C5)."""

from __future__ import annotations

import pytest

from ledger.crawl.scope import LinkFilter, accept_links, in_scope, is_nofollow
from ledger.crawl.urls import InvalidUrl, has_userinfo, parse_http_url as p


def test_fragment_dropped_query_untouched():
    u = p("https://example.com/start?b=2&a=1#top")
    assert u.url == "https://example.com/start?b=2&a=1"
    assert u.key == "https://example.com/start?b=2&a=1"


def test_requested_url_stays_as_discovered_but_key_is_whatwg_normalized():
    u = p("HTTP://Example.COM:80/a/../b#x")
    assert u.url == "HTTP://Example.COM:80/a/../b"
    assert u.key == "http://example.com/b"
    assert u.host == "example.com"
    assert u.origin == "http://example.com"


def test_host_includes_non_default_port():
    assert p("https://ex.com:8443/x").host == "ex.com:8443"
    assert p("https://ex.com:443/x").host == "ex.com"


@pytest.mark.parametrize("raw", ["mailto:a@b.c", "javascript:alert(1)", "tel:+123", "data:text/html,hi",
                                 "ftp://example.com/x", "/relative", "", "   ", "#frag", None, 42])
def test_refused(raw):
    with pytest.raises(InvalidUrl):
        p(raw)


def seeds(*urls):
    return [p(u) for u in urls]


def test_origin_vs_host_scope():
    s = seeds("https://a.example/")
    assert in_scope(p("https://a.example/deeper/path"), s, "same-origin")
    assert not in_scope(p("http://a.example/"), s, "same-origin")
    assert in_scope(p("http://a.example/"), s, "same-host")
    assert not in_scope(p("https://a.example:8443/"), s, "same-origin")
    assert not in_scope(p("https://a.example:8443/"), s, "same-host")  # host carries the port
    for scope in ("same-origin", "same-host"):
        assert not in_scope(p("https://sub.a.example/"), s, scope)
        assert not in_scope(p("https://a.example/"), [], scope)


def test_unknown_scope_raises():
    with pytest.raises(ValueError, match="same-site"):
        in_scope(p("https://a.example/"), seeds("https://a.example/"), "same-site")


@pytest.mark.parametrize("rel,expected", [("nofollow", True), ("noopener nofollow", True), ("NoFollow", True),
                                          ("nofollowme", False), (None, False), ("", False), ("ugc", False)])
def test_nofollow_is_a_whole_word(rel, expected):
    assert is_nofollow(rel) is expected


def test_accept_links_filters_and_counts():
    links = [
        {"href": "https://a.example/1", "rel": None},
        {"href": "https://a.example/1#again"},            # in-call duplicate by key
        {"href": "https://a.example/2", "rel": "noopener nofollow"},
        {"href": "https://a.example/3", "rel": "nofollowme"},
        {"href": "https://elsewhere.example/"},            # out of scope
        {"href": "mailto:x@a.example"},                    # not http(s)
        {"text": "no href"},                               # malformed item
        "not an object",
        {"href": "https://b.example/2"},                   # second seed widens scope
    ]
    out = accept_links(links, seeds("https://a.example/", "https://b.example/"), "same-origin")
    assert [u.url for u in out.urls] == ["https://a.example/1", "https://a.example/3", "https://b.example/2"]
    assert [u.host for u in out.urls] == ["a.example", "a.example", "b.example"]
    assert dict(out.drops) == {"duplicate": 1, "nofollow": 1, "out_of_scope": 1, "invalid_url": 3}


def test_link_filter_in_chunks_accepts_what_one_call_does():
    """The level report scopes its links chunk by chunk (while the previous chunk is inserted):
    dedup and the href fates carry over, so any chunking gives one call's URLs and drops."""
    links = [{"href": f"https://a.example/{i % 7}" + ("#f" if i % 3 else "")} for i in range(20)] + [
        {"href": "https://elsewhere.example/"}, {"href": "https://a.example/x", "rel": "nofollow"}, "junk",
        {"href": "https://a.example/1"}, {"href": "https://a.example/new"}]
    centre = seeds("https://a.example/")
    whole = accept_links(links, centre, "same-origin")
    for size in (1, 2, 5, 8):
        screen = LinkFilter(centre, "same-origin")
        urls = [u for i in range(0, len(links), size) for u in screen.accept(links[i:i + size])]
        assert (urls, screen.drops, screen.accepted) == (whole.urls, whole.drops, len(whole.urls)), size


def test_c5_redirected_seed_does_not_move_scope():
    """C5: seed a.test redirects to b.test/page; links found there on b.test stay out."""
    links = [{"href": "http://b.test/other"}, {"href": "http://b.test/page2"}, {"href": "http://a.test/back"}]
    out = accept_links(links, seeds("http://a.test/"), "same-origin")
    assert [u.url for u in out.urls] == ["http://a.test/back"]
    assert out.drops["out_of_scope"] == 2


@pytest.mark.parametrize("raw, expected", [
    ("http://user:secretpw@127.0.0.1:8765/index.html", True),
    ("http://user@a.test/", True),
    ("http://:pw@a.test/", True),
    ("HTTP://U:P@A.TEST:80/x#f", True),
    ("http://a.test/x@y?to=me@there#a@b", False),  # '@' after the authority is no userinfo
    ("http://a.test/%40", False),
    ("https://a.test:8443/", False),
])
def test_has_userinfo(raw, expected):
    assert has_userinfo(p(raw)) is expected


def test_links_with_credentials_are_dropped_never_accepted():
    """A link carrying user:password@ is not crawled (its password would be sent and archived in
    the WARC's Target-URI): dropped as ``userinfo``, even on a seed's own origin."""
    links = [{"href": "http://user:secretpw@127.0.0.1:8765/index.html"}, {"href": "http://u@127.0.0.1:8765/b"},
             {"href": "http://127.0.0.1:8765/index.html"}, {"href": "http://user:secretpw@127.0.0.1:8765/index.html"}]
    for scope in ("same-origin", "same-host"):
        out = accept_links(links, seeds("http://127.0.0.1:8765/"), scope)
        assert [u.url for u in out.urls] == ["http://127.0.0.1:8765/index.html"]
        assert dict(out.drops) == {"userinfo": 3}


def test_an_empty_query_stays_a_distinct_page():
    """WHATWG keeps ``?`` with an empty query (a server may answer ``/p?`` and ``/p``
    differently), and url_key is the WHATWG serialization: two pages, as documented."""
    assert p("http://a.test/index.html?").key == "http://a.test/index.html?"
    assert p("http://a.test/index.html?").key != p("http://a.test/index.html").key
