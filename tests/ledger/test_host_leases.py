"""Host leases and per-host politeness across crawls (issue 12) over the app: real Postgres,
real OpenFGA server, fake Windmill webhook. A host is leased to one level at a time; hosts leased
elsewhere are carried to the crawl's next level; a level with every host leased waits and is
dispatched when the lease ends; the frontier carries the host's last capture (any crawl) and
the larger delay."""

from __future__ import annotations

import psycopg
import pytest

from ledger.crawl import dispatch, leases
from tests.fixtures.ledger import LedgerHarness, ledger_settings, open_ledger

pytestmark = pytest.mark.anyio
WHO = LedgerHarness.who()
NO_SCRIPTS = {"typescript": "6.0.3", "hostTypes": "v0.2.0", "scripts": []}


def rows(db_url, sql, *args):
    with psycopg.connect(db_url) as conn:
        return conn.execute(sql, args).fetchall()


@pytest.fixture
def settings(migrated_db_url, ledger_fga, fake_webhook):
    return ledger_settings(migrated_db_url, ledger_fga, fake_webhook.url)


async def start(h, seeds, delay_ms, max_depth=1):
    r = await h.client.post("/api/crawls", json={"seeds": seeds, "scripts": [], "perHostDelayMs": delay_ms,
                                                 "maxDepth": max_depth}, headers=WHO)
    assert r.status_code == 202, r.text
    return r.json()["crawlId"]


def captured(url, finished, gap_from=None):
    r = {"url": url, "status": "captured", "submittedAt": "2026-09-19T14:53:30.000Z", "finishedAt": finished}
    if gap_from:
        r["gapFrom"] = gap_from
    return r


async def report(h, crawl_id, depth, results):
    r = await h.client.post(f"/api/crawls/{crawl_id}/pages", json={"depth": depth, "results": results,
                                                                  "compiled": NO_SCRIPTS}, headers=WHO)
    assert r.status_code == 200, r.text
    return r.json()


def frontier(fake_webhook, crawl_id, index=-1):
    return fake_webhook.bodies(crawl_id)[index]["frontier"]


async def test_shared_host_carried_then_sent_with_the_other_crawls_time_and_delay(settings, fake_webhook):
    async with open_ledger(settings) as h:
        a = await start(h, ["https://a.test/", "https://s.test/"], 5000)
        b = await start(h, ["https://s.test/x", "https://b.test/"], 1000)
        # a holds s.test: b's level 0 sends b.test only and carries s.test/x to level 1
        assert {f["host"] for f in frontier(fake_webhook, a)} == {"a.test", "s.test"}
        assert [f["url"] for f in frontier(fake_webhook, b)] == ["https://b.test/"]
        assert rows(settings.database_url, "SELECT depth, level, state FROM crawl_pages WHERE url = 'https://s.test/x'"
                    ) == [(0, 1, "pending")]  # carried to level 1, still a seed (depth 0)
        # a reports: its leases end, s.test's last capture is a's
        answer = await report(h, a, 0, [captured("https://a.test/", "2026-09-19T14:53:39.000Z"),
                                        captured("https://s.test/", "2026-09-19T14:53:41.000Z")])
        assert answer == {"next": [], "stopReason": "completed"}
        assert rows(settings.database_url, "SELECT host FROM host_leases ORDER BY host") == [("b.test",)]
        # b's level 0 ends: level 1 = the carried page, with s.test's last capture by a and a's delay
        answer = await report(h, b, 0, [captured("https://b.test/", "2026-09-19T14:53:50.000Z")])
        assert answer["next"] == [{"url": "https://s.test/x", "host": "s.test", "depth": 1}]
        assert frontier(fake_webhook, b) == [{"url": "https://s.test/x", "host": "s.test",
                                              "lastFinishedAt": "2026-09-19T14:53:41.000Z", "hostDelayMs": 5000}]
        assert rows(settings.database_url, "SELECT host, crawl_id::text, depth FROM host_leases") == [("s.test", b, 1)]
        # level 1 = maxDepth, but the carried seed is at depth 0: its links are asked for
        assert fake_webhook.bodies(b)[-1]["capture_formats"]["links"] is True
    # the host row: a's capture time and delay (b captured nothing on s.test yet)
    assert rows(settings.database_url, "SELECT last_capture_at::text, last_delay_ms FROM hosts WHERE host = 's.test'"
                ) == [("2026-09-19 14:53:41+00", 5000)]


async def test_waiting_level_is_dispatched_when_the_lease_ends(settings, fake_webhook):
    async with open_ledger(settings) as h:
        a = await start(h, ["https://s.test/"], 2000)
        c = await start(h, ["https://s.test/c"], 2000)
        assert fake_webhook.bodies(c) == []
        assert rows(settings.database_url, "SELECT level_state FROM crawls WHERE id = %s", c) == [("waiting",)]
        # nothing freed: the lease loop leaves it waiting, sends nothing
        assert await dispatch.dispatch_waiting(h.services) == 0
        await report(h, a, 0, [captured("https://s.test/", "2026-09-19T14:53:41.000Z")])
        # the report's background work dispatched the waiting level
        assert [f["url"] for f in frontier(fake_webhook, c)] == ["https://s.test/c"]
        assert frontier(fake_webhook, c)[0]["lastFinishedAt"] == "2026-09-19T14:53:41.000Z"
        assert rows(settings.database_url, "SELECT level_state FROM crawls WHERE id = %s", c) == [("dispatched",)]
        # a second dispatch (another replica's lease loop) sends nothing more
        assert await dispatch.dispatch_waiting(h.services) == 0
        assert len(fake_webhook.bodies(c)) == 1


async def test_releaser_cannot_take_a_host_back_from_a_waiter(settings, fake_webhook):
    """Crawl b waits for s.test (carried, its level in flight); a's next level may not re-lease
    s.test when it frees it, so a carries its s.test page too; b gets the host next."""
    async with open_ledger(settings) as h:
        a = await start(h, ["https://s.test/"], 2000, max_depth=2)
        b = await start(h, ["https://s.test/b", "https://b.test/"], 2000)
        assert [f["host"] for f in frontier(fake_webhook, b)] == ["b.test"]
        # a's level 0 ends; its level 1 holds a page on s.test (inserted directly: no S3 here)
        with psycopg.connect(settings.database_url, autocommit=True) as conn:
            conn.execute("INSERT INTO crawl_pages (crawl_id, url, url_key, depth, host) VALUES"
                         " (%s, 'https://s.test/next', 'https://s.test/next', 1, 's.test'),"
                         " (%s, 'https://a.test/', 'https://a.test/', 1, 'a.test')", (a, a))
        await report(h, a, 0, [captured("https://s.test/", "2026-09-19T14:53:41.000Z")])
        assert [f["url"] for f in frontier(fake_webhook, a)] == ["https://a.test/"]
        assert rows(settings.database_url, "SELECT depth, level FROM crawl_pages WHERE url = 'https://s.test/next'"
                    ) == [(1, 2)]
        await report(h, b, 0, [captured("https://b.test/", "2026-09-19T14:53:42.000Z")])
        assert [f["url"] for f in frontier(fake_webhook, b)] == ["https://s.test/b"]
        assert rows(settings.database_url, "SELECT crawl_id::text FROM host_leases WHERE host = 's.test'") == [(b,)]
