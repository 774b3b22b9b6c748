"""``GET /api/crawls/{id}/politeness`` (ledger.crawl.hosts.current): a level claimed before
another crawl started on its host was sent the shorter delay; read again before the level's
first request it answers the longer one. Bad input → 400 with the reason; unknown crawl 404;
a crawl no longer running 409. Real Postgres, the real OpenFGA server, the fake webhook."""

from __future__ import annotations

import pytest

from tests.ledger.test_host_leases import WHO, frontier, open_ledger, settings, start  # noqa: F401

pytestmark = pytest.mark.anyio


async def test_a_crawl_started_after_the_claim_counts_when_read_again(settings, fake_webhook):
    async with open_ledger(settings) as h:
        a = await start(h, ["https://s.test/1"], 500)
        assert [f.get("hostDelayMs") for f in frontier(fake_webhook, a)] == [500]  # claimed alone
        await start(h, ["https://s.test/x", "https://t.test/"], 3000)
        r = await h.client.get(f"/api/crawls/{a}/politeness", params=[("host", "s.test"), ("host", "u.test")],
                               headers=WHO)
        assert r.status_code == 200, r.text
        assert r.json() == {"hosts": {"s.test": {"hostDelayMs": 3000, "lastFinishedAt": None},
                                      "u.test": {"hostDelayMs": 500, "lastFinishedAt": None}}}
        bad = [await h.client.get(f"/api/crawls/{a}/politeness", params=p, headers=WHO) for p in (
            [], [("host", "https://s.test/")], [("host", "a b")], [("host", f"h{i}.test") for i in range(1001)])]
        missing = await h.client.get("/api/crawls/00000000-0000-4000-8000-000000000000/politeness?host=s.test",
                                     headers=WHO)
        await h.client.post(f"/api/crawls/{a}/failed", json={"reason": "done"}, headers=WHO)
        closed = await h.client.get(f"/api/crawls/{a}/politeness?host=s.test", headers=WHO)
    assert [b.status_code for b in bad] == [400] * 4 and "host query parameters" in bad[0].json()["error"]
    assert "not a host name" in bad[1].json()["error"]
    assert missing.status_code == 404 and closed.status_code == 409 and "not running" in closed.json()["error"]


async def test_a_crawl_registered_mid_level_counts_at_the_next_read_and_stops_counting_once_it_ended(settings, fake_webhook):
    """Each capture's admission (decision 301) reads this route: a crawl that registers on the host
    while the level runs raises the answer from the next read on; once it has ended its delay no
    longer applies (the host does not stay slow), while the crawl's own delay always does."""
    async with open_ledger(settings) as h:
        a = await start(h, ["https://m.test/1", "https://m.test/2"], 700)

        async def read() -> int:
            r = await h.client.get(f"/api/crawls/{a}/politeness", params={"host": "m.test"}, headers=WHO)
            assert r.status_code == 200, r.text
            return r.json()["hosts"]["m.test"]["hostDelayMs"]

        alone = await read()
        b = await start(h, ["https://m.test/x"], 4000)  # waits for the host: a's level holds it
        shared = await read()
        ended = await h.client.post(f"/api/crawls/{b}/failed", json={"reason": "stopped by its owner"}, headers=WHO)
        after = await read()
    assert ended.status_code < 300, ended.text
    assert (alone, shared, after) == (700, 4000, 700)
