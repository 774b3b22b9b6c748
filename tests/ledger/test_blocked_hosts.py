"""Blocked hosts in the ledger (decision 231) on real Postgres: a level report's ``blocked``
pages pause their host for the rest of the crawl — its pages of later levels are recorded
``blocked`` with the reason and never dispatched — and the crawl view lists the host."""

from __future__ import annotations

import uuid

import pytest

from tests.fixtures.ledger import open_ledger
from tests.ledger.test_level_reports import WHO, post, report, rows, settings, start, store_of  # noqa: F401

pytestmark = pytest.mark.anyio

CHALLENGE = "challenge page: Cloudflare (cloudflare-challenge), HTTP 403"
HELD = "not captured: the host is paused for the rest of the crawl after " + CHALLENGE
T0, T1 = "2026-01-01T00:00:00.000Z", "2026-01-01T00:00:01.000Z"


async def test_a_blocked_host_gets_no_further_level(settings, s3_server, fake_webhook):
    async with open_ledger(settings, s3=store_of(s3_server)) as h:
        crawl_id = await start(h, seeds=["https://a.test/", "https://b.test/"], scope="domain", maxDepth=3)
        links_a = [{"href": f"https://a.test/p{i}"} for i in range(3)]
        links_b = [{"href": "https://b.test/q"}, {"href": "https://a.test/from-b"}]
        r = await post(h, crawl_id, report(0, [
            {"url": "https://a.test/", "status": "captured", "links": links_a},
            {"url": "https://b.test/", "status": "captured", "links": links_b}]))
        assert {n["host"] for n in r.json()["next"]} == {"a.test", "b.test"}
        # level 1: a.test answers a challenge on its first page; the flow holds back the rest
        r = await post(h, crawl_id, report(1, [
            {"url": "https://a.test/p0", "status": "blocked", "skipReason": CHALLENGE, "failureClass": "policy",
             "submittedAt": T0, "finishedAt": T1},
            {"url": "https://a.test/p1", "status": "blocked", "skipReason": HELD},
            {"url": "https://a.test/p2", "status": "blocked", "skipReason": HELD},
            {"url": "https://a.test/from-b", "status": "blocked", "skipReason": HELD},
            {"url": "https://b.test/q", "status": "captured",
             "links": [{"href": "https://b.test/r"}, {"href": "https://a.test/later"}]}]))
        nxt = r.json()["next"]
        v = (await h.client.get(f"/api/crawls/{crawl_id}", headers=WHO)).json()
        listed = (await h.client.get(f"/api/crawls/{crawl_id}/pages?state=blocked", headers=WHO)).json()
    assert [n["url"] for n in nxt] == ["https://b.test/r"]  # a.test/later is never dispatched
    later = rows(settings.database_url, "SELECT state, skip_reason FROM crawl_pages WHERE crawl_id = %s"
                 " AND url = 'https://a.test/later'", uuid.UUID(crawl_id))
    assert later == [("blocked", "not captured: the host was paused for the rest of the crawl at depth 1 after "
                      + CHALLENGE)]
    assert v["state"] == "running" and v["pagesBlocked"] == 5
    assert [(b["host"], b["reason"], b["depth"], b["pages"]) for b in v["blockedHosts"]] == [
        ("a.test", CHALLENGE, 1, 5)]
    assert {p["url"] for p in listed["pages"]} == {"https://a.test/p0", "https://a.test/p1", "https://a.test/p2",
                                                  "https://a.test/from-b", "https://a.test/later"}
    assert all(p["state"] == "blocked" for p in listed["pages"])


async def test_a_crawl_whose_only_host_is_blocked_ends_and_says_why(settings, s3_server, fake_webhook):
    async with open_ledger(settings, s3=store_of(s3_server)) as h:
        crawl_id = await start(h, seeds=["https://a.test/"], maxDepth=2)
        r = await post(h, crawl_id, report(0, [
            {"url": "https://a.test/", "status": "blocked", "skipReason": CHALLENGE, "failureClass": "policy",
             "submittedAt": T0, "finishedAt": T1}]))
        v = (await h.client.get(f"/api/crawls/{crawl_id}", headers=WHO)).json()
        listing = (await h.client.get("/api/crawls", headers=WHO)).json()
    assert r.json()["stopReason"] == "failed"  # nothing captured is a failure
    assert v["state"] == "failed" and v["error"] == f"nothing was captured: https://a.test/: blocked: {CHALLENGE}"
    assert v["blockedHosts"][0]["host"] == "a.test" and v["pagesBlocked"] == 1
    mine = next(c for c in (listing if isinstance(listing, list) else listing["crawls"]) if c["crawlId"] == crawl_id)
    assert (mine["pagesBlocked"], mine["hostsBlocked"]) == (1, 1)  # the crawls list shows both (decision 354)


async def test_the_streak_reason_is_the_earliest_submitted_blocked_page():
    from ledger.crawl.blocked import tripping_reasons
    assert tripping_reasons([
        {"url": "https://a.test/x", "status": "blocked", "skipReason": "held"},
        {"url": "https://a.test/y", "status": "blocked", "skipReason": "second", "submittedAt": T1},
        {"url": "https://a.test/z", "status": "blocked", "skipReason": "first", "submittedAt": T0},
        {"url": "https://b.test/", "status": "failed", "skipReason": "no"},
        {"url": "https://c.test/", "status": "blocked"}]) == {"a.test": "first", "c.test": "blocked answers"}
