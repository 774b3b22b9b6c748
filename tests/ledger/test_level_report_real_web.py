"""Issue 13 through the level report route on real Postgres and the S3 stand-in: redirects
(finalUrl, contract 4, case C5), URL equivalence, the budget across hosts, parameter traps."""

from __future__ import annotations

import pytest

from tests.fixtures.ledger import open_ledger
from tests.ledger.test_level_reports import WHO, post, put_links, report, rows, settings, start, store_of  # noqa: F401

pytestmark = pytest.mark.anyio


def captured(url, links_key=None, **extra):
    result = {"url": url, "status": "captured", **extra}
    if links_key:
        result["linksLocation"] = links_key
    return result


async def view_of(h, crawl_id):
    return (await h.client.get(f"/api/crawls/{crawl_id}", headers=WHO)).json()


# -- redirects ---------------------------------------------------------------------------------

@pytest.mark.parametrize("status", ["captured", "failed"])  # an HTTP 301, or a JS redirect off a 403 page
async def test_redirected_seed_records_both_urls_and_its_target_is_not_captured_again(settings, s3_server, status):
    first = put_links(s3_server, [{"href": "https://a.test/new"}, {"href": "https://a.test/new#top"},
                                  {"href": "https://a.test/other"}])
    later = put_links(s3_server, [{"href": "https://a.test/new"}, {"href": "https://a.test/old"},
                                  {"href": "https://a.test/%6Eew"}])
    async with open_ledger(settings, s3=store_of(s3_server)) as h:
        crawl_id = await start(h, seeds=["https://a.test/old"], maxDepth=3)
        result = {"url": "https://a.test/old", "status": status, "finalUrl": "https://a.test/new",
                  "linksLocation": first}
        if status == "failed":
            result["skipReason"] = "HTTP 403"
        r = await post(h, crawl_id, report(0, [result]))
        assert r.status_code == 200, r.text
        assert [n["url"] for n in r.json()["next"]] == ["https://a.test/other"]
        r = await post(h, crawl_id, report(1, [captured("https://a.test/other", later)]))
        assert r.json() == {"next": [], "stopReason": "completed",  # each of its links known (decision 232)
                            "pageLinks": [{"url": "https://a.test/other", "discovered": 3, "kept": 0,
                                           "dropped": {"duplicate": 3}}]}
    pages = rows(settings.database_url, "SELECT url, final_url, final_url_key FROM crawl_pages ORDER BY id")
    assert pages == [("https://a.test/old", "https://a.test/new", "https://a.test/new"),
                     ("https://a.test/other", None, None)]


async def test_final_url_equal_to_the_page_is_stored_without_a_second_key(settings, s3_server):
    async with open_ledger(settings, s3=store_of(s3_server)) as h:
        crawl_id = await start(h, seeds=["https://a.test/%7euser"], maxDepth=0)
        r = await post(h, crawl_id, report(0, [captured("https://a.test/%7euser", finalUrl="https://a.test/~user#x")]))
        assert r.status_code == 200, r.text
    assert rows(settings.database_url, "SELECT final_url, final_url_key FROM crawl_pages") == [
        ("https://a.test/~user", None)]


@pytest.mark.parametrize("final", [
    "javascript:alert(1)", "file:///etc/passwd", "chrome-error://chromewebdata/", "about:blank", "http://",
    "data:text/html,<p>x", "/relative/only", "https://[::1", "https://a.test/\u202e",
])
async def test_unusable_final_url_is_ignored_and_the_report_stands(settings, s3_server, final):
    async with open_ledger(settings, s3=store_of(s3_server)) as h:
        crawl_id = await start(h, seeds=["https://a.test/"], maxDepth=0)
        r = await post(h, crawl_id, report(0, [captured("https://a.test/", finalUrl=final)]))
        assert r.status_code == 200, r.text
    got = rows(settings.database_url, "SELECT state, final_url, final_url_key FROM crawl_pages")
    assert got[0][0] == "captured"
    if got[0][1] is not None:  # a URL ada-url accepts (the bidi mark is percent-encoded) is stored parsed
        assert got[0][1].startswith("https://a.test/")


@pytest.mark.parametrize("final, needle", [("", "finalUrl"), ("https://a.test/" + "x" * 9000, "finalUrl"),
                                           ("https://a.test/\x00", "")])
async def test_malformed_final_url_is_a_400(settings, s3_server, final, needle):
    async with open_ledger(settings, s3=store_of(s3_server)) as h:
        crawl_id = await start(h, seeds=["https://a.test/"], maxDepth=0)
        r = await post(h, crawl_id, report(0, [captured("https://a.test/", finalUrl=final)]))
        assert r.status_code == 400 and needle in r.json()["error"], r.text
    assert rows(settings.database_url, "SELECT state, final_url FROM crawl_pages") == [("pending", None)]


async def test_c5_seed_redirecting_to_another_host_keeps_the_seeds_scope(settings, s3_server):
    """Seed http://a.test/ answers 302 to http://b.test/page: the page is recorded, but the
    links of b.test (absolute, or relative ones the capture resolved against b.test) stay out."""
    links = put_links(s3_server, [{"href": "http://b.test/x"}, {"href": "http://b.test/page/rel"},
                                  {"href": "http://a.test/back"}])
    async with open_ledger(settings, s3=store_of(s3_server)) as h:
        crawl_id = await start(h, seeds=["http://a.test/"], scope="same-host", maxDepth=2)
        r = await post(h, crawl_id, report(0, [captured("http://a.test/", links, finalUrl="http://b.test/page")]))
        assert [n["url"] for n in r.json()["next"]] == ["http://a.test/back"]
        view = await view_of(h, crawl_id)
    assert view["drops"] == {"out_of_scope": 2}
    assert rows(settings.database_url, "SELECT final_url FROM crawl_pages WHERE depth = 0") == [("http://b.test/page",)]


# -- URL equivalence -----------------------------------------------------------------------------

async def test_percent_spellings_are_one_page(settings, s3_server):
    links = put_links(s3_server, [{"href": "https://a.test/%7euser"}, {"href": "https://a.test/%7Euser"},
                                  {"href": "https://a.test/~user"}, {"href": "https://a.test/a%2fb"},
                                  {"href": "https://a.test/a%2Fb"}, {"href": "https://a.test/a/b"}])
    async with open_ledger(settings, s3=store_of(s3_server)) as h:
        crawl_id = await start(h, maxDepth=1)
        r = await post(h, crawl_id, report(0, [captured("https://a.test/", links)]))
    assert [n["url"] for n in r.json()["next"]] == ["https://a.test/%7euser", "https://a.test/a%2fb", "https://a.test/a/b"]
    assert rows(settings.database_url, "SELECT url_key FROM crawl_pages WHERE depth = 1 ORDER BY id") == [
        ("https://a.test/~user",), ("https://a.test/a%2Fb",), ("https://a.test/a/b",)]


# -- budget across hosts -------------------------------------------------------------------------

async def test_two_seeds_two_hosts_budget_is_shared(settings, s3_server):
    """depth 2, --max-pages 30: each seed's page links 22 pages of its host; host A's links come
    first in the report. The 28 slots of level 1 go 14 / 14 (before: A 22, B 6)."""
    a = put_links(s3_server, [{"href": f"https://a.test/p{i}"} for i in range(22)])
    b = put_links(s3_server, [{"href": f"https://b.test/p{i}"} for i in range(22)])
    async with open_ledger(settings, s3=store_of(s3_server)) as h:
        crawl_id = await start(h, seeds=["https://a.test/", "https://b.test/"], scope="same-host",
                               maxDepth=2, maxPages=30)
        r = await post(h, crawl_id, report(0, [captured("https://a.test/", a), captured("https://b.test/", b)]))
    nxt = [n["url"] for n in r.json()["next"]]
    assert [u for u in nxt if "a.test" in u] == [f"https://a.test/p{i}" for i in range(14)]
    assert [u for u in nxt if "b.test" in u] == [f"https://b.test/p{i}" for i in range(14)]


# -- traps ---------------------------------------------------------------------------------------

async def test_month_plus_one_forever_is_stopped_by_parameter_walk(settings, s3_server):
    """Each calendar page links only to ?month=N+1 of itself; maxDepth 10, budget 1,000: the
    walk is cut after WAGGLE_TRAP_WALK_LEVELS (5) levels and the crawl says why."""
    async with open_ledger(settings, s3=store_of(s3_server)) as h:
        crawl_id = await start(h, seeds=["https://cal.test/events?month=1"], maxDepth=10, maxPages=1000)
        url, depth = "https://cal.test/events?month=1", 0
        while True:
            month = int(url.rsplit("=", 1)[1])
            links = put_links(s3_server, [{"href": f"https://cal.test/events?month={month + 1}"}])
            r = await post(h, crawl_id, report(depth, [captured(url, links)]))
            assert r.status_code == 200, r.text
            if not r.json()["next"]:
                break
            url, depth = r.json()["next"][0]["url"], depth + 1
        view = await view_of(h, crawl_id)
    assert depth == 5 and url == "https://cal.test/events?month=6"
    assert (view["state"], view["stopReason"]) == ("succeeded", "completed")
    assert view["drops"] == {"parameter_walk": 1}
    shapes = rows(settings.database_url, "SELECT kind, shape, depths FROM crawl_url_shapes WHERE kind = 'walk'")
    assert shapes == [("walk", "https://cal.test/events?month=#", [1, 2, 3, 4, 5])]


async def test_session_id_variant_of_a_held_page_is_dropped(settings, s3_server):
    first = put_links(s3_server, [{"href": "https://a.test/p?id=1"}])
    second = put_links(s3_server, [{"href": "https://a.test/p?id=1&PHPSESSID=9a8b"}, {"href": "https://a.test/q"}])
    async with open_ledger(settings, s3=store_of(s3_server)) as h:
        crawl_id = await start(h, maxDepth=3)
        r = await post(h, crawl_id, report(0, [captured("https://a.test/", first)]))
        r = await post(h, crawl_id, report(1, [captured("https://a.test/p?id=1", second)]))
        assert [n["url"] for n in r.json()["next"]] == ["https://a.test/q"]
        assert (await view_of(h, crawl_id))["drops"] == {"session_id": 1}


# -- WACZ admission: the reason reaches the crawl's view -----------------------------------------

async def test_incomplete_wacz_reason_in_the_crawl_view(settings, s3_server):
    import uuid

    from tests.archive.helpers import manifest, put_json, put_wacz, wacz_bytes

    async with open_ledger(settings, s3=store_of(s3_server)) as h:
        crawl_id = await start(h, seeds=["https://a.test/", "https://a.test/b"], maxDepth=0)
        results = []
        for url, broken in (("https://a.test/", {"drop": ("pages/pages.jsonl",)}), ("https://a.test/b", {})):
            task = str(uuid.uuid4())
            m = manifest(task, url=url, correlationId=crawl_id)
            put_json(s3_server, f"{task}.result.json", m)
            put_wacz(s3_server, m["artifacts"]["wacz"], wacz_bytes(url, **broken))
            results.append(captured(url, taskId=task, correlationId=crawl_id,
                                    manifestLocation=f"s3://{s3_server.bucket}/{task}.result.json"))
        r = await post(h, crawl_id, report(0, results))
        assert r.status_code == 200, r.text
        view = await view_of(h, crawl_id)
    assert view["archivesIncomplete"] == 1
    assert view["archiveProblems"] == [{"url": "https://a.test/", "reason": "the WACZ lacks pages/pages.jsonl"}]
    assert rows(settings.database_url, "SELECT source_url, wacz_complete FROM archives ORDER BY source_url") == [
        ("https://a.test/", False), ("https://a.test/b", True)]
