"""Captures that outlive their crawl's close (ledger.crawl.salvage): a captured page's ``done``
that arrives after the crawl was failed records the page like one that came before (page
captured, archive admitted after its manifest is checked, its OpenFGA tuples in the outbox); and
the lease-expiry and dispatch-failure closes keep reported captures like the person's and the
watchdog's. Real Postgres, the real OpenFGA server, the S3 stand-in, the fake webhook over HTTP."""

from __future__ import annotations

import psycopg
import pytest

from ledger.crawl.crawls import CLOSED_BEFORE_CAPTURE
from ledger.crawl.dispatch import dispatch_waiting
from ledger.crawl.leases import expire_leases
from tests.ledger.test_fail_mid_level import SEEDS, capture_in_s3, event
from tests.ledger.test_level_reports import WHO, open_ledger, rows, settings, start, store_of  # noqa: F401

pytestmark = pytest.mark.anyio


def sql(db_url, statement, *args):
    with psycopg.connect(db_url, autocommit=True) as conn:
        conn.execute(statement, args)


async def fail(h, crawl_id):
    r = await h.client.post(f"/api/crawls/{crawl_id}/failed", json={"reason": "stopped by alice"}, headers=WHO)
    assert r.json() == {"closed": True}


def admitted(db_url, crawl_id):
    """``{task: outbox rows naming the archive}`` of the admitted archives of the crawl's pages."""
    found = rows(db_url, "SELECT a.task_id::text, (SELECT count(*) FROM fga_outbox o"
                         " WHERE o.payload::text LIKE '%%' || a.id::text || '%%')"
                         " FROM archives a JOIN crawl_pages p ON p.task_id = a.task_id::text WHERE p.crawl_id = %s",
                 crawl_id)
    return dict(found)


async def test_a_done_after_the_fail_records_the_capture_as_one_before_it(settings, s3_server):
    async with open_ledger(settings, s3=store_of(s3_server)) as h:
        crawl_id = await start(h, seeds=SEEDS[:3], maxDepth=1)
        early, late = capture_in_s3(s3_server, crawl_id, SEEDS[0]), capture_in_s3(s3_server, crawl_id, SEEDS[1])
        await event(h, crawl_id, url=SEEDS[0], phase="done", status="captured", **early)
        await event(h, crawl_id, url=SEEDS[1], phase="started")
        await fail(h, crawl_id)
        assert rows(settings.database_url, "SELECT state FROM crawl_pages WHERE url = %s", SEEDS[1]) == [("skipped",)]
        await event(h, crawl_id, url=SEEDS[1], phase="done", status="captured", **late)  # after the close: 200
        # the same event again, a page never captured, a late 'started': refused, nothing changes
        again = await h.client.post(f"/api/crawls/{crawl_id}/progress", headers=WHO,
                                    json={"url": SEEDS[1], "phase": "done", "status": "captured", **late})
        other = await h.client.post(f"/api/crawls/{crawl_id}/progress", headers=WHO,
                                    json={"url": "https://a.test/nowhere", "phase": "done", "status": "captured",
                                          **capture_in_s3(s3_server, crawl_id, "https://a.test/nowhere")})
        started = await h.client.post(f"/api/crawls/{crawl_id}/progress", headers=WHO,
                                      json={"url": SEEDS[2], "phase": "started"})
        view = (await h.client.get(f"/api/crawls/{crawl_id}", headers=WHO)).json()
    assert [r.status_code for r in (again, other, started)] == [409, 409, 409]
    assert "already recorded" in again.json()["error"] and "not running" in started.json()["error"]
    assert (view["state"], view["pagesCaptured"]) == ("failed", 2)
    assert rows(settings.database_url, "SELECT url, state, skip_reason, task_id FROM crawl_pages ORDER BY id") == [
        (SEEDS[0], "captured", None, early["taskId"]), (SEEDS[1], "captured", None, late["taskId"]),
        (SEEDS[2], "skipped", CLOSED_BEFORE_CAPTURE, None)]
    tuples = admitted(settings.database_url, crawl_id)
    assert set(tuples) == {early["taskId"], late["taskId"]} and all(n >= 1 for n in tuples.values())


async def test_a_late_done_whose_manifest_disagrees_is_recorded_but_not_admitted(settings, s3_server):
    async with open_ledger(settings, s3=store_of(s3_server)) as h:
        crawl_id = await start(h, seeds=SEEDS[:1])
        changed = capture_in_s3(s3_server, crawl_id, SEEDS[0], summary_status="failed")
        await fail(h, crawl_id)
        await event(h, crawl_id, url=SEEDS[0], phase="done", status="captured", **changed)
    assert admitted(settings.database_url, crawl_id) == {}
    (error,), = rows(settings.database_url, "SELECT verify_error FROM capture_submissions WHERE task_id = %s",
                     changed["taskId"])
    assert "status" in error  # left to the reconciler with the reason, as after a level report


async def test_an_expired_lease_keeps_the_reported_captures(settings, s3_server):
    async with open_ledger(settings, s3=store_of(s3_server)) as h:
        crawl_id = await start(h, seeds=SEEDS[:2])
        done = capture_in_s3(s3_server, crawl_id, SEEDS[0])
        await event(h, crawl_id, url=SEEDS[0], phase="done", status="captured", **done)
        sql(settings.database_url, "UPDATE host_leases SET expires_at = now() - interval '1 s' WHERE crawl_id = %s",
            crawl_id)
        assert await expire_leases(h.services) == [crawl_id]
        late = capture_in_s3(s3_server, crawl_id, SEEDS[1])
        await event(h, crawl_id, url=SEEDS[1], phase="done", status="captured", **late)  # the lease close left it pending
    assert rows(settings.database_url, "SELECT state, task_id FROM crawl_pages ORDER BY id") == [
        ("captured", done["taskId"]), ("captured", late["taskId"])]
    assert set(admitted(settings.database_url, crawl_id)) == {done["taskId"], late["taskId"]}


async def test_a_failed_dispatch_keeps_the_reported_captures(settings, s3_server, fake_webhook):
    async with open_ledger(settings, s3=store_of(s3_server)) as h:
        crawl_id = await start(h, seeds=SEEDS[:2])
        done = capture_in_s3(s3_server, crawl_id, SEEDS[0])
        await event(h, crawl_id, url=SEEDS[0], phase="done", status="captured", **done)
        # the level's replica died before recording its dispatch: the lease loop re-sends it, and that fails
        sql(settings.database_url, "UPDATE crawls SET level_state = 'planned', level_since = now() - interval '1 min'"
                                   " WHERE id = %s", crawl_id)
        fake_webhook.mode = "error"
        assert await dispatch_waiting(h.services, planned_grace_s=0) == 0
        view = (await h.client.get(f"/api/crawls/{crawl_id}", headers=WHO)).json()
    assert (view["state"], view["pagesCaptured"]) == ("failed", 1) and "crawl webhook → 500" in view["error"]
    assert rows(settings.database_url, "SELECT state FROM crawl_pages ORDER BY id") == [("captured",), ("pending",)]
    assert set(admitted(settings.database_url, crawl_id)) == {done["taskId"]}


async def test_a_late_capture_has_its_capture_time_and_moves_the_hosts_gap_past_the_close(settings, s3_server):
    """The close starts the host's gap (its leases end), but a cancelled job's last capture may
    still be talking to the host: its late ``done`` moves the host's last capture to it, and the
    page gets its capture time (``started`` to the late ``done``)."""
    async with open_ledger(settings, s3=store_of(s3_server)) as h:
        crawl_id = await start(h, seeds=SEEDS[:2], maxDepth=1)
        await event(h, crawl_id, url=SEEDS[0], phase="started")
        await fail(h, crawl_id)
        (closed,) = rows(settings.database_url, "SELECT last_capture_at FROM hosts WHERE host = 'a.test'")
        await event(h, crawl_id, url=SEEDS[0], phase="done", status="captured",
                    **capture_in_s3(s3_server, crawl_id, SEEDS[0]))
        pages = {p["url"]: p for p in (await h.client.get(f"/api/crawls/{crawl_id}/pages", headers=WHO)).json()["pages"]}
    ((started, done),) = rows(settings.database_url, "SELECT started_at, at FROM crawl_progress")
    assert pages[SEEDS[0]]["captureMs"] == round((done - started).total_seconds() * 1000)
    assert rows(settings.database_url, "SELECT last_capture_at FROM hosts WHERE host = 'a.test'") == [(done,)]
    assert done > closed[0]
