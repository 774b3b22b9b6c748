"""Issue 29 item 2 through the routes on real Postgres (ledger.crawl.sitemaps): the options
stored and shown, refused when they cannot work (400 naming the field), level 0's flow input,
and a level report's sitemap URLs queued in scope after the seeds, counted, with the host's last
sitemap request kept as its gap start."""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta, timezone

import pytest

from tests.fixtures.ledger import open_ledger
from tests.ledger.test_level_reports import WHO, post, report, rows, settings, start, store_of  # noqa: F401

pytestmark = pytest.mark.anyio


def captured(url, links=()):
    return {"url": url, "status": "captured", "links": [{"href": h} for h in links]}


async def _bodies(fake_webhook, crawl_id, n):
    for _ in range(100):
        got = fake_webhook.bodies(crawl_id)
        if len(got) >= n:
            return got
        await asyncio.sleep(0.05)
    raise AssertionError(f"{n} webhook bodies expected, got {fake_webhook.bodies(crawl_id)}")


@pytest.mark.parametrize("body, field, needle", [
    ({"sitemapLastmodAfter": "2024-01-01"}, "body", "needs useSitemap"),
    ({"useSitemap": True, "maxDepth": 0}, "body", "maxDepth must be at least 1"),
    ({"useSitemap": "yes"}, "useSitemap", ""),
    ({"useSitemap": True, "sitemapLastmodAfter": "last week"}, "sitemapLastmodAfter", ""),
    ({"useSitemap": True, "sitemapLastmodAfter": "2024-01-01T10:00:00"}, "sitemapLastmodAfter", ""),  # no offset
])
async def test_sitemap_options_that_cannot_work_are_400(settings, s3_server, body, field, needle):
    async with open_ledger(settings, s3=store_of(s3_server)) as h:
        r = await h.client.post("/api/crawls", headers=WHO, json={"seeds": ["https://a.test/"], "scripts": [], **body})
    assert r.status_code == 400, r.text
    assert field in r.json()["fields"] and needle in r.json()["error"], r.text
    assert rows(settings.database_url, "SELECT count(*) FROM crawls") == [(0,)]


async def test_saved_targets_default_depth_zero_refuses_sitemaps(settings, s3_server):
    async with open_ledger(settings, s3=store_of(s3_server)) as h:
        r = await h.client.post("/api/crawls", headers=WHO, json={"fromTargets": {}, "useSitemap": True})
    assert r.status_code == 400, r.text  # no targets, or depth 0: either way nothing is created
    assert rows(settings.database_url, "SELECT count(*) FROM crawls") == [(0,)]


async def test_options_stored_shown_and_sent_with_level_zero_only(settings, s3_server, fake_webhook):
    async with open_ledger(settings, s3=store_of(s3_server)) as h:
        crawl_id = await start(h, useSitemap=True, sitemapLastmodAfter="2024-03-01", maxPages=40, maxDepth=2)
        plain = await start(h, seeds=["https://b.test/"])
        view = (await h.client.get(f"/api/crawls/{crawl_id}", headers=WHO)).json()
        plain_view = (await h.client.get(f"/api/crawls/{plain}", headers=WHO)).json()
        level0 = (await _bodies(fake_webhook, crawl_id, 1))[0]
        r = await post(h, crawl_id, report(0, [captured("https://a.test/", ["https://a.test/x"])]))
        assert r.status_code == 200, r.text
        level1 = (await _bodies(fake_webhook, crawl_id, 2))[1]
        plain0 = (await _bodies(fake_webhook, plain, 1))[0]
    assert (view["useSitemap"], view["sitemapLastmodAfter"], view["sitemap"]) == (True, "2024-03-01T00:00:00.000Z", None)
    assert (plain_view["useSitemap"], plain_view["sitemapLastmodAfter"]) == (False, None)
    assert level0["sitemap"] == {"lastmodAfter": "2024-03-01T00:00:00.000Z", "maxUrls": 40}
    assert "sitemap" not in level1 and "sitemap" not in plain0


def sitemap_entry(host, urls, **more):
    return {"host": host, "urls": urls, "files": 2, "found": len(urls) + 1, "older": 1, "notes": [], **more}


async def test_sitemap_urls_in_scope_are_queued_after_the_seeds_and_counted(settings, s3_server, fake_webhook):
    last = datetime.now(timezone.utc).replace(microsecond=0) + timedelta(seconds=30)
    async with open_ledger(settings, s3=store_of(s3_server)) as h:
        crawl_id = await start(h, seeds=["https://a.test/"], useSitemap=True, maxDepth=1, extraHops=1,
                               exclude=["/private/"])
        body = report(0, [captured("https://a.test/", ["https://a.test/linked", "https://a.test/both"])])
        body["sitemaps"] = [sitemap_entry("a.test", [
            "https://a.test/both", "https://a.test/s1", "https://a.test/private/p", "https://other.test/x",
            "https://a.test/", "https://a.test/s2", "not a url"], lastRequestAt=last.isoformat(),
            notes=["https://a.test/gone.xml: HTTP 404"])]
        r = await post(h, crawl_id, body)
        assert r.status_code == 200, r.text
        view = (await h.client.get(f"/api/crawls/{crawl_id}", headers=WHO)).json()
        level1 = (await _bodies(fake_webhook, crawl_id, 2))[1]
    # the seed's links first, then the sitemap's new URLs in scope; never out of scope by extra hops
    assert [n["url"] for n in r.json()["next"]] == [
        "https://a.test/linked", "https://a.test/both", "https://a.test/s1", "https://a.test/s2"]
    assert view["sitemap"] == {"files": 2, "found": 8, "older": 1, "queued": 2, "outOfScope": 2, "notQueued": 3,
                               "notes": ["https://a.test/gone.xml: HTTP 404"]}
    # the host's gap runs from the last sitemap request, which came after the seed's capture here
    assert rows(settings.database_url, "SELECT last_capture_at FROM hosts WHERE host = 'a.test'") == [(last,)]
    assert {f["lastFinishedAt"] for f in level1["frontier"]} == {last.strftime("%Y-%m-%dT%H:%M:%S.000Z")}


async def test_sitemap_urls_respect_the_page_budget(settings, s3_server):
    async with open_ledger(settings, s3=store_of(s3_server)) as h:
        crawl_id = await start(h, seeds=["https://a.test/"], useSitemap=True, maxDepth=1, maxPages=3)
        body = report(0, [captured("https://a.test/", ["https://a.test/l"])])
        body["sitemaps"] = [sitemap_entry("a.test", [f"https://a.test/s{i}" for i in range(5)])]
        r = await post(h, crawl_id, body)
        view = (await h.client.get(f"/api/crawls/{crawl_id}", headers=WHO)).json()
    assert [n["url"] for n in r.json()["next"]] == ["https://a.test/l", "https://a.test/s0"]
    assert view["stopReason"] == "max_pages" and view["sitemap"]["queued"] == 1, view


@pytest.mark.parametrize("entries, needle", [
    ([sitemap_entry("a.test", []), sitemap_entry("a.test", [])], "listed twice"),
    ([sitemap_entry("a.test", [], lastRequestAt="2999-01-01T00:00:00Z")], "future"),
    ([sitemap_entry("a.test/x", [])], "host"),
    ([sitemap_entry("a.test", [], found=-1)], "found"),
])
async def test_bad_sitemap_entries_are_400_and_change_nothing(settings, s3_server, entries, needle):
    async with open_ledger(settings, s3=store_of(s3_server)) as h:
        crawl_id = await start(h, seeds=["https://a.test/"], useSitemap=True)
        body = report(0, [captured("https://a.test/")])
        body["sitemaps"] = entries
        r = await post(h, crawl_id, body)
    assert r.status_code == 400 and needle in r.text, r.text
    assert rows(settings.database_url, "SELECT state FROM crawl_pages") == [("pending",)]
