"""A crawl failed mid-level (ledger.crawl.salvage): pages whose capture a progress event reported
— with its task, manifest and summary — are recorded captured and their archives admitted after
the answer (the same manifest and WACZ checks as a level report's); the other pending pages are
skipped as before. Real Postgres, real OpenFGA server, the S3 stand-in."""

from __future__ import annotations

import uuid

import pytest

from ledger.crawl.crawls import CLOSED_BEFORE_CAPTURE
from tests.archive.helpers import manifest, put_json, put_wacz
from tests.ledger.test_level_reports import WHO, open_ledger, rows, settings, start, store_of  # noqa: F401

pytestmark = pytest.mark.anyio
SEEDS = ["https://a.test/1", "https://a.test/2", "https://a.test/3", "https://a.test/4"]


def capture_in_s3(s3_server, crawl_id: str, url: str, *, summary_status: str = "success") -> dict:
    """A capture's manifest and WACZ in the S3 stand-in → the done event's capture fields."""
    task = str(uuid.uuid4())
    key = f"{task}_{crawl_id}.result.json"
    doc = manifest(task, url=url, bucket=s3_server.bucket)
    put_json(s3_server, key, doc)
    put_wacz(s3_server, doc["artifacts"]["wacz"])
    return {"taskId": task, "manifestLocation": f"s3://{s3_server.bucket}/{key}",
            "manifestSummary": {"status": summary_status, "wacz": doc["artifacts"]["wacz"]}}


async def event(h, crawl_id, **body):
    r = await h.client.post(f"/api/crawls/{crawl_id}/progress", json=body, headers=WHO)
    assert r.status_code == 200, r.text


async def test_failing_mid_level_records_the_reported_captures_and_admits_their_archives(settings, s3_server):
    async with open_ledger(settings, s3=store_of(s3_server)) as h:
        crawl_id = await start(h, seeds=SEEDS, maxDepth=1)
        good = capture_in_s3(s3_server, crawl_id, SEEDS[0])
        changed = capture_in_s3(s3_server, crawl_id, SEEDS[1], summary_status="failed")  # disagrees: not admitted
        for url in SEEDS[:3]:
            await event(h, crawl_id, url=url, phase="started")
        await event(h, crawl_id, url=SEEDS[0], phase="done", status="captured", **good)
        await event(h, crawl_id, url=SEEDS[1], phase="done", status="captured", **changed)
        await event(h, crawl_id, url=SEEDS[2], phase="done", status="failed")
        r = await h.client.post(f"/api/crawls/{crawl_id}/failed", json={"reason": "[crawl_host] bh down"},
                                headers=WHO)
        assert r.json() == {"closed": True}
        view = (await h.client.get(f"/api/crawls/{crawl_id}", headers=WHO)).json()
    assert (view["state"], view["pagesCaptured"]) == ("failed", 2)
    assert rows(settings.database_url, "SELECT url, state, skip_reason, task_id FROM crawl_pages ORDER BY id") == [
        (SEEDS[0], "captured", None, good["taskId"]), (SEEDS[1], "captured", None, changed["taskId"]),
        (SEEDS[2], "skipped", CLOSED_BEFORE_CAPTURE, None), (SEEDS[3], "skipped", CLOSED_BEFORE_CAPTURE, None)]
    # admitted after the answer, by the level report's checks: the disagreeing manifest is refused
    assert [str(t) for (t,) in rows(settings.database_url, "SELECT task_id FROM archives")] == [good["taskId"]]
    submissions = dict(rows(settings.database_url, "SELECT task_id::text, verify_error FROM capture_submissions"))
    assert submissions[good["taskId"]] is None and "status" in submissions[changed["taskId"]]
    assert rows(settings.database_url, "SELECT correlation_id FROM capture_submissions")[0][0] == crawl_id


@pytest.mark.parametrize("body, needle", [
    ({"phase": "done", "status": "failed", "taskId": str(uuid.uuid4())}, "taskId goes with status 'captured'"),
    ({"phase": "done", "status": "captured", "manifestLocation": "s3://b/k"}, "need a taskId"),
    ({"phase": "done", "status": "captured", "taskId": "job-1"}, "UUID"),
    ({"phase": "done", "status": "captured", "taskId": str(uuid.uuid4()), "manifestLocation": "s3://b/" + "k" * 2048},
     "manifestLocation"),
])
async def test_capture_fields_of_a_progress_event_are_checked(settings, s3_server, body, needle):
    async with open_ledger(settings, s3=store_of(s3_server)) as h:
        crawl_id = await start(h, seeds=SEEDS[:1])
        r = await h.client.post(f"/api/crawls/{crawl_id}/progress", json={"url": SEEDS[0], **body}, headers=WHO)
        assert r.status_code == 400 and needle in r.json()["error"], r.text


async def test_a_salvaged_page_shows_its_capture_time(settings, s3_server):
    """A page recorded from its events has a capture time (its ``done`` − its ``started``, as the
    ledger received them), not "–"; a page whose ``started`` never came stays unknown."""
    async with open_ledger(settings, s3=store_of(s3_server)) as h:
        crawl_id = await start(h, seeds=SEEDS[:2], maxDepth=1)
        timed, untimed = capture_in_s3(s3_server, crawl_id, SEEDS[0]), capture_in_s3(s3_server, crawl_id, SEEDS[1])
        await event(h, crawl_id, url=SEEDS[0], phase="started")
        await event(h, crawl_id, url=SEEDS[0], phase="done", status="captured", **timed)
        await event(h, crawl_id, url=SEEDS[1], phase="done", status="captured", **untimed)  # no "started" heard
        r = await h.client.post(f"/api/crawls/{crawl_id}/failed", json={"reason": "bh down"}, headers=WHO)
        assert r.json() == {"closed": True}
        pages = {p["url"]: p for p in (await h.client.get(f"/api/crawls/{crawl_id}/pages", headers=WHO)).json()["pages"]}
    ((started, done),) = rows(settings.database_url, "SELECT g.started_at, g.at FROM crawl_progress g"
                                                     " JOIN crawl_pages p ON p.id = g.page_id WHERE p.url = %s", SEEDS[0])
    assert pages[SEEDS[0]]["state"] == "captured"
    assert pages[SEEDS[0]]["captureMs"] == round((done - started).total_seconds() * 1000) and done > started
    assert (pages[SEEDS[1]]["state"], pages[SEEDS[1]]["captureMs"]) == ("captured", None)
