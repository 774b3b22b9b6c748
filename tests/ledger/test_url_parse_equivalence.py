"""``parse_http_url`` cuts key, host and origin out of ada-url's serialization (one parse per
link); this pins that every part equals what ada-url's own getters say, over URLs built from
awkward pieces (userinfo, IPv6, IPv4 spellings, IDN, default and odd ports, dot segments,
percent-encoding, backslashes, fragments, queries holding ``/ @ #``)."""

from __future__ import annotations

import itertools

import ada_url

from ledger.crawl import traps
from ledger.crawl.urls import InvalidUrl, parse_http_url

SCHEMES = ["http://", "HTTPS://", "https:", "http:\\\\", "ftp://", "  http://"]
USERINFO = ["", "u@", "u:p@", "a%40b:c@", "@"]
HOSTS = ["Example.COM", "[::1]", "[2001:DB8::1]", "127.0.0.1", "0x7f.1", "xn--nxasmq6b.com", "bücher.de",
         "a..b", "ex.com.", "%41.com", "", "1.2.3.4.5", "foo.123"]
PORTS = ["", ":80", ":443", ":8080", ":0080", ":", ":65536"]
PATHS = ["", "/", "/a/../b", "/%2e%2E/x", "/a b", "/é", "\\x\\y", "/a?q=1#f", "?q", "#f",
         "/p?q=a/b@c#x#y", "/a@b/c", "/x?"]


def by_ada_getters(raw: str):
    """The reference: ada-url's URL object and its getters (the former implementation)."""
    text = raw.strip()
    try:
        parsed = ada_url.URL(text)
    except ValueError:
        return None
    if parsed.protocol not in ("http:", "https:") or not parsed.hostname:
        return None
    return (text.split("#", 1)[0], parsed.href.split("#", 1)[0], parsed.host, parsed.origin,
            parsed.pathname, parsed.search)


def test_parts_equal_ada_getters():
    compared = refused = 0
    for pieces in itertools.product(SCHEMES, USERINFO, HOSTS, PORTS, PATHS):
        raw = "".join(pieces)
        want = by_ada_getters(raw)
        try:
            p = parse_http_url(raw)
        except InvalidUrl:
            assert want is None, raw
            refused += 1
            continue
        assert want is not None, raw
        assert (p.url, p.key, p.host, p.origin) == want[:4], raw
        assert traps._path_and_query(p.key) == want[4:], raw
        compared += 1
    assert compared > 10_000 and refused > 10_000  # both sides of the product were exercised


def test_unencodable_text_is_invalid_not_an_error():
    for raw in ("https://a.test/\ud800", "https://\udfff.test/"):
        try:
            parse_http_url(raw)
        except InvalidUrl:
            continue
        raise AssertionError(f"{raw!r} parsed")
