"""``ledger.crawl.running.require_running``: the one check before the politeness route and a
progress event (both answer 409 for a crawl that is not running, each saying what it means).
Real Postgres."""

from __future__ import annotations

import psycopg
import pytest

from ledger.crawl.errors import Refused
from ledger.crawl.running import require_running
from ledger.db.pool import open_pool
from tests.ledger.test_host_leases import WHO, open_ledger, settings, start  # noqa: F401

pytestmark = pytest.mark.anyio


async def test_the_row_none_or_409_with_the_consequence_and_the_lock_held(migrated_db_url, settings):
    async with open_ledger(settings) as h:
        crawl_id = await start(h, ["https://a.test/"], 500)
    pool = await open_pool(migrated_db_url, max_size=2)
    try:
        async with pool.connection() as conn, conn.transaction():
            row = await require_running(conn, crawl_id, "unused", lock=True)
            assert str(row["id"]) == crawl_id and row["state"] == "running"
            with psycopg.connect(migrated_db_url) as other:  # the row lock is held to the transaction's end
                with pytest.raises(psycopg.errors.LockNotAvailable):
                    other.execute("SELECT 1 FROM crawls WHERE id = %s FOR UPDATE NOWAIT", (crawl_id,))
        async with pool.connection() as conn:
            assert await require_running(conn, "00000000-0000-0000-0000-000000000000", "unused") is None
            await conn.execute("UPDATE crawls SET state = 'failed', stop_reason = 'failed', finished_at = now()"
                               " WHERE id = %s", (crawl_id,))
            with pytest.raises(Refused) as refused:
                await require_running(conn, crawl_id, "nothing is sent")
        assert (refused.value.status, refused.value.error) == (409, "the crawl is failed, not running: nothing is sent")
    finally:
        await pool.close()


async def test_the_politeness_route_and_a_progress_event_refuse_a_crawl_that_ended(settings):
    async with open_ledger(settings) as h:
        crawl_id = await start(h, ["https://a.test/"], 500)
        await h.client.post(f"/api/crawls/{crawl_id}/failed", json={"reason": "done"}, headers=WHO)
        polite = await h.client.get(f"/api/crawls/{crawl_id}/politeness?host=a.test", headers=WHO)
        event = await h.client.post(f"/api/crawls/{crawl_id}/progress", json={"url": "https://a.test/",
                                                                              "phase": "started"}, headers=WHO)
    assert (polite.status_code, polite.json()["error"]) == (
        409, "the crawl is failed, not running: nothing more is sent to its hosts")
    assert (event.status_code, event.json()["error"]) == (
        409, "the crawl is failed, not running: progress is no longer recorded")
