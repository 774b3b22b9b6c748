"""Level dispatch to the (fake, real-HTTP) Windmill webhook: body, job id, and failures that
close the crawl — non-2xx, timeout, refused connection (ledger.md §7.7, §12.4)."""

from __future__ import annotations

import time
import uuid

import psycopg
import pytest

from ledger.crawl.dispatch import capture_formats, job_id_from
from ledger.settings import Settings
from tests.fixtures.ledger import LedgerHarness, ledger_settings, open_ledger, refused_url

pytestmark = pytest.mark.anyio
WHO = LedgerHarness.who()
JOB = "0193b6a1-3c1d-7a2e-9f00-1234567890ab"


@pytest.mark.parametrize("text,expected", [
    (JOB, JOB), (f'"{JOB}"\n', JOB), (f'  {JOB.upper()} ', JOB.upper()), ("job-id", None), ("", None), ('""', None),
])
def test_job_id_from_answer(text, expected):
    assert job_id_from(text) == expected


def test_capture_formats_all_six_and_links_when_following():
    s = Settings(_env_file=None, capture_formats="wacz,png")
    assert capture_formats(s, following=False) == {"png": True, "webp": False, "html": False, "links": False,
                                                   "mhtml": False, "wacz": True}
    assert capture_formats(s, following=True)["links"] is True
    assert capture_formats(Settings(_env_file=None, capture_formats="links,wacz"), following=False)["links"] is True


async def crawl_view(h, crawl_id):
    return (await h.client.get(f"/api/crawls/{crawl_id}", headers=WHO)).json()


@pytest.mark.parametrize("mode,needle", [("error", "crawl webhook → 500"), ("slow", "no answer within")])
async def test_failed_dispatch_closes_the_crawl(migrated_db_url, ledger_fga, fake_webhook, mode, needle):
    fake_webhook.mode = mode
    settings = ledger_settings(migrated_db_url, ledger_fga, fake_webhook.url, crawl_webhook_timeout_s=0.5)
    async with open_ledger(settings) as h:
        t0 = time.monotonic()
        r = await h.client.post("/api/crawls", json={"seeds": ["https://a.test/"], "scripts": []}, headers=WHO)
        elapsed = time.monotonic() - t0
        assert r.status_code == 202
        view = await crawl_view(h, r.json()["crawlId"])
        assert (view["state"], view["stopReason"]) == ("failed", "failed")
        assert needle in view["error"]
        if mode == "error":
            assert "windmill says no" in view["error"]
        else:
            assert elapsed < 2.5  # the 0.5 s timeout applied, not the fake's 3 s
        assert view["finishedAt"] is not None
        # the failed crawl does not block the next one
        fake_webhook.mode = "ok"
        r = await h.client.post("/api/crawls", json={"seeds": ["https://a.test/"], "scripts": []}, headers=WHO)
        assert r.status_code == 202


async def test_refused_connection_closes_the_crawl(migrated_db_url, ledger_fga):
    settings = ledger_settings(migrated_db_url, ledger_fga, refused_url())
    async with open_ledger(settings) as h:
        r = await h.client.post("/api/crawls", json={"seeds": ["https://a.test/"], "scripts": []}, headers=WHO)
        view = await crawl_view(h, r.json()["crawlId"])
    assert view["state"] == "failed" and "unreachable" in view["error"]


async def test_next_level_dispatch_failure_closes_the_crawl(migrated_db_url, ledger_fga, fake_webhook, s3_server):
    from tests.ledger.test_level_reports import put_links, store_of

    settings = ledger_settings(migrated_db_url, ledger_fga, fake_webhook.url, s3_bucket=s3_server.bucket)
    links = put_links(s3_server, [{"href": "https://a.test/n"}])
    async with open_ledger(settings, s3=store_of(s3_server)) as h:
        crawl_id = (await h.client.post("/api/crawls", json={"seeds": ["https://a.test/"], "scripts": []},
                                        headers=WHO)).json()["crawlId"]
        fake_webhook.mode = "error"
        r = await h.client.post(f"/api/crawls/{crawl_id}/pages", headers=WHO, json={
            "depth": 0, "results": [{"url": "https://a.test/", "status": "captured", "linksLocation": links}],
            "compiled": {"typescript": "6.0.3", "hostTypes": "v0.2.0", "scripts": []}})
        assert r.status_code == 200 and len(r.json()["next"]) == 1
        view = await crawl_view(h, crawl_id)
    assert (view["state"], view["stopReason"]) == ("failed", "failed")
    assert view["lastJob"]["depth"] == 0  # level 0's job stays recorded


async def test_quoted_job_id_and_never_backwards(migrated_db_url, ledger_fga, fake_webhook):
    fake_webhook.mode = "quoted"
    settings = ledger_settings(migrated_db_url, ledger_fga, fake_webhook.url)
    async with open_ledger(settings) as h:
        crawl_id = (await h.client.post("/api/crawls", json={"seeds": ["https://a.test/"], "scripts": []},
                                        headers=WHO)).json()["crawlId"]
        assert (await crawl_view(h, crawl_id))["lastJob"] == {"id": fake_webhook.job_ids[0], "depth": 0}
        # a later level's job recorded first: an older level's bookkeeping must not move it back
        with psycopg.connect(migrated_db_url, autocommit=True) as conn:
            conn.execute("UPDATE crawls SET last_job_id = %s, last_job_depth = 3 WHERE id = %s", (JOB, uuid.UUID(crawl_id)))
        from ledger.crawl.dispatch import dispatch_level
        async with h.services.pool.connection() as conn:
            crawl = await (await conn.execute("SELECT * FROM crawls WHERE id = %s", (uuid.UUID(crawl_id),))).fetchone()
        await dispatch_level(h.services, crawl, 1, [{"url": "https://a.test/", "host": "a.test"}])
        assert (await crawl_view(h, crawl_id))["lastJob"] == {"id": JOB, "depth": 3}


def test_signing_requires_wacz():
    with pytest.raises(ValueError, match="requires wacz"):
        Settings(_env_file=None, capture_formats="png", capture_signing=True)
    assert Settings(_env_file=None, capture_formats="wacz,png", capture_signing=True).capture_signing
