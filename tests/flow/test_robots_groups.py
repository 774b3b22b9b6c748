"""robots.txt group boundaries (issue 13 item 1): RFC 9309 §2.1 and Google's reference matcher.

A group is one or more ``User-agent`` lines followed by rules; it ends only at a ``User-agent``
line that comes after an Allow/Disallow line. Blank lines, comments, ``Sitemap``/``Host``,
``Crawl-delay`` and lines no parser knows never end a group. The Google cases restate the
behaviour of google/robotstxt's ``robots_test.cc`` (ID_LineSyntax_Groups, ID_GlobalGroups_Secondary,
longest match, …); a property test compares the adapter with a small reference matcher
written from the RFC over generated files.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as st

from f.waggle.robots import RobotsRules


def allowed(text: str, token: str, path: str) -> bool:
    return RobotsRules(text, token=token).allowed(f"http://foo.bar{path}")


# -- the reported case and its neighbours: lines between user-agent lines -------------------

BETWEEN = [
    "Invalid-Unknown-Line: unknown",  # the example
    "Noindex: /",  # a directive some sites use, unknown to RFC 9309
    "X-Robots: whatever",
    "# a comment",
    "",  # blank line
    "   ",
    "Sitemap: http://foo.bar/sitemap.xml",
    "Host: foo.bar",
    "Crawl-delay: 3",
    "Request-rate: 1/10",
    "Clean-param: ref /articles/",
    "notadirectiveatall",
]


@pytest.mark.parametrize("line", BETWEEN)
def test_line_between_user_agents_does_not_end_the_group(line):
    text = f"User-agent: FooBot\n{line}\nUser-agent: *\nDisallow: /\n"
    assert not allowed(text, "FooBot", "/")
    assert not allowed(text, "OtherBot", "/")  # the group is FooBot's and *'s


@pytest.mark.parametrize("line", BETWEEN)
def test_line_between_rules_does_not_end_the_group(line):
    text = f"User-agent: FooBot\nDisallow: /a\n{line}\nDisallow: /b\n"
    assert not allowed(text, "FooBot", "/a") and not allowed(text, "FooBot", "/b")
    assert allowed(text, "FooBot", "/c")


@pytest.mark.parametrize("line", BETWEEN)
def test_line_after_rules_then_user_agent_starts_a_new_group(line):
    text = f"User-agent: FooBot\nDisallow: /a\n{line}\nUser-agent: BarBot\nDisallow: /b\n"
    assert not allowed(text, "FooBot", "/a") and allowed(text, "FooBot", "/b")
    assert allowed(text, "BarBot", "/a") and not allowed(text, "BarBot", "/b")


def test_crawl_delay_between_agents_applies_to_the_whole_group():
    text = "User-agent: FooBot\nCrawl-delay: 7\nUser-agent: *\nDisallow: /private\n"
    rules = RobotsRules(text, token="FooBot")
    assert rules.crawl_delay_s() == 7.0 and not rules.allowed("http://foo.bar/private")
    assert RobotsRules(text, token="other").crawl_delay_s() == 7.0


def test_empty_disallow_closes_a_group():
    text = "User-agent: FooBot\nDisallow:\nUser-agent: BarBot\nDisallow: /\n"
    assert allowed(text, "FooBot", "/x") and not allowed(text, "BarBot", "/x")


def test_rules_before_any_user_agent_are_ignored():
    text = "Disallow: /\nAllow: /x\nUser-agent: FooBot\nDisallow: /y\n"
    assert allowed(text, "FooBot", "/z") and not allowed(text, "FooBot", "/y")
    assert allowed(text, "OtherBot", "/z")


def test_groups_naming_us_in_different_spellings_are_merged():
    # RFC 9309 §2.2.1: the rules of every group that matches are combined
    text = "User-agent: FooBot\nDisallow: /a\n\nUser-agent: *\nDisallow: /\n\nUser-agent: foobot/2.1\nDisallow: /b\n"
    assert not allowed(text, "FooBot", "/a") and not allowed(text, "FooBot", "/b")
    assert allowed(text, "FooBot", "/c")


# -- Google's reference matcher (robots_test.cc), restated ----------------------------------

GOOGLE_GROUPS = (
    "allow: /foo/bar/\n\nuser-agent: FooBot\ndisallow: /\nallow: /x/\nuser-agent: BarBot\n"
    "disallow: /\nallow: /y/\n\n\nallow: /w/\nuser-agent: BazBot\n\nuser-agent: FooBot\n"
    "allow: /z/\ndisallow: /\n"
)


@pytest.mark.parametrize("token, path, expected", [
    ("FooBot", "/x/b", True), ("FooBot", "/z/d", True), ("FooBot", "/y/c", False),
    ("BarBot", "/y/c", True), ("BarBot", "/w/a", True), ("BarBot", "/z/d", False),
    ("BazBot", "/z/d", True),
    ("FooBot", "/foo/bar/", False), ("BarBot", "/foo/bar/", False), ("BazBot", "/foo/bar/", False),
])
def test_google_line_syntax_groups(token, path, expected):
    assert allowed(GOOGLE_GROUPS, token, path) is expected


def test_google_global_group_is_secondary():
    glob = "user-agent: *\nallow: /\nuser-agent: FooBot\ndisallow: /\n"
    only_specific = "user-agent: FooBot\nallow: /\nuser-agent: BarBot\ndisallow: /\nuser-agent: BazBot\ndisallow: /\n"
    assert allowed("", "FooBot", "/x/y")
    assert not allowed(glob, "FooBot", "/x/y") and allowed(glob, "BarBot", "/x/y")
    assert allowed(only_specific, "QuxBot", "/x/y")


def test_google_names_and_values_case_insensitive():
    for text in ("USER-AGENT: FooBot\nALLOW: /x/\nDISALLOW: /\n", "uSeR-aGeNt: FooBot\nAlLoW: /x/\ndIsAlLoW: /\n",
                 "User-Agent: FOO BAR\nAllow: /x/\nDisallow: /\n"):
        token = "foo" if "FOO BAR" in text else "FooBot"
        assert allowed(text, token, "/x/y") and not allowed(text, token, "/a/b")


def test_google_missing_colon_accepted():
    assert not allowed("user-agent FooBot\ndisallow /\n", "FooBot", "/x/y")
    assert allowed("foo: FooBot\nbar: /\n", "FooBot", "/x/y")


def test_google_specific_group_implicitly_allows():
    text = "User-agent: *\nDisallow: /x/\nUser-agent: FooBot\nDisallow: /y/\n"
    assert allowed(text, "FooBot", "/x/page") and not allowed(text, "FooBot", "/y/page")


def test_google_line_endings_keep_groups():
    for eol in ("\n", "\r\n", "\r"):
        text = eol.join(["User-Agent: foo", "Allow: /some/path", "User-Agent: bar", "", "", "Disallow: /"])
        assert not allowed(text, "bar", "/x") and allowed(text, "foo", "/x")


# -- property: the adapter equals a reference matcher written from RFC 9309 -----------------

AGENTS = ["FooBot", "foobot/1.0", "BarBot", "*", ""]
PATHS = ["/", "/a", "/a/b", "/b", "/c/d"]
LINES = st.one_of(
    st.sampled_from(AGENTS).map(lambda a: f"User-agent: {a}"),
    st.tuples(st.sampled_from(["Allow", "Disallow"]), st.sampled_from(PATHS + [""])).map(lambda t: f"{t[0]}: {t[1]}"),
    st.sampled_from(BETWEEN),
)


def reference(text: str, token: str, path: str) -> bool:
    """RFC 9309 / Google: groups end at a user-agent line after a rule; the groups naming the
    token are merged, else the ``*`` groups; longest matching rule wins, Allow on a tie."""
    groups: list[tuple[list[str], list[tuple[str, str]]]] = []
    closed = True
    for raw in text.splitlines():
        line = raw.split("#", 1)[0].strip()
        field, _, value = line.partition(":")
        field, value = field.strip().lower(), value.strip()
        if field == "user-agent":
            if closed:
                groups.append(([], []))
                closed = False
            groups[-1][0].append(value.lower().split("/")[0])
        elif field in ("allow", "disallow") and groups:
            groups[-1][1].append((field, value))
            closed = True
    token = token.lower()
    ours = [rules for agents, rules in groups if token in agents]
    chosen = ours or [rules for agents, rules in groups if "*" in agents]
    best: tuple[int, bool] | None = None
    for rules in chosen:
        for field, value in rules:
            if value and path.startswith(value):
                candidate = (len(value), field == "allow")
                best = candidate if best is None or candidate > best else best
    return best is None or best[1]


@settings(max_examples=300, deadline=None)
@given(st.lists(LINES, max_size=12), st.sampled_from(["FooBot", "BarBot", "QuxBot"]))
def test_adapter_matches_reference(lines, token):
    text = "\n".join(lines) + "\n"
    rules = RobotsRules(text, token=token)
    for path in PATHS:
        assert rules.allowed(f"http://foo.bar{path}") == reference(text, token, path), (text, token, path)
