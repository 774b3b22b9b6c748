"""crawl_host and the site's robots meta / X-Robots-Tag (issue 24 item 7; extension robotsMeta):
``honourNoarchive`` is asked only of an endpoint that lists the extension and only when the crawl
does not ignore robots meta; a nofollow page's links reach the ledger marked ``nofollow``; a page
the server refused for noarchive is ``policy`` "the site asked not to archive it (noarchive)" and is
not retried. Real timers (no gap)."""

from __future__ import annotations

from f.waggle.crawl_host import NOARCHIVE_REASON, capture_host, extension_members
from ledger.crawl.scope import accept_links
from ledger.crawl.urls import parse_http_url
from tests.flow.fakes import FakeEndpoint, capture_reply

FORMATS = {"png": False, "webp": False, "html": False, "links": True, "mhtml": False, "wacz": True}


def _answer(robots: dict | None, links=("https://a.test/x", "https://a.test/y")):
    def reply(url: str, target: str) -> dict:
        body = capture_reply(url, target)
        body["report"]["artifacts"]["wacz"] = "s3://b/x.wacz"
        body["links"] = [{"href": h, "text": "", "rel": "next" if i == 0 else None} for i, h in enumerate(links)]
        if robots is not None:
            body["robots"] = robots
        return body
    return reply


def _noarchive(url: str, target: str) -> dict:
    body = capture_reply(url, target, status="failed", error_type="policy")
    body["report"]["errorDetails"]["message"] = "the site asked not to archive it (noarchive)"
    body["robots"] = {"noarchive": True, "nofollow": False, "meta": "noarchive"}
    return body


def run(endpoint, urls, **kw):
    logs: list[str] = []
    results = capture_host([endpoint], "a.test", urls, "c1", formats=FORMATS, signing=False, scripts=[], delay_ms=0,
                           busy_jitter_ms=(1, 2), log=logs.append, **kw)
    return results, logs


def test_honour_noarchive_is_sent_only_where_the_extension_is_listed():
    request = {"url": "u", "captureFormats": FORMATS, "honourNoarchive": True}
    assert "honourNoarchive" not in extension_members(request, frozenset())  # a real v12: nothing changes
    assert extension_members(request, frozenset({"robotsMeta"}))["honourNoarchive"] is True
    assert "honourNoarchive" in request  # the caller's request is not changed


def test_by_default_the_crawl_asks_to_honour_noarchive_and_ignoring_does_not():
    e = FakeEndpoint("bh-1", [])
    run(e, ["https://a.test/"])
    assert e.requests[0]["honourNoarchive"] is True
    e = FakeEndpoint("bh-1", [])
    run(e, ["https://a.test/"], ignore_robots_meta=True)
    assert "honourNoarchive" not in e.requests[0]


def test_a_nofollow_page_has_every_link_dropped_as_nofollow_by_the_ledger():
    e = FakeEndpoint("bh-1", [], responses=[_answer({"noarchive": False, "nofollow": True, "meta": "nofollow"})])
    [result], logs = run(e, ["https://a.test/"])
    assert result["status"] == "captured"
    assert [link["rel"] for link in result["links"]] == ["next nofollow", "nofollow"]
    accepted = accept_links(result["links"], [parse_http_url("https://a.test/")], "same-origin")
    assert accepted.urls == [] and accepted.drops["nofollow"] == 2
    assert any("asked not to follow its links (nofollow): 2 link(s)" in m for m in logs)


def test_ignoring_robots_meta_follows_a_nofollow_page():
    e = FakeEndpoint("bh-1", [], responses=[_answer({"noarchive": False, "nofollow": True})])
    [result], _ = run(e, ["https://a.test/"], ignore_robots_meta=True)
    assert [link["rel"] for link in result["links"]] == ["next", None]


def test_pages_that_said_nothing_or_only_archive_wishes_keep_their_links():
    for robots in (None, {"noarchive": False, "nofollow": False, "meta": "index"}):
        e = FakeEndpoint("bh-1", [], responses=[_answer(robots)])
        [result], _ = run(e, ["https://a.test/"])
        assert [link["rel"] for link in result["links"]] == ["next", None]


def test_a_noarchive_page_is_policy_with_the_sites_reason_and_not_retried():
    calls: list[str] = []
    e = FakeEndpoint("bh-1", calls, responses=[_noarchive])
    [result], _ = run(e, ["https://a.test/"])
    assert result["status"] == "failed" and result["failureClass"] == "policy"
    assert result["skipReason"] == NOARCHIVE_REASON
    assert calls == ["bh-1"]  # policy is never retried
    assert "wacz" not in result.get("manifestSummary", {})


# -- the wait behind the previous page (issue 24 item 8) -----------------------------------------

def test_turn_wait_becomes_wait_ms_clamped_to_the_submission():
    from f.waggle.crawl_host import judge_answer, turn_wait_ms

    assert turn_wait_ms({"turnWaitMs": 1500}, 100.0, 102.0) == 1500
    assert turn_wait_ms({"turnWaitMs": 5000}, 100.0, 102.0) == 2000  # never longer than the submission
    for bad in ({}, {"turnWaitMs": -1}, {"turnWaitMs": "1"}, {"turnWaitMs": True}, None):
        assert turn_wait_ms(bad, 100.0, 102.0) is None
    body = capture_reply("https://a.test/", "bh-1")
    result = judge_answer("https://a.test/", "c1", {**body, "turnWaitMs": 700}, (100.0, 101.0, 100.5),
                          lambda _m: None).result
    assert result["waitMs"] == 700
    assert "waitMs" not in judge_answer("https://a.test/", "c1", body, (100.0, 101.0, 100.5), lambda _m: None).result
