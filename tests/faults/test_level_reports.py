"""Faults: duplicate and late level reports (ARCHITECTURE.md decision 4).

A flow that retries after a lost answer sends the same report again — possibly while the first
is still being processed. The ledger must apply it once (counters, pages, archives, next
level dispatched once) and refuse late reports for a finished crawl without changing it.
Real Postgres, the OpenFGA and S3 stand-ins, the fake Windmill webhook.
"""

from __future__ import annotations

import asyncio
import json
import uuid

import psycopg
import pytest

from ledger.s3 import S3Store
from tests.archive.helpers import manifest, put_json, put_wacz, wacz_bytes
from tests.fixtures.ledger import ledger_settings, open_ledger

pytestmark = pytest.mark.fault

WHO = {"X-Waggle-Subject": "alice", "X-Waggle-Organizations": "acme"}
NO_SCRIPTS = {"typescript": "6.0.3", "hostTypes": "v0.2.0", "scripts": []}


def test_concurrent_duplicates_apply_once_and_late_reports_change_nothing(
        migrated_db_url, ledger_fga, fake_webhook, s3_server):
    settings = ledger_settings(migrated_db_url, ledger_fga, fake_webhook.url, s3_endpoint=s3_server.endpoint,
                               s3_bucket=s3_server.bucket, s3_access_key_id=s3_server.access_key_id,
                               s3_secret_access_key=s3_server.secret_access_key)
    store = S3Store(s3_server.endpoint, s3_server.bucket, s3_server.region, s3_server.access_key_id,
                    s3_server.secret_access_key)
    seeds = [f"https://dup.test/{i}" for i in range(3)]
    tasks = [str(uuid.uuid4()) for _ in seeds]
    for task, url in zip(tasks, seeds):
        m = manifest(task, url=url, bucket=s3_server.bucket)
        put_json(s3_server, f"{task}_dup.result.json", m)
        put_wacz(s3_server, m["artifacts"]["wacz"], wacz_bytes(url))
    links_key = f"{uuid.uuid4()}_dup.links.json"
    s3_server.client().put_object(Bucket=s3_server.bucket, Key=links_key, Body=json.dumps(
        {"taskId": tasks[0], "url": seeds[0], "links": [{"href": "https://dup.test/next"}]}).encode())

    async def scenario():
        async with open_ledger(settings, s3=store) as h:
            r = await h.client.post("/api/crawls", json={"seeds": seeds, "maxDepth": 1, "scripts": []}, headers=WHO)
            assert r.status_code == 202, r.text
            crawl_id = r.json()["crawlId"]
            results = [{"url": url, "status": "captured", "taskId": task,
                        "manifestLocation": f"s3://{s3_server.bucket}/{task}_dup.result.json",
                        **({"linksLocation": f"s3://{s3_server.bucket}/{links_key}"} if i == 0 else {})}
                       for i, (task, url) in enumerate(zip(tasks, seeds))]
            report = {"depth": 0, "compiled": NO_SCRIPTS, "results": results}
            answers = await asyncio.gather(*(
                h.client.post(f"/api/crawls/{crawl_id}/pages", json=report, headers=WHO) for _ in range(4)))
            after_dupes = (await h.client.get(f"/api/crawls/{crawl_id}", headers=WHO)).json()

            # a different report for the same depth, and one for a depth never dispatched
            other = {**report, "results": results[:1]}
            conflicting = await h.client.post(f"/api/crawls/{crawl_id}/pages", json=other, headers=WHO)
            skipping = await h.client.post(f"/api/crawls/{crawl_id}/pages",
                                           json={**report, "depth": 5}, headers=WHO)
            # level 1 reported, the crawl finishes; then a late copy of each report arrives
            last = {"depth": 1, "compiled": NO_SCRIPTS,
                    "results": [{"url": "https://dup.test/next", "status": "captured"}]}
            finished = await h.client.post(f"/api/crawls/{crawl_id}/pages", json=last, headers=WHO)
            final = (await h.client.get(f"/api/crawls/{crawl_id}", headers=WHO)).json()
            late = await h.client.post(f"/api/crawls/{crawl_id}/pages", json=other, headers=WHO)
            replay = await h.client.post(f"/api/crawls/{crawl_id}/pages", json=last, headers=WHO)
            closed_late = await h.client.post(f"/api/crawls/{crawl_id}/failed", json={"reason": "late"}, headers=WHO)
            unchanged = (await h.client.get(f"/api/crawls/{crawl_id}", headers=WHO)).json()
            return (crawl_id, answers, after_dupes, conflicting, skipping, finished, final, late, replay,
                    closed_late, unchanged)

    (crawl_id, answers, after_dupes, conflicting, skipping, finished, final, late, replay, closed_late,
     unchanged) = asyncio.run(scenario())

    # concurrent duplicates: every copy gets an answer, all the same; applied once
    statuses = sorted(a.status_code for a in answers)
    assert all(s in (200, 409) for s in statuses) and statuses.count(200) >= 1, [a.text for a in answers]
    bodies = [a.json() for a in answers if a.status_code == 200]
    assert all(b == bodies[0] for b in bodies)
    assert bodies[0]["next"] == [{"url": "https://dup.test/next", "host": "dup.test", "depth": 1}]
    assert after_dupes["pagesCaptured"] == 3 and after_dupes["pagesDiscovered"] == 1
    assert after_dupes["state"] == "running" and after_dupes["currentDepth"] == 1
    assert [b["depth"] for b in fake_webhook.bodies(crawl_id)] == [0, 1]  # level 1 dispatched once
    with psycopg.connect(migrated_db_url) as conn:
        assert conn.execute("SELECT count(*) FROM archives").fetchone()[0] == 3
        assert conn.execute("SELECT count(*) FROM fga_outbox").fetchone()[0] == 3
        assert conn.execute("SELECT count(*) FROM crawl_pages WHERE crawl_id = %s",
                            (uuid.UUID(crawl_id),)).fetchone()[0] == 4

    assert conflicting.status_code == 409 and skipping.status_code == 409
    assert finished.status_code == 200 and final["state"] == "succeeded" and final["pagesCaptured"] == 4
    assert late.status_code == 409  # a different late report is refused
    assert replay.status_code == 200 and replay.json() == finished.json()  # an identical re-send: same answer
    assert closed_late.status_code == 200 and closed_late.json().get("closed") is False
    for key in ("state", "stopReason", "pagesCaptured", "pagesDiscovered", "finishedAt", "error"):
        assert unchanged[key] == final[key], key
