"""Failure classes (issue 17 item 1): every Chromium ``net::ERR_*`` name of net_error_list.h has
an explicit class that follows the issue's rules per group, every Playwright message the table
maps is classed, and crawl_host retries only ``transient`` failures (one submission otherwise)."""

from __future__ import annotations

from pathlib import Path

import pytest

from f.waggle.crawl_host import capture_host
from f.waggle.failures import (
    MESSAGES,
    NET_ERRORS,
    PERMANENT,
    POLICY,
    TRANSIENT,
    classify_message,
    classify_report,
    refusal_class,
)
from tests.flow.fakes import FakeEndpoint, capture_reply

CHROMIUM = [(int(code), name) for code, name in (
    line.split() for line in (Path(__file__).parent / "data" / "chromium_net_errors.txt").read_text().splitlines()
    if line.startswith("-"))]
FORMATS = {"png": False, "webp": False, "html": False, "links": True, "mhtml": False, "wacz": True}


def expected_by_group(code: int, name: str) -> str | None:
    """The issue's rules per net_error_list.h group (None: no group rule, see EXPLICIT)."""
    if name in ("BLOCKED_BY_CLIENT", "BLOCKED_BY_ADMINISTRATOR", "CLEARTEXT_NOT_PERMITTED") or "POLICY" in name:
        return POLICY                                  # our rules or the browser's, not the site
    if name == "UNEXPECTED_PROXY_AUTH":
        return PERMANENT                               # the site itself answered 407
    if any(w in name for w in ("PROXY", "SOCKS", "PAC_", "TUNNEL")):
        return TRANSIENT                               # our egress proxy (its certificate too), not the site
    if -219 <= code <= -200 or name.startswith(("SSL_CLIENT_AUTH", "CERT_")) or "CERT" in name:
        return PERMANENT                               # TLS certificate errors
    if name in ("TOO_MANY_REDIRECTS", "INVALID_REDIRECT", "UNSAFE_REDIRECT", "NAME_NOT_RESOLVED"):
        return PERMANENT                               # redirect loops, DNS name not found
    if name.startswith("CONNECTION_") or name in ("TIMED_OUT", "EMPTY_RESPONSE", "ADDRESS_UNREACHABLE",
                                                   "INTERNET_DISCONNECTED", "NETWORK_CHANGED", "CONTEXT_SHUT_DOWN"):
        return TRANSIENT                               # resets, refusals, timeouts, a browser going away
    if -499 <= code <= -400:
        return TRANSIENT                               # the browser's cache
    if name.startswith(("HTTP2_", "QUIC_")) and name != "HTTP2_INADEQUATE_TRANSPORT_SECURITY":
        return TRANSIENT                               # a broken stream, not a broken page
    if -899 <= code <= -800:
        return PERMANENT if name in ("DNS_SEARCH_EMPTY", "DNS_NAME_HTTPS_ONLY",
                                     "DNS_NO_MATCHING_SUPPORTED_ALPN") else TRANSIENT
    if -799 <= code <= -700:
        return PERMANENT                               # certificate manager: never fixed by waiting
    return None


def test_the_table_names_exactly_chromiums_errors():
    assert sorted(NET_ERRORS) == sorted(name for _, name in CHROMIUM)


@pytest.mark.parametrize("code, name", CHROMIUM, ids=[n for _, n in CHROMIUM])
def test_every_chromium_net_error_has_its_class(code, name):
    cls, note = classify_message(f"page.goto: net::ERR_{name} at http://127.0.0.1:8080/p")
    assert note is None and cls in (TRANSIENT, PERMANENT, POLICY)
    rule = expected_by_group(code, name)
    if rule is not None:
        assert cls == rule, f"{name} ({code})"


@pytest.mark.parametrize("message, cls", [
    ("net::ERR_TOO_MANY_REDIRECTS at http://site/loop", PERMANENT),       # the issue's /loop
    ("net::ERR_NAME_NOT_RESOLVED (gaierror)", PERMANENT),                  # the stand-in's DNS failure
    ("page.goto: net::ERR_CONNECTION_REFUSED at http://site/", TRANSIENT),
    ("page.goto: net::ERR_CONNECTION_RESET at http://site/", TRANSIENT),
    ("page.goto: net::ERR_CERT_AUTHORITY_INVALID at https://site/", PERMANENT),
    ("page.goto: net::ERR_CERT_DATE_INVALID at https://site/", PERMANENT),
    ("page.goto: net::ERR_TIMED_OUT at http://site/", TRANSIENT),
    ("page.goto: net::ERR_BLOCKED_BY_CLIENT at http://site/", POLICY),
])
def test_the_issues_cases(message, cls):
    assert classify_message(message) == (cls, None)


def test_an_unknown_net_error_is_transient_with_a_note():
    cls, note = classify_message("page.goto: net::ERR_SOMETHING_NEW at http://site/")
    assert cls == TRANSIENT and "net::ERR_SOMETHING_NEW" in note


PLAYWRIGHT = [
    ("url is not allowed", POLICY),
    ("page.goto: Download is starting", PERMANENT),
    ("download refused: 52428800 bytes of application/octet-stream exceed the limit", PERMANENT),
    ("robots.txt disallows this URL", PERMANENT),
    ("the page navigated to http://h/r.html, which was not requested: the crawl excludes it (pattern 'r') "
     "(navigation rules; nothing was archived)", PERMANENT),
    ("page.goto: Target page, context or browser has been closed", TRANSIENT),
    ("Protocol error (Page.navigate): Target closed.", TRANSIENT),
    ("Page crashed", TRANSIENT),
    ("Browser has been disconnected", TRANSIENT),
    ("browser is not usable: chromium exited with code 1", TRANSIENT),
    ("page.goto: Timeout 30000ms exceeded.", TRANSIENT),
    ('page.goto: Navigation to "http://a/" is interrupted by another navigation to "http://a/x"', TRANSIENT),
    ("page.evaluate: Frame was detached", TRANSIENT),
    ("navigation produced no response", TRANSIENT),
    ("Protocol error (Runtime.callFunctionOn): Session closed.", TRANSIENT),
]


@pytest.mark.parametrize("message, cls", PLAYWRIGHT)
def test_every_mapped_playwright_message(message, cls):
    assert classify_message(message) == (cls, None)


def test_every_message_rule_is_exercised():
    hit = {next(needle for needle, _ in MESSAGES if needle in m.lower()) for m, _ in PLAYWRIGHT}
    assert hit == {needle for needle, _ in MESSAGES}


def report(kind=None, message="boom", status="failed", http=None):
    details = {"type": kind, "message": message} if kind else {}
    if http is not None:
        details["httpStatusCode"] = http
    return {"status": status, **({"errorDetails": details} if details else {})}


@pytest.mark.parametrize("rep, http, cls", [
    (report("http", "HTTP 404", "http_error", 404), 404, PERMANENT),
    (report("http", "HTTP 410", "http_error", 410), 410, PERMANENT),
    (report("http", "HTTP 429", "http_error", 429), 429, TRANSIENT),
    (report("http", "HTTP 408", "http_error", 408), 408, TRANSIENT),
    (report("http", "HTTP 500", "http_error", 500), 500, TRANSIENT),
    (report("http", "HTTP 503", "http_error", 503), 503, TRANSIENT),
    (report("policy", "net::ERR_CONNECTION_RESET"), None, POLICY),           # the type wins over the message
    (report("internal", "url is not allowed"), None, POLICY),                # the private-host refusal
    (report("internal", "page.goto: net::ERR_TOO_MANY_REDIRECTS at x"), None, PERMANENT),  # what, not where
    (report("timeout", "a browser operation exceeded 30000 ms", "timeout"), None, TRANSIENT),
    (report("connection", "browser is not usable"), None, TRANSIENT),
    (report("signing", "a signature was required and could not be obtained: x"), None, PERMANENT),
    (report("artifact_sink", "s3://b/k: upload failed"), None, PERMANENT),
    (report("internal", "ValueError: something odd"), None, TRANSIENT),
    (report(None), None, TRANSIENT),
])
def test_reports_are_classed_from_what_happened(rep, http, cls):
    assert classify_report(rep, http) == (cls, None)


def test_an_unknown_error_type_is_transient_with_a_note():
    cls, note = classify_report(report("quantum", "?"), None)
    assert cls == TRANSIENT and "quantum" in note


@pytest.mark.parametrize("status, cls", [(400, PERMANENT), (404, PERMANENT), (415, PERMANENT),
                                         (500, TRANSIENT), (502, TRANSIENT)])
def test_refused_submissions(status, cls):
    assert refusal_class(status) == cls


# -- crawl_host: only transient failures are retried ---------------------------------------------

def crawl_one(message, kind="internal", log=None):
    e = FakeEndpoint("bh-1", [], responses=[
        lambda u, t: {**capture_reply(u, t, status="failed", error_type=kind),
                      "report": {"status": "failed", "errorDetails": {"type": kind, "message": message}}},
        lambda u, t: capture_reply(u, t),
    ])
    [r] = capture_host([e], "h", ["http://h/p"], "c1", formats=FORMATS, signing=False, scripts=[], delay_ms=20,
                       busy_jitter_ms=(1, 2), log=log or (lambda _m: None))
    return e, r


@pytest.mark.parametrize("message", ["page.goto: net::ERR_TOO_MANY_REDIRECTS at http://h/loop",
                                     "page.goto: Download is starting", "url is not allowed",
                                     "page.goto: net::ERR_CERT_AUTHORITY_INVALID at https://h/"])
def test_permanent_and_policy_failures_are_submitted_once(message):
    e, r = crawl_one(message)
    assert len(e.times) == 1 and r["status"] == "failed" and r["failureClass"] in (PERMANENT, POLICY)
    assert message in r["skipReason"] and "\n" not in r["skipReason"]


def test_a_transient_failure_is_retried_once():
    e, r = crawl_one("page.goto: net::ERR_CONNECTION_RESET at http://h/p")
    assert len(e.times) == 2 and r["status"] == "captured" and "failureClass" not in r


def test_an_unknown_code_is_logged_and_retried():
    lines: list[str] = []
    e, r = crawl_one("page.goto: net::ERR_BRAND_NEW at http://h/p", log=lines.append)
    assert len(e.times) == 2 and any("net::ERR_BRAND_NEW" in line and "transient" in line for line in lines)
