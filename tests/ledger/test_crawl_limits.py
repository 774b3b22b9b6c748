"""Issue 29 item 3 on real Postgres and the S3 stand-in (ledger.crawl.limits): a time limit and
a total bytes limit end the crawl gracefully with their own stop reasons; a page limit per host
ends the host (its further links dropped), not the crawl."""

from __future__ import annotations

import time
import uuid

import psycopg
import pytest

from ledger.crawl import limits
from ledger.crawl.control import STOPPED_BEFORE_CAPTURE
from tests.fixtures.ledger import open_ledger
from tests.ledger.test_level_reports import WHO, post, report, rows, settings, start, store_of  # noqa: F401

pytestmark = pytest.mark.anyio


async def view(h, crawl_id):
    return (await h.client.get(f"/api/crawls/{crawl_id}", headers=WHO)).json()


async def test_time_limit_ends_the_crawl_with_its_reason(settings, s3_server, fake_webhook):
    async with open_ledger(settings, s3=store_of(s3_server)) as h:
        limited = await start(h, timeLimitS=1)
        free = await start(h, seeds=["https://b.test/"])
        job = fake_webhook.job_ids[0]
        assert await limits.check_once(h.services) == 0  # not yet
        assert (await view(h, limited))["timeLimitS"] == 1
        time.sleep(1.1)
        assert await limits.check_once(h.services) == 1
        v, other = await view(h, limited), await view(h, free)
    assert (v["state"], v["stopReason"], v["error"]) == ("succeeded", "time_limit", None)
    assert other["state"] == "running"  # a crawl without a limit is left alone
    assert fake_webhook.cancelled == [job]
    assert rows(settings.database_url, "SELECT skip_reason FROM crawl_pages WHERE crawl_id = %s",
                uuid.UUID(limited)) == [(STOPPED_BEFORE_CAPTURE,)]


def _archive(s3_server, db_url, crawl_id, size):
    key = f"{uuid.uuid4()}.wacz"
    s3_server.client().put_object(Bucket=s3_server.bucket, Key=key, Body=b"w" * size)
    with psycopg.connect(db_url) as conn:
        conn.execute("INSERT INTO archives (task_id, correlation_id, bucket, object_key, source_url, captured_at)"
                     " VALUES (gen_random_uuid(), %s, %s, %s, 'https://a.test/', now())",
                     (crawl_id, s3_server.bucket, key))


async def test_bytes_limit_counts_admitted_archives(settings, s3_server, fake_webhook):
    async with open_ledger(settings, s3=store_of(s3_server)) as h:
        crawl_id = await start(h, maxBytes=1000)
        _archive(s3_server, settings.database_url, crawl_id, 600)
        _archive(s3_server, settings.database_url, str(uuid.uuid4()), 5000)  # another crawl's
        assert await limits.check_once(h.services) == 0
        assert (await view(h, crawl_id))["state"] == "running"
        _archive(s3_server, settings.database_url, crawl_id, 400)  # 1,000 bytes: the limit
        assert await limits.check_once(h.services) == 1
        v = await view(h, crawl_id)
    assert (v["state"], v["stopReason"], v["maxBytes"]) == ("succeeded", "size_limit", 1000)
    assert sorted(rows(settings.database_url, "SELECT wacz_bytes FROM archives WHERE correlation_id = %s",
                       crawl_id)) == [(400,), (600,)]


async def test_page_limit_per_host_ends_the_host_not_the_crawl(settings, s3_server, fake_webhook):
    async with open_ledger(settings, s3=store_of(s3_server)) as h:
        crawl_id = await start(h, seeds=["https://a.test/", "https://b.test/"], scope="domain", maxDepth=2,
                               maxPagesPerHost=3)
        links = [{"href": f"https://a.test/p{i}"} for i in range(5)]
        r = await post(h, crawl_id, report(0, [
            {"url": "https://a.test/", "status": "captured", "links": links},
            {"url": "https://b.test/", "status": "captured", "links": [{"href": "https://b.test/q"}]}]))
        v = await view(h, crawl_id)
    assert [n["url"] for n in r.json()["next"]] == ["https://a.test/p0", "https://a.test/p1", "https://b.test/q"]
    assert (v["state"], v["drops"].get("max_pages_per_host"), v["maxPagesPerHost"]) == ("running", 3, 3)


@pytest.mark.parametrize("body, field", [({"timeLimitS": 0}, "timeLimitS"), ({"maxBytes": -1}, "maxBytes"),
                                         ({"maxPagesPerHost": "3"}, "maxPagesPerHost")])
async def test_bad_limits_are_400(settings, s3_server, body, field):
    async with open_ledger(settings, s3=store_of(s3_server)) as h:
        r = await h.client.post("/api/crawls", headers=WHO, json={"seeds": ["https://a.test/"], "scripts": [], **body})
    assert r.status_code == 400 and field in r.json()["fields"], r.text
