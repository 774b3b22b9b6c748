"""A URL skipped by robots.txt says which lines did it (issue 24 item 8): the group's first
User-agent line, the line naming us (or ``*``) and the rule that decided, with why a group spans
several User-agent lines (RFC 9309 §2.1 as Google's matcher groups them). The lines survive the
crawl's robots.txt cache (the normal form keeps them as comments protego ignores)."""

from __future__ import annotations

import pytest

from f.waggle.robots import ALLOWED, RobotsOutcome, RobotsRules

ONE_GROUP = "User-agent: *\nCrawl-delay: 3\n\nUser-agent: otherbot\nDisallow: /\n"  # the issue's file


def why(text: str, url: str, token: str = "waggle") -> str:
    outcome = RobotsOutcome(ALLOWED, RobotsRules(text, token))
    assert not outcome.allowed(url)
    return outcome.why_disallowed(url)


def test_the_issue_example_names_the_five_lines_and_why_they_are_one_group():
    assert why(ONE_GROUP, "http://h/any") == (
        "robots: robots.txt lines 1\u20135: `User-agent: *` \u2026 `Disallow: /`"
        " (one group: a group ends only at a User-agent line after a rule)")


def test_cached_copy_gives_the_same_lines():
    first = RobotsRules(ONE_GROUP)
    again = RobotsRules(first.text)  # what plan_level reads from the ledger's cache
    assert again.text == first.text
    assert RobotsOutcome(ALLOWED, again).why_disallowed("http://h/x") == why(ONE_GROUP, "http://h/x")


@pytest.mark.parametrize("text, url, expected", [
    ("# header\n\nUser-agent: *\nDisallow: /private\n", "http://h/private/a",
     "robots.txt lines 3\u20134: `User-agent: *` \u2026 `Disallow: /private`"),
    # our own group wins over *, and its line is named
    ("User-agent: *\nDisallow: /a\n\nUser-agent: waggle\nAllow: /x/ok\nDisallow: /x\n", "http://h/x/no",
     "robots.txt lines 4\u20136: `User-agent: waggle` \u2026 `Disallow: /x`"),
    # the longest match decides, not the first line
    ("User-agent: *\nDisallow: /\nAllow: /docs\nDisallow: /docs/old\n", "http://h/docs/old/1",
     "robots.txt lines 1\u20134: `User-agent: *` \u2026 `Disallow: /docs/old`"),
    ("User-agent: *\nDisallow: /*.pdf$\n", "http://h/a/b.pdf",
     "robots.txt lines 1\u20132: `User-agent: *` \u2026 `Disallow: /*.pdf$`"),
    # * named on a later line of the same group
    ("User-agent: otherbot\nUser-agent: *\nDisallow: /\n", "http://h/",
     "robots.txt lines 1\u20133: `User-agent: *` (line 2) \u2026 `Disallow: /`"
     " (one group: a group ends only at a User-agent line after a rule)"),
    # the same rule in two groups: the group that applies to us is named
    ("User-agent: otherbot\nDisallow: /p\n\nUser-agent: *\nDisallow: /p\n", "http://h/p",
     "robots.txt lines 4\u20135: `User-agent: *` \u2026 `Disallow: /p`"),
])
def test_the_deciding_lines_are_named(text, url, expected):
    assert why(text, url) == "robots: " + expected


def test_a_host_not_disallowed_has_no_reason_and_other_reasons_are_kept():
    outcome = RobotsOutcome(ALLOWED, RobotsRules("User-agent: *\nDisallow: /private\n"))
    assert outcome.allowed("http://h/public") and outcome.rules.rule_for("http://h/public") is None
    too_large = RobotsRules("User-agent: *\n" + "".join(f"Disallow: /{i}\n" for i in range(5001)))
    assert too_large.rule_for("http://h/x") is None  # plan_level says robots-too-large
