"""Decision 105: the crawl's exclude patterns and the host's robots.txt reach crawl_host's
capture requests (``navigationRules``), only where the endpoint advertises the extension."""

from __future__ import annotations

from f.waggle.crawl_host import capture_request, extension_members, navigation_rules
from f.waggle.landing import landing_refusal
from f.waggle.robots import RobotsRules
from ledger.crawl.dispatch import webhook_body
from ledger.settings import Settings

ROBOTS = RobotsRules("User-agent: *\nDisallow: /private\n").text


def _settings() -> Settings:
    return Settings(_env_file=None, fga_store_id="s", fga_model_id="m", s3_endpoint="http://127.0.0.1:1",
                    s3_bucket="b", s3_access_key_id="k", s3_secret_access_key="s")


def test_the_level_body_carries_the_crawls_exclude_patterns_only_when_it_has_some() -> None:
    crawl = {"id": "00000000-0000-0000-0000-000000000001", "per_host_delay_ms": 100,
             "host_parallelism": 1, "max_depth": 1, "scripts": []}
    assert "exclude" not in webhook_body(crawl, 0, [], _settings())
    assert webhook_body({**crawl, "scope_exclude": [r"r\.html"]}, 0, [], _settings())["exclude"] == [r"r\.html"]


def test_the_member_is_sent_only_where_advertised() -> None:
    rules = navigation_rules(ROBOTS, [r"r\.html", ""])
    assert rules == {"robotsTxt": ROBOTS, "exclude": [r"r\.html"]}
    assert navigation_rules(None, []) is None and navigation_rules("  ", None) is None
    request = capture_request("http://h/", "c", {"wacz": True}, False, [], None, navigation_rules=rules)
    assert extension_members(request, frozenset({"navigationRules"}))["navigationRules"] == rules
    assert "navigationRules" not in extension_members(request, frozenset())


def test_the_landing_is_judged_on_the_pages_origin_and_by_every_exclude() -> None:
    rules = navigation_rules(ROBOTS, [r"js\.html$"])
    assert "robots.txt disallows (http://h/private/r.html)" in landing_refusal("http://h/redir", "http://h/private/r.html", rules)
    assert landing_refusal("http://h/redir", "http://other/private/r.html", rules) is None  # its own robots.txt
    assert "pattern 'js\\\\.html$'" in landing_refusal("http://h/a", "http://other/x/js.html", rules)
    assert landing_refusal("http://h/a", "http://h/fine", rules) is None
    assert landing_refusal("http://h/private/x", "http://h/private/x", rules) is None  # not a redirect
    assert landing_refusal("http://h/a", "http://h/private/r.html", None) is None
