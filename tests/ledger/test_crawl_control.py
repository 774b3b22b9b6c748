"""Issue 29 item 4 through the routes on real Postgres (ledger.crawl.control): stop ends a crawl
succeeded/stopped and cancels its job (fail stays failed); pause waits for the level in flight,
keeps the frontier, releases the leases and dispatches nothing; resume dispatches the level with
the hosts' last captures."""

from __future__ import annotations

import uuid

import pytest

from ledger.crawl.control import STOPPED_BEFORE_CAPTURE
from tests.fixtures.ledger import LedgerHarness, open_ledger
from tests.ledger.test_level_reports import WHO, post, report, rows, settings, start, store_of  # noqa: F401

pytestmark = pytest.mark.anyio


def captured(url, links=(), at="2026-09-19T14:53:40.123Z"):
    return {"url": url, "status": "captured", "links": [{"href": h} for h in links], "finishedAt": at}


async def view(h, crawl_id):
    return (await h.client.get(f"/api/crawls/{crawl_id}", headers=WHO)).json()


async def act(h, crawl_id, what, headers=WHO):
    return await h.client.post(f"/api/crawls/{crawl_id}/{what}", headers=headers)


async def test_stop_ends_succeeded_stopped_and_cancels_the_job(settings, s3_server, fake_webhook):
    async with open_ledger(settings, s3=store_of(s3_server)) as h:
        crawl_id = await start(h, seeds=["https://a.test/", "https://a.test/b"], maxDepth=2)
        job = fake_webhook.job_ids[-1]
        r = await act(h, crawl_id, "stop")
        assert (r.status_code, r.json()) == (200, {"state": "succeeded", "stopReason": "stopped"})
        v = await view(h, crawl_id)
        again = await act(h, crawl_id, "stop")
        late = await post(h, crawl_id, report(0, [captured("https://a.test/")]))
    assert (v["state"], v["stopReason"], v["error"]) == ("succeeded", "stopped", None)
    assert fake_webhook.cancelled == [job]
    assert rows(settings.database_url, "SELECT state, skip_reason FROM crawl_pages ORDER BY id") == [
        ("skipped", STOPPED_BEFORE_CAPTURE)] * 2
    assert rows(settings.database_url, "SELECT count(*) FROM host_leases") == [(0,)]
    assert again.status_code == 409 and "succeeded already" in again.json()["error"]
    assert late.status_code == 409  # no level report after the stop


async def test_fail_stays_failed(settings, s3_server, fake_webhook):
    async with open_ledger(settings, s3=store_of(s3_server)) as h:
        crawl_id = await start(h)
        await h.client.post(f"/api/crawls/{crawl_id}/failed", json={"reason": "broken"}, headers=WHO)
        v = await view(h, crawl_id)
        r = await act(h, crawl_id, "stop")
    assert (v["state"], v["stopReason"], v["error"]) == ("failed", "failed", "broken")
    assert r.status_code == 409


async def test_pause_waits_for_the_level_then_resume_dispatches_it(settings, s3_server, fake_webhook):
    async with open_ledger(settings, s3=store_of(s3_server)) as h:
        crawl_id = await start(h, maxDepth=2)
        assert len(fake_webhook.bodies(crawl_id)) == 1
        r = await act(h, crawl_id, "pause")
        assert r.json() == {"state": "pausing"}
        v = await view(h, crawl_id)
        assert (v["state"], v["pauseRequested"]) == ("running", True)
        r = await post(h, crawl_id, report(0, [captured("https://a.test/", ["https://a.test/next"])]))
        assert r.status_code == 200 and [n["url"] for n in r.json()["next"]] == ["https://a.test/next"]
        v = await view(h, crawl_id)
        assert (v["state"], v["currentDepth"], v["pauseRequested"], v["finishedAt"]) == ("paused", 1, False, None)
        assert v["pausedAt"] is not None
        assert len(fake_webhook.bodies(crawl_id)) == 1  # nothing dispatched while paused
        assert rows(settings.database_url, "SELECT count(*) FROM host_leases") == [(0,)]
        assert (await act(h, crawl_id, "pause")).json() == {"state": "paused"}  # idempotent
        assert (await post(h, crawl_id, report(1, []))).status_code == 409  # a paused crawl takes no report
        r = await act(h, crawl_id, "resume")
        assert r.json() == {"state": "running"}
        sent = fake_webhook.bodies(crawl_id)
        assert len(sent) == 2 and sent[1]["depth"] == 1
        # the host's gap runs from its last capture, kept across the pause
        assert sent[1]["frontier"] == [{"url": "https://a.test/next", "host": "a.test",
                                        "lastFinishedAt": "2026-09-19T14:53:40.123Z", "hostDelayMs": 2000}]
        r = await post(h, crawl_id, report(1, [captured("https://a.test/next")]))
        v = await view(h, crawl_id)
    assert (v["state"], v["stopReason"], v["pagesCaptured"]) == ("succeeded", "completed", 2)


async def test_pause_without_a_level_in_flight_is_at_once_and_stop_of_a_paused_crawl(settings, s3_server,
                                                                                       fake_webhook):
    async with open_ledger(settings, s3=store_of(s3_server)) as h:
        crawl_id = await start(h, seeds=["https://b.test/"])
        async with h.services.pool.connection() as conn:  # as if its level waited for a host leased elsewhere
            await conn.execute("UPDATE crawls SET level_state = 'waiting' WHERE id = %s", (crawl_id,))
        assert (await act(h, crawl_id, "pause")).json() == {"state": "paused"}
        assert (await act(h, crawl_id, "resume")).json() == {"state": "running"}
        assert (await act(h, crawl_id, "pause")).json() == {"state": "pausing"}  # dispatched again
        assert (await act(h, crawl_id, "resume")).json() == {"state": "running"}  # the ask withdrawn
        assert (await view(h, crawl_id))["pauseRequested"] is False
        async with h.services.pool.connection() as conn:
            await conn.execute("UPDATE crawls SET level_state = 'waiting' WHERE id = %s", (crawl_id,))
        await act(h, crawl_id, "pause")
        r = await act(h, crawl_id, "stop")
        v = await view(h, crawl_id)
        assert (r.status_code, v["state"], v["stopReason"]) == (200, "succeeded", "stopped")
        assert (await act(h, crawl_id, "resume")).status_code == 409
        assert (await act(h, crawl_id, "pause")).status_code == 409


async def test_control_of_unknown_or_foreign_crawl_is_404(settings, s3_server, fake_webhook):
    async with open_ledger(settings, s3=store_of(s3_server)) as h:
        crawl_id = await start(h)
        for what in ("stop", "pause", "resume"):
            assert (await act(h, str(uuid.uuid4()), what)).status_code == 404
            r = await act(h, crawl_id, what, headers=LedgerHarness.who("mallory", "acme"))
            assert r.status_code == 404, what
        assert (await view(h, crawl_id))["state"] == "running"
