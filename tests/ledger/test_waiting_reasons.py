"""Why a running crawl waits (ledger.crawl.waits; ``GET /api/crawls/{id}`` ``waiting``): a host
held by another crawl's level (that crawl named), robots.txt read first, the host's gap with its
source (this crawl's delay, a crawl sharing the host, Crawl-delay). Real Postgres, the OpenFGA
stand-in, the fake Windmill webhook over HTTP."""

from __future__ import annotations

from datetime import datetime, timedelta

import psycopg
import pytest

from ledger.crawl.waits import crawl_delay_ms
from tests.fixtures.ledger import LedgerHarness
from tests.ledger.test_host_leases import NO_SCRIPTS, WHO, open_ledger, report, settings, start, captured  # noqa: F401

pytestmark = pytest.mark.anyio


async def view(h, crawl_id):
    return (await h.client.get(f"/api/crawls/{crawl_id}", headers=WHO)).json()


async def event(h, crawl_id, url, phase, status=None):
    body = {"url": url, "phase": phase, **({"status": status} if status else {})}
    r = await h.client.post(f"/api/crawls/{crawl_id}/progress", json=body, headers=WHO)
    assert r.status_code == 200, r.text


def when(text):
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


async def test_a_crawl_waiting_for_another_crawls_turn_says_so_and_names_it(settings):
    async with open_ledger(settings) as h:
        a = await start(h, ["https://s.test/1", "https://s.test/2"], 500)
        b = await start(h, ["https://s.test/x"], 3000)
        first_b, first_a = await view(h, b), await view(h, a)
        # a's level holds s.test: b waits for it; a reads robots.txt first
        assert first_b["levelState"] == "waiting"
        assert [(w["host"], w["kind"], w["crawlId"]) for w in first_b["waiting"]] == [("s.test", "turn", a)]
        assert f"waiting for crawl {a[:8]}'s turn" in first_b["waiting"][0]["reason"]
        assert [(w["host"], w["kind"]) for w in first_a["waiting"]] == [("s.test", "robots")]
        # a capture is running: nothing waits on the host
        await event(h, a, "https://s.test/1", "started")
        assert (await view(h, a))["waiting"] == []
        # it ended: the host's gap runs, the larger delay of b (which shares the host) applies
        await event(h, a, "https://s.test/1", "done", "captured")
        gap = (await view(h, a))["waiting"]
        assert [(w["host"], w["kind"], w["delayMs"], w["crawlId"]) for w in gap] == [("s.test", "delay", 3000, b)]
        assert f"the delay 3000 ms of crawl {b[:8]}, which shares the host" in gap[0]["reason"]
        with psycopg.connect(settings.database_url) as conn:
            (done_at,) = conn.execute("SELECT g.at FROM crawl_progress g JOIN crawl_pages p ON p.id = g.page_id"
                                      " WHERE p.url = 'https://s.test/1'").fetchone()
        assert timedelta(0) <= done_at + timedelta(milliseconds=3000) - when(gap[0]["until"]) < timedelta(milliseconds=1)
        # the level ends: b's turn; a finished, so nothing is said about it any more
        await report(h, a, 0, [captured("https://s.test/1", "2026-09-19T14:53:39.000Z"),
                               captured("https://s.test/2", "2026-09-19T14:53:41.000Z")])
        assert "waiting" not in await view(h, a)
        assert [w["kind"] for w in (await view(h, b))["waiting"]] == ["robots"]


@pytest.mark.parametrize("body, ms", [
    ("user-agent: *\ncrawl-delay: 2\n", 2000), ("User-agent: waggle\nCrawl-delay: 0.5\n", 500),
    ("user-agent: *\ncrawl-delay: 9999\n", 120_000), ("user-agent: *\ndisallow: /x\n", None), (None, None),
])
def test_crawl_delay_of_a_cached_robots_txt(body, ms):
    assert crawl_delay_ms(body) == ms


async def test_pages_carried_past_a_level_wait_for_the_holder_then_for_the_next_level(settings):
    async with open_ledger(settings) as h:
        a = await start(h, ["https://s.test/1"], 500)
        b = await start(h, ["https://s.test/x", "https://t.test/"], 500)  # t.test sent, s.test carried
        assert (await view(h, b))["levelState"] == "dispatched"
        assert [(w["host"], w["kind"], w.get("crawlId")) for w in (await view(h, b))["waiting"]] == [
            ("s.test", "turn", a), ("t.test", "robots", None)]
        await report(h, a, 0, [captured("https://s.test/1", "2026-09-19T14:53:39.000Z")])
        freed = {w["host"]: w for w in (await view(h, b))["waiting"]}
        assert freed["s.test"]["kind"] == "turn" and "crawlId" not in freed["s.test"]
        assert "waiting for this crawl's next level" in freed["s.test"]["reason"]


WALLY = LedgerHarness.who("wally", "umbrella")  # an organization of this test alone (the FGA store is shared)


async def start_as(h, who, seeds, delay_ms):
    r = await h.client.post("/api/crawls", json={"seeds": seeds, "scripts": [], "perHostDelayMs": delay_ms,
                                                 "maxDepth": 1}, headers=who)
    assert r.status_code == 202, r.text
    return r.json()["crawlId"]


async def test_another_organizations_crawl_is_never_named(settings, ledger_fga):
    """A crawl of an organization the caller is not in is "another crawl": no id, no level, no
    link, in the turn and in the delay it sets; a caller in both organizations sees it named."""
    ledger_fga.write(writes=["user:wally submitter organization:umbrella"])
    async with open_ledger(settings) as h:
        theirs = await start_as(h, WALLY, ["https://s.test/1"], 3000)
        mine = await start(h, ["https://s.test/2", "https://s.test/3"], 500)
        turn = (await view(h, mine))["waiting"]
        assert [(w["host"], w["kind"], "crawlId" in w) for w in turn] == [("s.test", "turn", False)]
        assert "waiting for another crawl's turn" in turn[0]["reason"] and theirs[:8] not in str(turn)
        r = await h.client.post(f"/api/crawls/{theirs}/pages", headers=WALLY, json={
            "depth": 0, "results": [captured("https://s.test/1", "2999-01-01T00:00:00.000Z")], "compiled": NO_SCRIPTS})
        assert r.status_code == 200, r.text
        # wally's crawl captured the host last (3000 ms): the gap is hers, unnamed
        await event(h, mine, "https://s.test/2", "started")
        await event(h, mine, "https://s.test/2", "done", "captured")
        gap = (await view(h, mine))["waiting"]
        assert [(w["kind"], w["delayMs"], "crawlId" in w) for w in gap] == [("delay", 3000, False)]
        assert "the delay 3000 ms of another crawl, which captured the host last" in gap[0]["reason"]
        assert theirs[:8] not in str(gap)
        both = (await h.client.get(f"/api/crawls/{mine}", headers=LedgerHarness.who("alice", "acme,umbrella"))).json()
        assert [(w["crawlId"], w["reason"].split(" until ")[0]) for w in both["waiting"]] == [
            (theirs, f"s.test: waiting the delay 3000 ms of crawl {theirs[:8]}, which captured the host last")]


async def test_a_slower_crawl_is_named_on_the_faster_crawls_page_not_as_its_own_delay(settings):
    """The 500 ms crawl's page never says "this crawl's delay 3000 ms": the 3000 ms is named as the
    other crawl's, and the 3000 ms crawl's own page says it is its own."""
    async with open_ledger(settings) as h:
        fast = await start(h, ["https://s.test/1", "https://s.test/2"], 500)
        slow = await start(h, ["https://s.test/x", "https://s.test/y"], 3000)
        await event(h, fast, "https://s.test/1", "started")
        await event(h, fast, "https://s.test/1", "done", "captured")
        (w,) = (await view(h, fast))["waiting"]
        assert "this crawl's delay" not in w["reason"] and w["crawlId"] == slow
        await report(h, fast, 0, [captured("https://s.test/1", "2999-01-01T00:00:00.000Z"),
                                  captured("https://s.test/2", "2999-01-01T00:00:01.000Z")])
        await event(h, slow, "https://s.test/x", "started")
        await event(h, slow, "https://s.test/x", "done", "captured")
        (w,) = (await view(h, slow))["waiting"]
        assert "this crawl's delay 3000 ms" in w["reason"] and "crawlId" not in w
