"""Faults: S3 unavailable during admission, OpenFGA down for a while — nothing is lost.

Real parts: the ledger (in-process ASGI app with real Services), Postgres, its own S3
stand-in and real OpenFGA server processes (stopped and restarted on the same port and data),
and the ledger's own background loops (``reconciler.run_periodically``,
``outbox.run_periodically``, ``watchdog.run_periodically``) with short intervals.
"""

from __future__ import annotations

import asyncio
import socket
import time
import uuid

import httpx
import psycopg
import pytest

from devstack import s3 as s3_standin
from ledger.archive import reconciler
from ledger.authz import outbox
from ledger.authz.fga import Authz
from ledger.crawl import watchdog
from ledger.db.pool import open_pool
from ledger.s3 import S3Store
from ledger.services import Services
from tests.archive.helpers import manifest, put_json, put_wacz, wacz_bytes
from tests.fixtures.fga import FgaProcess, create_store
from tests.fixtures.ledger import ledger_settings

pytestmark = pytest.mark.fault

WHO = {"X-Waggle-Subject": "alice", "X-Waggle-Organizations": "acme"}
NO_SCRIPTS = {"typescript": "6.0.3", "hostTypes": "v0.2.0", "scripts": []}
PAGES = 5


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def _until(predicate, timeout_s: float, what: str, step_s: float = 0.1):
    deadline = time.monotonic() + timeout_s
    while True:
        value = await predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout_s} s: {what}")
        await asyncio.sleep(step_s)


def _count(db_url: str, sql: str, *args) -> int:
    with psycopg.connect(db_url) as conn:
        return conn.execute(sql, args).fetchone()[0]


def test_s3_and_openfga_out_during_a_level_then_back(migrated_db_url, fake_webhook, tmp_path, create_database):
    from ledger.api.app import create_app

    s3_port, fga_port = _free_port(), _free_port()
    s3_proc = s3_standin.start(tmp_path / "s3", port=s3_port)
    fga = FgaProcess(create_database(), port=fga_port).start()
    store = create_store(fga.api_url)
    settings = ledger_settings(
        migrated_db_url, store, fake_webhook.url,
        s3_endpoint=s3_proc.endpoint, s3_bucket=s3_proc.bucket, s3_access_key_id=s3_proc.access_key_id,
        s3_secret_access_key=s3_proc.secret_access_key,
        drain_interval_s=0.2, reconcile_interval_s=0.3, watchdog_interval_s=0.3, reconcile_since_days=1,
    )
    # alice may submit for acme (the model's submitter relation)
    store.write(writes=["user:alice submitter organization:acme"])
    seeds = [f"https://pages.test/{i}" for i in range(PAGES)]
    tasks = [str(uuid.uuid4()) for _ in seeds]
    for task, url in zip(tasks, seeds):
        m = manifest(task, url=url, bucket=s3_proc.bucket)
        put_json(s3_proc, f"{task}_crawl-1.result.json", m)
        put_wacz(s3_proc, m["artifacts"]["wacz"], wacz_bytes(url))

    async def scenario():
        nonlocal s3_proc
        pool = await open_pool(migrated_db_url, max_size=6)
        s3 = S3Store(s3_proc.endpoint, s3_proc.bucket, s3_proc.region, s3_proc.access_key_id,
                     s3_proc.secret_access_key, connect_timeout_s=1, read_timeout_s=3)
        services = Services(settings=settings, pool=pool, authz=Authz(fga.api_url, store.store_id, store.model_id),
                            s3=s3, http=httpx.AsyncClient())
        app = create_app(settings, services, periodic=False)
        client = httpx.AsyncClient(transport=httpx.ASGITransport(app=app, raise_app_exceptions=False),
                                   base_url="http://ledger.test")
        loops = [asyncio.create_task(m.run_periodically(services)) for m in (reconciler, outbox, watchdog)]
        try:
            r = await client.post("/api/crawls", json={"seeds": seeds, "maxDepth": 0, "scripts": []}, headers=WHO)
            assert r.status_code == 202, r.text
            crawl_id = r.json()["crawlId"]

            # S3 goes away while the level runs: admission cannot read a single manifest
            s3_proc.stop()
            results = [{"url": url, "status": "captured", "taskId": task,
                        "manifestLocation": f"s3://{s3_proc.bucket}/{task}_crawl-1.result.json"}
                       for task, url in zip(tasks, seeds)]
            report = {"depth": 0, "compiled": NO_SCRIPTS, "results": results}
            r = await client.post(f"/api/crawls/{crawl_id}/pages", json=report, headers=WHO)
            if r.status_code == 503:  # the flow retries the report while the store is away
                s3_proc = s3_standin.start(tmp_path / "s3", port=s3_port)
                r = await client.post(f"/api/crawls/{crawl_id}/pages", json=report, headers=WHO)
            assert r.status_code == 200, r.text
            view = (await client.get(f"/api/crawls/{crawl_id}", headers=WHO)).json()
            assert view["state"] == "succeeded" and view["pagesCaptured"] == PAGES
            assert _count(migrated_db_url, "SELECT count(*) FROM capture_submissions") == PAGES

            # OpenFGA goes away too; then S3 comes back: the reconciler admits every archive
            # while their tuples wait in the outbox
            fga.stop()
            if s3_proc.proc.poll() is not None:
                s3_proc = s3_standin.start(tmp_path / "s3", port=s3_port)

            async def all_archived():
                return _count(migrated_db_url, "SELECT count(*) FROM archives") == PAGES

            await _until(all_archived, 30, "every archive recovered by the reconciler")
            assert _count(migrated_db_url, "SELECT count(*) FROM fga_outbox WHERE processed_at IS NULL") == PAGES
            health = await client.get("/api/health")
            assert health.status_code == 503 and health.json()["openfga"]["ok"] is False
            assert health.json()["outbox"]["pending"] == PAGES
            await asyncio.sleep(0.6)  # a few drain periods while OpenFGA is away
            errors = _count(migrated_db_url, "SELECT count(*) FROM fga_outbox WHERE last_error IS NOT NULL")
            assert errors >= 1

            # OpenFGA back on the same port and data: the outbox delivers everything
            await asyncio.to_thread(fga.start)

            async def delivered():
                return _count(migrated_db_url, "SELECT count(*) FROM fga_outbox WHERE processed_at IS NULL") == 0

            await _until(delivered, 30, "outbox delivered after OpenFGA came back")
            health = await client.get("/api/health")
            assert health.status_code == 200, health.json()
            assert health.json()["outbox"] == {"pending": 0, "oldestPendingAgeS": None}
            assert health.json()["runningCrawl"] is None
            return crawl_id
        finally:
            for loop in loops:
                loop.cancel()
            await asyncio.gather(*loops, return_exceptions=True)
            await client.aclose()
            await services.close()

    try:
        asyncio.run(scenario())
        with psycopg.connect(migrated_db_url) as conn:
            archive_ids = [str(r[0]) for r in conn.execute("SELECT id FROM archives")]
            assert sorted(str(r[0]) for r in conn.execute("SELECT task_id FROM archives")) == sorted(tasks)
            assert conn.execute("SELECT count(*) FROM crawls WHERE state = 'running'").fetchone()[0] == 0
        objects = {t["object"] for t in store.read()}
        assert {f"archive:{a}" for a in archive_ids} <= objects  # every archive's tuples arrived
    finally:
        s3_proc.stop()
        fga.stop()


def test_openfga_down_at_report_time_is_a_retryable_503(migrated_db_url, fake_webhook, create_database):
    """The flow retries 5xx; the answer must say the authorization service is away (not a bare 500)."""
    from tests.fixtures.ledger import open_ledger

    fga = FgaProcess(create_database(), port=_free_port()).start()
    store = create_store(fga.api_url)
    store.write(writes=["user:alice submitter organization:acme"])
    settings = ledger_settings(migrated_db_url, store, fake_webhook.url)

    async def scenario():
        async with open_ledger(settings) as h:
            r = await h.client.post("/api/crawls", json={"seeds": ["https://a.test/"], "maxDepth": 0, "scripts": []},
                                    headers=WHO)
            assert r.status_code == 202, r.text
            crawl_id = r.json()["crawlId"]
            fga.stop()
            report = {"depth": 0, "compiled": NO_SCRIPTS, "results": [{"url": "https://a.test/", "status": "captured"}]}
            down = await h.client.post(f"/api/crawls/{crawl_id}/pages", json=report, headers=WHO)
            await asyncio.to_thread(fga.start)
            again = await h.client.post(f"/api/crawls/{crawl_id}/pages", json=report, headers=WHO)
            return down, again

    try:
        down, again = asyncio.run(scenario())
    finally:
        fga.stop()
    assert again.status_code == 200, again.text  # nothing was lost while OpenFGA was away
    assert down.status_code == 503, down.text
    assert "error" in down.json()
