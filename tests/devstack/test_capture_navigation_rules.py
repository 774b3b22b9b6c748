"""Extension ``navigationRules`` (decision 105): a main-frame navigation to a URL robots.txt
disallows or the crawl excludes — an HTTP redirect hop, a script's ``location.href``, a meta
refresh — is never requested; the capture fails ``permanent`` naming why. Real Chromium, a
loopback site whose access log is the witness."""

from __future__ import annotations

from http.server import BaseHTTPRequestHandler

import httpx
import pytest

from f.waggle.failures import classify_report
from f.waggle.robots import RobotsRules
from tests.devstack.helpers import ONLY_WACZ, capture
from tests.fixtures.loopback import LoopbackSite

ROBOTS = "User-agent: *\nDisallow: /private\n"
PAGE = b"<!doctype html><title>%s</title><p>%s</p>"


class _Site(BaseHTTPRequestHandler):
    log: list[str] = []

    def do_GET(self):  # noqa: N802
        self.log.append(self.path)
        path = self.path.split("?")[0]
        if path in ("/redir", "/redir-ok"):
            self.send_response(302)
            self.send_header("Location", "/private/r.html" if path == "/redir" else "/public.html")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        if path == "/jsredir.html":
            body = b'<!doctype html><title>js</title><script>location.href="/private/js.html"</script>'
        elif path == "/meta.html":
            body = b'<!doctype html><meta http-equiv="refresh" content="0; url=/private/m.html"><title>m</title>'
        else:
            body = PAGE % (path.encode(), path.encode())
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def site():
    with LoopbackSite(_Site, daemon_threads=False) as served:
        yield served.url


def _rules(robots: bool = True, exclude: list[str] | None = None) -> dict:
    rules: dict = {}
    if robots:
        rules["robotsTxt"] = RobotsRules(ROBOTS).text  # the flow's normal form
    if exclude:
        rules["exclude"] = exclude
    return rules


def _private_hits() -> list[str]:
    return [p for p in _Site.log if p.startswith("/private")]


@pytest.mark.parametrize("start", ["/redir", "/jsredir.html", "/meta.html"])
def test_a_navigation_robots_disallows_is_never_requested(capture_server, site, start):
    _Site.log.clear()
    report = capture(capture_server, url=site + start, captureFormats=ONLY_WACZ,
                     navigationRules=_rules()).json()["report"]
    assert report["status"] == "failed", report
    message = report["errorDetails"]["message"]
    assert "robots.txt disallows it" in message and "/private/" in message and "Disallow: /private" in message
    assert "artifacts" not in report or not report["artifacts"]
    assert classify_report(report, report.get("httpStatusCode"))[0] == "permanent"
    assert start in _Site.log and _private_hits() == [], _Site.log


def test_a_redirect_the_crawl_excludes_is_never_requested(capture_server, site):
    _Site.log.clear()
    report = capture(capture_server, url=site + "/redir", captureFormats=ONLY_WACZ,
                     navigationRules=_rules(robots=False, exclude=[r"r\.html"])).json()["report"]
    assert report["status"] == "failed", report
    assert "the crawl excludes it (pattern 'r\\\\.html')" in report["errorDetails"]["message"]
    assert classify_report(report, report.get("httpStatusCode"))[0] == "permanent"
    assert _private_hits() == [], _Site.log


def test_allowed_redirects_land_and_without_rules_nothing_changes(capture_server, site):
    _Site.log.clear()
    report = capture(capture_server, url=site + "/redir-ok", captureFormats=ONLY_WACZ,
                     navigationRules=_rules(exclude=[r"nothing-matches"])).json()["report"]
    assert report["status"] == "success", report
    assert report["finalUrl"] == site + "/public.html"
    report = capture(capture_server, url=site + "/redir", captureFormats=ONLY_WACZ).json()["report"]
    assert report["status"] == "success", report  # no rules sent: the old behaviour
    assert _private_hits() == ["/private/r.html"]


def test_an_unusable_exclude_pattern_is_a_400_and_the_extension_is_advertised(capture_server, site):
    r = capture(capture_server, url=site + "/redir", captureFormats=ONLY_WACZ,
                navigationRules={"exclude": ["(?<=a)b"]})
    assert r.status_code == 400 and "navigationRules.exclude" in r.text, r.text
    assert "navigationRules" in httpx.get(f"{capture_server}/status").json()["extensions"]


# -- the flow's side: crawl_host sends the rules where advertised, judges the landing elsewhere ----

def _crawl_host(capture_server, site, drop: frozenset[str] = frozenset()) -> list[dict]:
    from f.waggle import pipeline  # noqa: PLC0415
    from f.waggle.crawl_host import HttpEndpoint, capture_host, navigation_rules  # noqa: PLC0415

    with httpx.Client() as client:
        extensions = pipeline.read_extensions(client, capture_server) - drop
        endpoint = HttpEndpoint(capture_server, client, extensions=extensions)
        return capture_host([endpoint], "h", [site + "/redir", site + "/jsredir.html", site + "/fine"], "c1",
                            formats=ONLY_WACZ, signing=False, scripts=[], delay_ms=100, log=lambda _m: None,
                            rules=navigation_rules(RobotsRules(ROBOTS).text, None))


def test_crawl_host_sends_the_rules_and_the_forbidden_paths_are_never_requested(capture_server, site):
    _Site.log.clear()
    results = _crawl_host(capture_server, site)
    assert [(r["status"], r.get("failureClass")) for r in results] == [
        ("failed", "permanent"), ("failed", "permanent"), ("captured", None)], results
    assert all("robots.txt disallows it" in r["skipReason"] for r in results[:2])
    assert _private_hits() == [], _Site.log


def test_without_the_extension_the_flow_refuses_the_landing_and_says_the_request_was_made(capture_server, site):
    """A server that does not advertise navigationRules (a real v12) follows both; the flow
    reports neither capture as its page (no manifest: nothing admitted), and says so."""
    _Site.log.clear()
    results = _crawl_host(capture_server, site, drop=frozenset({"navigationRules"}))
    assert [(r["status"], r.get("failureClass")) for r in results] == [
        ("failed", "permanent"), ("failed", "permanent"), ("captured", None)], results
    for r in results[:2]:
        assert r["skipReason"].startswith("redirected to a URL robots.txt disallows (")
        assert "the request was already made" in r["skipReason"] and "manifestLocation" not in r
    assert sorted(_private_hits()) == ["/private/js.html", "/private/r.html"], _Site.log
