"""robots.txt bytes that are not clean UTF-8 never turn a rule into an allow (issue 24 item 1).

Each case is a byte prefix or a byte inside a line, with its neighbours: the full UTF-8 BOM,
each leading part of it, Latin-1 bytes in a path, invalid UTF-8 in a comment / a user-agent line /
a Disallow line, NUL bytes, UTF-16 LE/BE and UTF-32 with a BOM, UTF-16 without one, and UTF-16
that does not decode (→ unreadable: the host is skipped this level, RFC 9309 §2.3.1.4). The last
tests go through the flow's robots fetch and plan against a real loopback HTTP site.
"""

from __future__ import annotations

import pytest

from f.waggle.hostguard import guarded_transport
from f.waggle.plan_level import plan
from f.waggle.robots import ALLOWED, UNREACHABLE, RobotsRules, RobotsUndecodable, decode_robots, fetch_robots
from tests.flow.fakes import HttpFake

OPEN = guarded_transport(allow_private=True)
RULES = b"User-agent: *\nDisallow: /private\n"


def rules_of(data: bytes, truncated: bool = False) -> RobotsRules:
    return RobotsRules(decode_robots(data, truncated))


@pytest.mark.parametrize("prefix", [b"", b"\xef\xbb\xbf", b"\xef\xbb", b"\xef"],
                         ids=["none", "full-bom", "bom-2-bytes", "bom-1-byte"])
def test_utf8_bom_or_any_leading_part_of_it_keeps_the_rule(prefix):
    rules = rules_of(prefix + RULES)
    assert not rules.allowed("http://h/private/secret")
    assert rules.allowed("http://h/public")


def test_bom_bytes_not_at_the_start_do_not_hide_a_later_line():
    # a second file concatenated after the first: its BOM starts a line
    rules = rules_of(b"User-agent: *\nDisallow: /a\n\xef\xbb\xbfDisallow: /b\n")
    assert not rules.allowed("http://h/a") and not rules.allowed("http://h/b")


@pytest.mark.parametrize("data, url", [
    (b"User-agent: *\nDisallow: /caf\xe9\n", "http://h/caf%E9/menu"),         # Latin-1 byte in a path
    (b"User-agent: *\nDisallow: /caf\xe9\n", "http://h/caf%e9"),
    (b"User-agent: *\nDisallow: /a\xff\xfeb\n", "http://h/a%FF%FEb/c"),
    (b"User-agent: *\nDisallow: /private \xff\n", "http://h/private%20%FF"),
])
def test_invalid_utf8_in_a_path_is_the_byte_in_the_url(data, url):
    rules = rules_of(data)
    assert not rules.allowed(url)
    assert rules.allowed("http://h/caf")  # neighbour: the prefix without the byte is not disallowed


@pytest.mark.parametrize("data", [
    b"User-agent: * # r\xe9gles \xff\nDisallow: /private\n",       # in a comment
    b"# \xc3\x28 broken\nUser-agent: *\nDisallow: /private\n",          # a comment line of its own
    b"User-agent: *\xff\nDisallow: /private\n",                          # in the user-agent line
    b"User-agent: \xe9bot\nUser-agent: *\nDisallow: /private\n",         # another agent's name
    b"User-agent: *\nDisallow: /private\nDisallow: /x\xe9\n",            # in a later Disallow line
    b"User-agent: *\nCrawl-delay: 1\xff\nDisallow: /private\n",          # in a Crawl-delay line
    b"User-agent: *\x00\nDisallow: /private\n",                          # NUL in a user-agent line
    b"\x00User-agent: *\nDisallow: /private\x00\n",                      # NUL at the ends of lines
    b"User-agent: *\r\nDisallow: /private\r\n\x00",                      # a NUL after the last line
])
def test_undecodable_bytes_never_drop_the_lines_group(data):
    rules = rules_of(data)
    assert not rules.allowed("http://h/private/secret")


def test_undecodable_byte_ends_our_agent_name_so_our_group_still_applies():
    rules = rules_of(b"User-agent: *\nDisallow: /all\n\nUser-agent: waggle\xff\nDisallow: /ours\n")
    assert not rules.allowed("http://h/ours") and rules.allowed("http://h/all")
    # neighbour: a different name with a broken byte is not us
    rules = rules_of(b"User-agent: *\nDisallow: /all\n\nUser-agent: wag\xffgle\nDisallow: /ours\n")
    assert rules.allowed("http://h/ours") and not rules.allowed("http://h/all")


def test_crawl_delay_with_a_broken_byte_is_not_a_number_but_keeps_the_rules():
    rules = rules_of(b"User-agent: *\nCrawl-delay: 2\xff\nDisallow: /private\n")
    assert rules.crawl_delay_s() is None and not rules.allowed("http://h/private")


@pytest.mark.parametrize("codec, bom", [("utf-16-le", True), ("utf-16-be", True), ("utf-32-le", True),
                                        ("utf-32-be", True), ("utf-16-le", False), ("utf-16-be", False)])
def test_utf16_and_utf32_are_read(codec, bom):
    text = "User-agent: *\nDisallow: /private\nDisallow: /caf\u00e9\n"
    data = (("\ufeff" + text) if bom else text).encode(codec)
    rules = rules_of(data)
    assert not rules.allowed("http://h/private/secret")
    assert not rules.allowed("http://h/caf%C3%A9")
    assert rules.allowed("http://h/public")


@pytest.mark.parametrize("data", [
    b"\xff\xfe" + "User-agent: *\nDisallow: /private\n".encode("utf-16-le") + b"\x00\xdc",  # lone low surrogate
    b"\xfe\xff" + "User-agent: *\n".encode("utf-16-be") + b"\xd8\x00\x00A",                 # unpaired high surrogate
    b"\xff\xfe" + "User-agent: *\nDisallow: /p\n".encode("utf-16-le") + b"\x41",            # odd length
])
def test_utf16_that_does_not_decode_is_unreadable_not_allow_all(data):
    with pytest.raises(RobotsUndecodable):
        decode_robots(data, False)


def test_truncated_utf16_drops_only_the_cut_last_line():
    data = "\ufeffUser-agent: *\nDisallow: /private\nDisallow: /cut-her".encode("utf-16-le")[:-1]
    rules = rules_of(data, truncated=True)
    assert not rules.allowed("http://h/private") and rules.allowed("http://h/cut-here")


def test_plain_text_is_decoded_as_before():
    assert decode_robots(b"User-agent: *\nDisallow: /\xc3\xa9\n", False) == "User-agent: *\nDisallow: /\u00e9\n"
    assert decode_robots(b"User-agent: *\nDisallow: /a\nDisallow: /b", True) == "User-agent: *\nDisallow: /a\n"


def test_cached_text_holds_no_surrogates():
    # what the ledger stores (crawl_robots.body) must be valid UTF-8 and decide the same
    rules = rules_of(b"User-agent: *\xff\nDisallow: /caf\xe9\n")
    rules.text.encode("utf-8")
    again = RobotsRules(rules.text)
    assert not again.allowed("http://h/caf%E9") and again.allowed("http://h/cafe")


# -- through the flow's fetch and plan, real HTTP on 127.0.0.1 -------------------------------------


@pytest.fixture
def site():
    fakes: list[HttpFake] = []

    def make(body: bytes, content_type: str = "text/plain"):
        fake = HttpFake(lambda r: (200, {"content-type": content_type}, body) if r.path == "/robots.txt"
                        else (200, {}, "<html>page</html>"))
        fakes.append(fake)
        return fake

    yield make
    for fake in fakes:
        fake.close()


def planned(fake: HttpFake, paths: list[str]) -> dict:
    candidates = [{"url": f"{fake.url}{p}", "host": fake.authority} for p in paths]
    return plan(candidates, 0, None, None,
                fetch=lambda u: fetch_robots(u, transport=OPEN, timeout_s=2, log=lambda _m: None),
                read_endpoints=lambda: '["http://bh-1"]', log=lambda _m: None)


@pytest.mark.parametrize("body", [b"\xef\xbb" + RULES, b"\xef" + RULES, b"\xef\xbb\xbf" + RULES,
                                  b"User-agent: *\xff\nDisallow: /private\n",
                                  b"\xff\xfe" + RULES.decode().encode("utf-16-le"),
                                  b"\xfe\xff" + RULES.decode().encode("utf-16-be")])
def test_flow_plan_keeps_the_rule_over_http(site, body):
    fake = site(body)
    assert fetch_robots(f"{fake.url}/robots.txt", transport=OPEN).state == ALLOWED
    result = planned(fake, ["/private/secret", "/public"])
    assert [s["url"] for s in result["skipped"]] == [f"{fake.url}/private/secret"]
    assert [s["reason"] for s in result["skipped"]] == [
        "robots: robots.txt lines 1\u20132: `User-agent: *` \u2026 `Disallow: /private`"]
    assert [u for g in result["groups"] for u in g["urls"]] == [f"{fake.url}/public"]


def test_flow_plan_skips_the_host_when_utf16_is_unreadable(site):
    fake = site(b"\xff\xfe" + "User-agent: *\nDisallow: /private\n".encode("utf-16-le") + b"\x00\xdc")
    outcome = fetch_robots(f"{fake.url}/robots.txt", transport=OPEN, log=lambda _m: None)
    assert outcome.state == UNREACHABLE and "unreadable" in outcome.detail
    result = planned(fake, ["/private/secret", "/public"])
    assert result["groups"] == []
    assert sorted(s["reason"] for s in result["skipped"]) == ["robots-unreachable"] * 2
