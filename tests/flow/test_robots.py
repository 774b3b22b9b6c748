"""robots.txt per RFC 9309: fetch statuses, redirects, size limit, BOM, product-token matching.

Cases C1 (robots.txt times out), C4 (product token, not substring) and C11 (redirect to a
local file) from cases/README.md. All servers are real HTTP on 127.0.0.1.
"""

from __future__ import annotations

import time

import pytest

from f.waggle.hostguard import guarded_transport
from f.waggle.plan_level import plan, robots_transport
from f.waggle.robots import (
    ALLOWED,
    ROBOTS_MAX_BYTES,
    UNAVAILABLE,
    UNREACHABLE,
    USER_AGENT,
    RobotsRules,
    fetch_robots,
)
from tests.flow.fakes import HttpFake, hang

OPEN = guarded_transport(allow_private=True)  # the production transport with the loopback opt-out


@pytest.fixture
def site():
    fakes: list[HttpFake] = []

    def make(handler):
        fake = HttpFake(handler)
        fakes.append(fake)
        return fake

    yield make
    for fake in fakes:
        fake.close()


def robots_plan(fake: HttpFake, paths: list[str], fetch=None):
    candidates = [{"url": f"{fake.url}{p}", "host": fake.authority} for p in paths]
    return plan(candidates, 0, None, None,
                fetch=fetch or (lambda u: fetch_robots(u, transport=OPEN, timeout_s=0.5, log=lambda _m: None)),
                read_endpoints=lambda: '["http://bh-1"]', log=lambda _m: None)


@pytest.mark.parametrize("status, state", [(200, ALLOWED), (404, UNAVAILABLE), (401, UNAVAILABLE), (403, UNAVAILABLE),
                                           (429, UNREACHABLE), (500, UNREACHABLE), (503, UNREACHABLE)])
def test_fetch_status_classes(site, status, state):
    fake = site(lambda r: (status, {}, "User-agent: *\nDisallow: /x\n"))
    assert fetch_robots(f"{fake.url}/robots.txt", transport=OPEN).state == state


def test_sends_product_token_user_agent(site):
    fake = site(lambda r: (404, {}, ""))
    fetch_robots(f"{fake.url}/robots.txt", transport=OPEN)
    assert fake.requests[0].headers["user-agent"] == USER_AGENT and "waggle" in USER_AGENT


def test_5xx_skips_every_url_of_the_host_this_level(site):
    fake = site(lambda r: (503, {}, "down"))
    result = robots_plan(fake, ["/a", "/b"])
    assert result["groups"] == []
    assert [s["reason"] for s in result["skipped"]] == ["robots-unreachable"] * 2
    assert [s["failureClass"] for s in result["skipped"]] == ["transient"] * 2  # may be readable next time


def test_4xx_means_no_restrictions(site):
    fake = site(lambda r: (404, {}, "nope"))
    result = robots_plan(fake, ["/a"])
    assert result["groups"][0]["urls"] == [f"{fake.url}/a"] and result["skipped"] == []


def test_c1_robots_that_times_out_skips_the_host(site):
    def handler(req):
        if req.path == "/robots.txt":
            hang(2.0)
        return 200, {}, "page"

    fake = site(handler)
    started = time.monotonic()
    result = robots_plan(fake, ["/a", "/b"])
    assert time.monotonic() - started < 1.5  # the fetch timeout (0.5 s here) ended it
    assert result["groups"] == []
    assert {s["reason"] for s in result["skipped"]} == {"robots-unreachable"}
    assert "robots" in result["skipped"][0]["reason"]
    # nothing of the host was requested besides robots.txt, and the failure is not cached as "no robots"
    assert [r.path for r in fake.requests] == ["/robots.txt"]
    robots_plan(fake, ["/a"])
    assert [r.path for r in fake.requests] == ["/robots.txt", "/robots.txt"]


def test_network_error_is_unreachable():
    outcome = fetch_robots("http://127.0.0.1:1/robots.txt", transport=OPEN)
    assert outcome.state == UNREACHABLE


def test_c11_redirect_to_a_local_file_is_refused_and_logged(site):
    fake = site(lambda r: (302, {"location": "file:///etc/hostname"}, ""))
    lines: list[str] = []
    outcome = fetch_robots(f"{fake.url}/robots.txt", transport=OPEN, log=lines.append)
    assert outcome.state == UNREACHABLE and "file:///etc/hostname" in outcome.detail
    assert any("file:///etc/hostname" in line and "refused" in line for line in lines)


def test_five_redirects_followed_rules_apply_to_initial_authority(site):
    target = site(lambda r: (200, {}, "User-agent: *\nDisallow: /private\n"))

    def hop(req):
        n = int(req.path.strip("/").split("/")[0] or 0) if req.path != "/robots.txt" else 0
        if n < 4:
            return 301, {"location": f"/{n + 1}/r"}, ""
        return 302, {"location": f"{target.url}/robots.txt"}, ""

    origin = site(hop)
    outcome = fetch_robots(f"{origin.url}/robots.txt", transport=OPEN)
    assert outcome.state == ALLOWED
    assert not outcome.allowed(f"{origin.url}/private/x") and outcome.allowed(f"{origin.url}/public")
    assert len(origin.requests) == 5 and len(target.requests) == 1


def test_endless_redirects_are_unavailable(site):
    fake = site(lambda r: (302, {"location": "/robots.txt"}, ""))
    assert fetch_robots(f"{fake.url}/robots.txt", transport=OPEN).state == UNAVAILABLE


def test_guard_refuses_a_private_robots_host(site):
    fake = site(lambda r: (200, {}, "User-agent: *\nAllow: /\n"))
    outcome = fetch_robots(f"{fake.url}/robots.txt", transport=robots_transport(allow_private=False))
    assert outcome.state == UNREACHABLE and fake.requests == []


def test_only_first_512_kib_parsed_and_cut_line_dropped(site):
    filler = ("# " + "x" * 97 + "\n") * ((ROBOTS_MAX_BYTES // 100) - 2)
    body = "User-agent: *\nDisallow: /early\n" + filler
    body += "Disallow: /" + "y" * (ROBOTS_MAX_BYTES - len(body.encode())) + "\nDisallow: /late\n"
    fake = site(lambda r: (200, {}, body))
    outcome = fetch_robots(f"{fake.url}/robots.txt", transport=OPEN)
    assert outcome.state == ALLOWED
    assert not outcome.allowed(f"{fake.url}/early")
    assert outcome.allowed(f"{fake.url}/late")     # beyond the limit: ignored
    assert outcome.allowed(f"{fake.url}/yyyy")     # the cut last line is dropped, not read as "/yyy…"


def test_bom_is_stripped(site):
    fake = site(lambda r: (200, {}, "\ufeffUser-agent: *\nDisallow: /x\n".encode("utf-8")))
    outcome = fetch_robots(f"{fake.url}/robots.txt", transport=OPEN)
    assert not outcome.allowed(f"{fake.url}/x/1")


# -- matching (adapter over protego) ---------------------------------------------------------

C4 = "User-agent: Foo\nDisallow: /\n\nUser-agent: *\nAllow: /\n"


def test_c4_product_token_not_substring():
    assert RobotsRules(C4, token="FooBot").allowed("http://h/page")
    assert not RobotsRules(C4, token="Foo").allowed("http://h/page")
    assert not RobotsRules(C4, token="foo").allowed("http://h/page")  # case-insensitive


def test_group_bot_does_not_apply_to_foobot():
    rules = RobotsRules("User-agent: bot\nDisallow: /\n", token="FooBot")
    assert rules.allowed("http://h/x")


def test_agent_value_cut_at_first_space():
    rules = RobotsRules("User-agent: waggle extra words\nDisallow: /w\n", token="waggle")
    assert not rules.allowed("http://h/w")


def test_our_group_wins_over_star():
    rules = RobotsRules("User-agent: *\nDisallow: /\n\nUser-agent: waggle\nAllow: /\nCrawl-delay: 2\n")
    assert rules.allowed("http://h/x") and rules.crawl_delay_s() == 2.0


def test_longest_match_and_robots_txt_always_allowed():
    rules = RobotsRules("User-agent: *\nDisallow: /\nAllow: /public\n")
    assert rules.allowed("http://h/public/page") and not rules.allowed("http://h/other")
    assert rules.allowed("http://h/robots.txt")


def test_crawl_delay_only_group_and_decimals():
    assert RobotsRules("User-agent: *\nCrawl-delay: 10\n").crawl_delay_s() == 10.0
    assert RobotsRules("User-agent: *\nCrawl-delay: 0.5\n").crawl_delay_s() == 0.5
    assert RobotsRules("User-agent: *\nCrawl-delay: soon\n").crawl_delay_s() is None


# -- the group pre-filter: same decisions, hostile files stay cheap ---------------------------

SAMPLES = [
    C4,
    "User-agent: *\nDisallow: /a\n\nUser-agent: waggle\nDisallow: /b\nCrawl-delay: 4\n",
    "User-agent: other\nUser-agent: *\nDisallow: /shared\nUser-agent: waggle/2.0\nAllow: /shared/ok\nDisallow: /shared\n",
    "Sitemap: http://h/s.xml\nDisallow: /orphan\nUser-agent: *\nUser-agent: foo\nDisallow: /both # comment\n",
    "User-agent: waggle*\nDisallow: /star\n\nUser-agent: *\nAllow: /\n",
    "User-agent: *\nDisallow: /one\n\nUser-agent: bot\nDisallow: /\n\nuser-agent: *\nDisallow: /two\nCrawl-delay: 1.5\n",
]
PATHS = ["/", "/a", "/b", "/shared", "/shared/ok", "/orphan", "/both", "/star", "/one", "/two", "/robots.txt"]


@pytest.mark.parametrize("text", SAMPLES)
@pytest.mark.parametrize("token", ["waggle", "foo", "FooBot"])
def test_prefilter_keeps_every_decision(text, token):
    from protego import Protego

    full = Protego.parse(text)._user_agents
    exact = [rs for agent, rs in full.items() if agent.split(" ")[0].split("/")[0] == token.lower()]
    group = exact[0] if exact else full.get("*")
    rules = RobotsRules(text, token=token)
    for path in PATHS:
        expected = True if group is None or path == "/robots.txt" else group.can_fetch(f"http://h{path}")
        assert rules.allowed(f"http://h{path}") == expected, (token, path)
    assert rules.crawl_delay_s() == (float(group.crawl_delay) if group is not None and group.crawl_delay is not None else None)


def test_thousands_of_agents_parse_cheaply():
    """A hostile file naming 20,000 agents: only our group and ``*`` reach the parser (what made
    it cheap; the speed itself is a benchmark's business, not a timed unit test's)."""
    hostile = "".join(f"User-agent: bot{i}\nDisallow: /{i}\n" for i in range(20000)) + "User-agent: *\nDisallow: /\n"
    rules = RobotsRules(hostile)
    assert not rules.allowed("http://h/x")
    assert rules.text is not None and "bot" not in rules.text and rules.rule_count == 1
    assert list(rules._parser._user_agents) == ["*"]  # noqa: SLF001 - the groups protego built
    ours = RobotsRules(hostile.replace("User-agent: bot7\n", "User-agent: waggle\n"))
    assert ours.allowed("http://h/x") and not ours.allowed("http://h/7")
    assert list(ours._parser._user_agents) == ["waggle", "*"]  # noqa: SLF001 - ours and *, no bot group
