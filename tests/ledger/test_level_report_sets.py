"""The level report's set-based paths (one statement per step, insert-first dedup through the
unique index): duplicates across results, links the crawl already holds, the budget cutting
mid-batch, the per-host cap after insert-first, and all-or-nothing on a failure after rows were
inserted."""

from __future__ import annotations

import uuid

import pytest

import ledger.crawl.levels as levels
from tests.fixtures.ledger import ledger_settings, open_ledger
from tests.ledger.test_level_reports import WHO, post, put_links, report, rows, start, store_of

pytestmark = pytest.mark.anyio


@pytest.fixture
def settings(migrated_db_url, ledger_fga, fake_webhook, s3_server):
    return ledger_settings(migrated_db_url, ledger_fga, fake_webhook.url, s3_bucket=s3_server.bucket,
                           max_pages_per_host=6)


def page(url, links_key=None, status="captured", **extra):
    r = {"url": url, "status": status, **extra}
    if links_key:
        r["linksLocation"] = links_key
    return r


async def test_duplicates_across_results_and_known_links(settings, s3_server):
    first = put_links(s3_server, [{"href": "https://a.test/k"}])
    async with open_ledger(settings, s3=store_of(s3_server)) as h:
        crawl_id = await start(h, maxDepth=3, maxPages=100)
        r = await post(h, crawl_id, report(0, [page("https://a.test/", first)]))
        assert [n["url"] for n in r.json()["next"]] == ["https://a.test/k"]
        one = put_links(s3_server, [{"href": "https://a.test/n1"}, {"href": "https://a.test/"},  # seed: known
                                    {"href": "https://a.test/n2#x"}])
        two = put_links(s3_server, [{"href": "https://a.test/n2"}, {"href": "https://a.test/k"},  # k: known
                                    {"href": "https://a.test/n1"}, {"href": "https://a.test/n3"}])
        # the same page reported twice: the later result wins (as if applied in order)
        r = await post(h, crawl_id, report(1, [
            page("https://a.test/k", one, status="failed", skipReason="first"),
            page("https://a.test/k#again", two, status="skipped", skipReason="second",
                 finishedAt="2026-09-19T14:53:40.123Z"),
        ]))
        assert r.status_code == 200, r.text
        assert r.json() == {"stopReason": None, "next": [
            {"url": u, "host": "a.test", "depth": 2} for u in ("https://a.test/n1", "https://a.test/n2",
                                                               "https://a.test/n3")],
            "pageLinks": [  # each result's share (decision 232): a link is kept by the first that named it
                {"url": "https://a.test/k", "discovered": 3, "kept": 2, "dropped": {"duplicate": 1}},
                {"url": "https://a.test/k#again", "discovered": 4, "kept": 1, "dropped": {"duplicate": 3}}]}
        view = (await h.client.get(f"/api/crawls/{crawl_id}", headers=WHO)).json()
    assert view["pagesDiscovered"] == 1 + 5  # level 0: k; level 1: n1, seed, n2, k, n3 (unique in the call)
    assert rows(settings.database_url, "SELECT state, skip_reason FROM crawl_pages WHERE url = 'https://a.test/k'") \
        == [("skipped", "second")]
    assert rows(settings.database_url, "SELECT url, depth FROM crawl_pages WHERE depth = 2 ORDER BY id") == [
        ("https://a.test/n1", 2), ("https://a.test/n2", 2), ("https://a.test/n3", 2)]


async def test_budget_cuts_mid_batch_known_links_use_no_room(settings, s3_server):
    seed_links = put_links(s3_server, [{"href": "https://a.test/old"}])
    async with open_ledger(settings, s3=store_of(s3_server)) as h:
        crawl_id = await start(h, maxDepth=3, maxPages=5)
        await post(h, crawl_id, report(0, [page("https://a.test/", seed_links)]))  # holds: seed, old
        links = put_links(s3_server, [{"href": "https://a.test/"}, {"href": "https://a.test/old"}]
                          + [{"href": f"https://a.test/n{i}"} for i in range(6)])
        r = await post(h, crawl_id, report(1, [page("https://a.test/old", links)]))
        # room = 5 − 2 held = 3; the two known links come first in the file and take none of it
        assert [n["url"] for n in r.json()["next"]] == ["https://a.test/n0", "https://a.test/n1", "https://a.test/n2"]
        view = (await h.client.get(f"/api/crawls/{crawl_id}", headers=WHO)).json()
    assert (view["state"], view["stopReason"]) == ("running", "max_pages")
    assert rows(settings.database_url, "SELECT count(*) FROM crawl_pages")[0][0] == 5


async def test_insert_first_then_per_host_cap_leaves_only_the_plan(settings, s3_server):
    # every link fits the budget (insert-first); the per-host cap (6) screens the rest out again
    links = put_links(s3_server, [{"href": f"https://a.test/p{i}"} for i in range(8)]
                      + [{"href": "https://a.test/x/x/x/"}])  # a trap: never inserted for good
    async with open_ledger(settings, s3=store_of(s3_server)) as h:
        crawl_id = await start(h, maxDepth=3, maxPages=1000)
        r = await post(h, crawl_id, report(0, [page("https://a.test/", links)]))
        assert [n["url"] for n in r.json()["next"]] == [f"https://a.test/p{i}" for i in range(5)]
        view = (await h.client.get(f"/api/crawls/{crawl_id}", headers=WHO)).json()
    assert view["drops"] == {"max_pages_per_host": 3, "repeated_segment": 1}
    assert [u for (u,) in rows(settings.database_url, "SELECT url FROM crawl_pages WHERE depth = 1 ORDER BY id")] \
        == [f"https://a.test/p{i}" for i in range(5)]


async def test_failure_after_the_insert_rolls_everything_back(settings, s3_server, monkeypatch):
    from tests.archive.helpers import manifest, put_json

    task = str(uuid.uuid4())
    put_json(s3_server, f"{task}.result.json", manifest(task, url="https://a.test/"))
    links = put_links(s3_server, [{"href": f"https://a.test/p{i}"} for i in range(3)])
    body = report(0, [page("https://a.test/", links, taskId=task,
                           manifestLocation=f"s3://{s3_server.bucket}/{task}.result.json")])
    real = levels.plan_next_level

    def broken(*a, **kw):  # runs after the insert-first statement put the new rows in
        raise RuntimeError("planner broke")

    async with open_ledger(settings, s3=store_of(s3_server)) as h:
        crawl_id = await start(h, maxDepth=3, maxPages=1000)
        monkeypatch.setattr(levels, "plan_next_level", broken)
        r = await post(h, crawl_id, body)
        assert (r.status_code, r.json()) == (500, {"error": "internal error"})
        db = settings.database_url
        for table in ("capture_submissions", "archives", "fga_outbox", "crawl_level_reports"):
            assert rows(db, f"SELECT count(*) FROM {table}")[0][0] == 0, table
        assert rows(db, "SELECT url, state FROM crawl_pages") == [("https://a.test/", "pending")]
        assert rows(db, "SELECT current_depth, pages_captured, state FROM crawls") == [(0, 0, "running")]
        monkeypatch.setattr(levels, "plan_next_level", real)
        r = await post(h, crawl_id, body)  # the flow's retry
        assert r.status_code == 200 and len(r.json()["next"]) == 3
    assert rows(settings.database_url, "SELECT count(*) FROM archives")[0][0] == 1
