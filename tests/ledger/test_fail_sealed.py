"""Nothing lost when a crawl is failed (issue 24 item 5): a capture that had *sealed* when the
crawl was failed — its flow job is then cancelled, so its answer and ``done`` event reach nobody —
still finishes on the capture server (packaging, upload, manifest). Its ``sealed`` progress event
named its task and manifest location; the close keeps them, admits the archive when the manifest
lands (during the close's background wait, or later by the reconciler) and the page says
``captured``. Real Postgres, OpenFGA stand-in, the S3 stand-in."""

from __future__ import annotations

import uuid

import anyio
import pytest

from ledger.archive.reconciler import reconcile
from ledger.crawl import salvage
from ledger.crawl.crawls import CLOSED_BEFORE_CAPTURE
from tests.archive.helpers import manifest, put_json, put_wacz
from tests.ledger.test_level_reports import WHO, open_ledger, rows, settings, start, store_of  # noqa: F401

pytestmark = pytest.mark.anyio
SEEDS = ["https://a.test/1", "https://a.test/2", "https://a.test/3"]


def sealed_capture(s3_server, crawl_id: str) -> tuple[dict, str]:
    """What a seal answer names (task, manifest-to-be) and the manifest key; nothing written yet."""
    task = str(uuid.uuid4())
    key = f"{task}_{crawl_id}.result.json"
    return {"taskId": task, "manifestLocation": f"s3://{s3_server.bucket}/{key}"}, key


def land(s3_server, capture: dict, key: str, url: str, *, status: str = "success") -> None:
    """The capture finishes after the close: its WACZ, then its manifest (§A.6 order)."""
    doc = manifest(capture["taskId"], url=url, bucket=s3_server.bucket, status=status)
    if status == "success":
        put_wacz(s3_server, doc["artifacts"]["wacz"])
    put_json(s3_server, key, doc)


async def event(h, crawl_id, **body):
    r = await h.client.post(f"/api/crawls/{crawl_id}/progress", json=body, headers=WHO)
    assert r.status_code == 200, r.text
    return r


async def fail(h, crawl_id):
    r = await h.client.post(f"/api/crawls/{crawl_id}/failed", json={"reason": "enough"}, headers=WHO)
    assert r.json() == {"closed": True}


def pages(settings):
    return rows(settings.database_url, "SELECT url, state, skip_reason FROM crawl_pages ORDER BY id")


@pytest.mark.parametrize("lands_after_s", [0.0, 1.5])  # done packaging before the close / uploading after it
async def test_a_sealed_capture_that_lands_after_the_fail_is_admitted_and_captured(settings, s3_server, lands_after_s):
    async with open_ledger(settings, s3=store_of(s3_server)) as h:
        crawl_id = await start(h, seeds=SEEDS, maxDepth=1)
        capture, key = sealed_capture(s3_server, crawl_id)
        await event(h, crawl_id, url=SEEDS[0], phase="started")
        await event(h, crawl_id, url=SEEDS[0], phase="sealed", **capture)
        await event(h, crawl_id, url=SEEDS[1], phase="started")  # not sealed: nothing to wait for
        async with anyio.create_task_group() as tg:
            async def later():
                await anyio.sleep(lands_after_s)
                land(s3_server, capture, key, SEEDS[0])
            tg.start_soon(later)
            await fail(h, crawl_id)  # the close's background wait runs within this request here
        view = (await h.client.get(f"/api/crawls/{crawl_id}", headers=WHO)).json()
        listed = (await h.client.get(f"/api/crawls/{crawl_id}/pages", headers=WHO)).json()["pages"]
    assert pages(settings) == [(SEEDS[0], "captured", None), (SEEDS[1], "skipped", CLOSED_BEFORE_CAPTURE),
                               (SEEDS[2], "skipped", CLOSED_BEFORE_CAPTURE)]
    assert view["pagesCaptured"] == 1
    assert [str(t) for (t,) in rows(settings.database_url, "SELECT task_id FROM archives")] == [capture["taskId"]]
    assert listed[0]["state"] == "captured" and listed[0]["archiveId"] is not None


async def test_a_sealed_event_that_arrives_after_the_fail_is_kept_too(settings, s3_server, monkeypatch):
    monkeypatch.setattr(salvage, "SEALED_WAIT_S", 2.0)
    async with open_ledger(settings, s3=store_of(s3_server)) as h:
        crawl_id = await start(h, seeds=SEEDS[:2], maxDepth=1)
        capture, key = sealed_capture(s3_server, crawl_id)
        await event(h, crawl_id, url=SEEDS[0], phase="started")
        await fail(h, crawl_id)
        land(s3_server, capture, key, SEEDS[0])
        await event(h, crawl_id, url=SEEDS[0], phase="sealed", **capture)  # from the flow's queue, late
        r = await h.client.post(f"/api/crawls/{crawl_id}/progress", headers=WHO,
                                json={"url": SEEDS[0], "phase": "sealed", **capture})
        assert r.status_code == 409  # again: already recorded, nothing changes
    assert pages(settings) == [(SEEDS[0], "captured", None), (SEEDS[1], "skipped", CLOSED_BEFORE_CAPTURE)]


async def test_an_archive_landing_after_the_wait_is_admitted_by_the_reconciler(settings, s3_server, monkeypatch):
    monkeypatch.setattr(salvage, "SEALED_WAIT_S", 0.5)
    async with open_ledger(settings, s3=store_of(s3_server)) as h:
        crawl_id = await start(h, seeds=SEEDS[:1], maxDepth=1)
        capture, key = sealed_capture(s3_server, crawl_id)
        await event(h, crawl_id, url=SEEDS[0], phase="started")
        await event(h, crawl_id, url=SEEDS[0], phase="sealed", **capture)
        await fail(h, crawl_id)
        assert pages(settings)[0][1] == "skipped"  # nothing landed within the wait
        land(s3_server, capture, key, SEEDS[0])
        got = await reconcile(h.services.pool, store_of(s3_server))
        view = (await h.client.get(f"/api/crawls/{crawl_id}", headers=WHO)).json()
    assert got.registered == 1
    assert pages(settings) == [(SEEDS[0], "captured", None)] and view["pagesCaptured"] == 1


async def test_a_sealed_capture_that_then_failed_stays_skipped(settings, s3_server):
    async with open_ledger(settings, s3=store_of(s3_server)) as h:
        crawl_id = await start(h, seeds=SEEDS[:1], maxDepth=1)
        capture, key = sealed_capture(s3_server, crawl_id)
        await event(h, crawl_id, url=SEEDS[0], phase="started")
        await event(h, crawl_id, url=SEEDS[0], phase="sealed", **capture)
        land(s3_server, capture, key, SEEDS[0], status="failed")  # its packaging failed: no WACZ
        with anyio.fail_after(20):  # the wait ends when the manifest is read, not after SEALED_WAIT_S
            await fail(h, crawl_id)
    assert pages(settings) == [(SEEDS[0], "skipped", CLOSED_BEFORE_CAPTURE)]
    assert rows(settings.database_url, "SELECT count(*) FROM archives") == [(0,)]


@pytest.mark.parametrize("body, needle", [
    ({"phase": "sealed"}, "taskId"),
    ({"phase": "sealed", "status": "captured", "taskId": str(uuid.uuid4())}, "status"),
    ({"phase": "sealed", "taskId": str(uuid.uuid4()), "manifestSummary": {"status": "success"}}, "taskId"),
])
async def test_a_sealed_event_is_checked(settings, s3_server, body, needle):
    async with open_ledger(settings, s3=store_of(s3_server)) as h:
        crawl_id = await start(h, seeds=SEEDS[:1])
        r = await h.client.post(f"/api/crawls/{crawl_id}/progress", json={"url": SEEDS[0], **body}, headers=WHO)
        assert r.status_code == 400 and needle in r.json()["error"], r.text
