"""crawl_host's use of capture-server extensions 14 ``captureAtDeadline`` and 15
``screenshotsInWacz`` (docs/capture-server.md): the members go only to an endpoint that
advertised them (a real v12 would refuse unknown members with 400), and an answer captured at
the deadline is a captured page, logged, never retried. Real HTTP on loopback (tests/flow/fakes.py);
the real capture server: tests/devstack/test_capture_at_deadline.py."""

from __future__ import annotations

import httpx
import pytest

from f.waggle.crawl_host import HttpEndpoint, capture_request, judge_answer
from tests.flow.fakes import HttpFake, capture_reply

URL = "https://example.org/"
BOTH = frozenset({"captureAtDeadline", "screenshotsInWacz"})


@pytest.fixture
def fake():
    f = HttpFake(lambda req: (200, {}, capture_reply(URL, "t")))
    try:
        yield f
    finally:
        f.close()


def sent(fake: HttpFake, extensions: frozenset[str], **formats: bool) -> dict:
    with httpx.Client() as client:
        request = capture_request(URL, "crawl-1", {"wacz": True, **formats}, False, [], None)
        HttpEndpoint(fake.url, client, extensions=extensions).capture(request)
    return fake.requests[-1].json()


def test_a_plain_v12_gets_neither_member(fake):
    body = sent(fake, frozenset(), png=True)
    assert "captureAtDeadline" not in body and "screenshotsInWacz" not in body


def test_advertised_members_are_sent(fake):
    body = sent(fake, BOTH, png=True)
    assert body["captureAtDeadline"] is True and body["screenshotsInWacz"] is True


def test_screenshots_in_wacz_only_with_a_screenshot_and_a_wacz(fake):
    assert "screenshotsInWacz" not in sent(fake, BOTH)  # no png/webp asked
    assert sent(fake, BOTH)["captureAtDeadline"] is True


def test_an_answer_captured_at_the_deadline_is_captured_logged_and_not_retried():
    body = capture_reply(URL, "t")
    body["report"]["incomplete"] = {"reason": "page-load-deadline", "deadlineMs": 30000,
                                    "pendingUrls": ["https://example.org/hang.png"], "pendingCount": 1}
    logs: list[str] = []
    outcome = judge_answer(URL, "crawl-1", body, (1.0, 2.0, 2.0), logs.append)
    assert outcome.result["status"] == "captured" and outcome.retryable is False
    assert logs == [f"{URL}: captured incomplete (page-load-deadline), 1 request(s) still pending: "
                    "https://example.org/hang.png"]


def test_a_timeout_stays_retryable():
    outcome = judge_answer(URL, "crawl-1", capture_reply(URL, "t", status="timeout", error_type="timeout"),
                           (1.0, 2.0, 2.0), lambda _m: None)
    assert outcome.result["status"] == "failed" and outcome.retryable is True
