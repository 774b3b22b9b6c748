"""Level report v2 (issue 14, docs/internals.md): inline links instead of S3 reads, manifest
summaries, admission after the answer (checked against the summary, refusals recorded and
respected by the reconciler), recovery after the answer, and the ordering rules with v2 bodies."""

from __future__ import annotations

import uuid

import pytest

from ledger.archive.reconciler import reconcile
from ledger.s3 import S3Store
from tests.archive.helpers import manifest, put_json, put_wacz, wacz_bytes
from tests.fixtures.ledger import refused_url
from tests.ledger.test_level_reports import (
    WHO, open_ledger, post, put_links, report, rows, settings, start, store_of,  # noqa: F401 - fixture
)

pytestmark = pytest.mark.anyio


def captured(s3_server, crawl_id, url, *, links=None, summary="agree", manifest_doc="default", status="captured"):
    """A result as crawl_host sends it, with its manifest written to S3 (unless ``manifest_doc`` is None)."""
    task = str(uuid.uuid4())
    key = f"{task}_{crawl_id}.result.json"
    doc = manifest(task, url=url, bucket=s3_server.bucket) if manifest_doc == "default" else manifest_doc
    if doc is not None:
        put_json(s3_server, key, doc)
    result = {"url": url, "status": status, "taskId": task, "correlationId": crawl_id,
              "manifestLocation": f"s3://{s3_server.bucket}/{key}"}
    if links is not None:
        result["links"] = links
    if summary == "agree":
        result["manifestSummary"] = {"status": "success",
                                     "wacz": f"s3://{s3_server.bucket}/{task}_crawl-1_smoke.wacz"}
    elif summary is not None:
        result["manifestSummary"] = summary
    return task, result


def down_store(s3_server):
    return S3Store(refused_url().rsplit("/api/", 1)[0], s3_server.bucket, s3_server.region,
                   s3_server.access_key_id, s3_server.secret_access_key, connect_timeout_s=0.5, read_timeout_s=0.5)


async def test_inline_links_win_over_the_links_file_and_overflow_is_counted(settings, s3_server):
    elsewhere = put_links(s3_server, [{"href": "https://a.test/from-s3"}])
    async with open_ledger(settings, s3=store_of(s3_server)) as h:
        crawl_id = await start(h, maxDepth=2)
        _, result = captured(s3_server, crawl_id, "https://a.test/", links=[
            {"href": "https://a.test/x", "rel": None}, {"href": "https://a.test/y", "rel": "nofollow"},
            {"href": "https://other.test/z"}])
        r = await post(h, crawl_id, report(0, [{**result, "linksLocation": elsewhere, "linksOverflow": 7}]))
        assert r.status_code == 200, r.text
        assert [n["url"] for n in r.json()["next"]] == ["https://a.test/x"]
        view = (await h.client.get(f"/api/crawls/{crawl_id}", headers=WHO)).json()
    drops = rows(settings.database_url, "SELECT drops FROM crawls")[0][0]
    assert drops["links_overflow"] == 7 and drops["nofollow"] == 1
    assert view["pagesCaptured"] == 1


async def test_v2_report_answers_with_the_store_down_and_admission_waits_for_it(settings, s3_server):
    """No S3 read on the critical path: the answer comes with S3 unreachable; nothing is
    admitted without its manifest; the reconciler admits it once the store answers."""
    async with open_ledger(settings, s3=down_store(s3_server)) as h:
        crawl_id = await start(h, maxDepth=1)
        task, result = captured(s3_server, crawl_id, "https://a.test/", links=[{"href": "https://a.test/n"}])
        r = await post(h, crawl_id, report(0, [result]))
        assert r.status_code == 200 and r.json()["next"][0]["url"] == "https://a.test/n", r.text
        assert rows(settings.database_url, "SELECT count(*) FROM archives")[0][0] == 0
        got = await reconcile(h.services.pool, store_of(s3_server))
    assert got.registered == 1
    assert [str(t) for (t,) in rows(settings.database_url, "SELECT task_id FROM archives")] == [task]


async def test_manifest_disagreeing_with_the_summary_is_refused_and_recorded(settings, s3_server):
    async with open_ledger(settings, s3=store_of(s3_server)) as h:
        crawl_id = await start(h, seeds=["https://a.test/1", "https://a.test/2", "https://a.test/3"], maxDepth=0)
        good, r1 = captured(s3_server, crawl_id, "https://a.test/1", links=[])
        status, r2 = captured(s3_server, crawl_id, "https://a.test/2", links=[],
                              summary={"status": "failed"})  # the answer said failed, the manifest success
        other = str(uuid.uuid4())  # the manifest at the key belongs to another task
        swapped, r3 = captured(s3_server, crawl_id, "https://a.test/3", links=[],
                               manifest_doc=manifest(other, url="https://a.test/3", bucket=s3_server.bucket))
        r = await post(h, crawl_id, report(0, [r1, r2, r3]))
        assert r.status_code == 200 and r.json() == {"next": [], "stopReason": "max_depth"}
        errors = {str(t): e for t, e in rows(settings.database_url,
                                             "SELECT task_id, verify_error FROM capture_submissions")}
        assert errors[good] is None
        assert "status success" in errors[status] and "said failed" in errors[status]
        assert other in errors[swapped]
        assert [str(t) for (t,) in rows(settings.database_url, "SELECT task_id FROM archives")] == [good]
        again = await reconcile(h.services.pool, store_of(s3_server))  # a refusal is not retried
    assert (again.pending, again.registered) == (0, 0)
    assert rows(settings.database_url, "SELECT count(*) FROM archives")[0][0] == 1


async def test_wacz_mismatch_is_refused(settings, s3_server):
    async with open_ledger(settings, s3=store_of(s3_server)) as h:
        crawl_id = await start(h, maxDepth=0)
        task, result = captured(s3_server, crawl_id, "https://a.test/", links=[],
                                summary={"status": "success", "wacz": f"s3://{s3_server.bucket}/not-this.wacz"})
        assert (await post(h, crawl_id, report(0, [result]))).status_code == 200
    (err,) = rows(settings.database_url, "SELECT verify_error FROM capture_submissions")[0]
    assert "not-this.wacz" in err
    assert rows(settings.database_url, "SELECT count(*) FROM archives")[0][0] == 0


async def test_recovery_after_the_answer_counts_once(settings, s3_server):
    """Old shape (no summary): a page reported failed whose manifest shows a WACZ becomes captured
    after the answer; verifying again (a second replica, the reconciler) changes nothing."""
    from ledger.archive.verify import verify_level

    async with open_ledger(settings, s3=store_of(s3_server)) as h:
        crawl_id = await start(h, maxDepth=0)
        task, result = captured(s3_server, crawl_id, "https://a.test/", summary=None, status="failed")
        put_wacz(s3_server, f"s3://{s3_server.bucket}/{task}_crawl-1_smoke.wacz", wacz_bytes("https://a.test/"))
        result["skipReason"] = "deadline passed"
        r = await post(h, crawl_id, report(0, [result]))
        assert r.status_code == 200
        again = await verify_level(h.services, uuid.UUID(crawl_id), 0, {task}, [task])
        view = (await h.client.get(f"/api/crawls/{crawl_id}", headers=WHO)).json()
    assert (again.registered, again.recovered) == (0, 0)
    assert view["pagesCaptured"] == 1
    assert rows(settings.database_url, "SELECT state, skip_reason FROM crawl_pages")[0] == ("captured", None)


async def test_v2_reports_stay_idempotent_and_ordered(settings, s3_server):
    async with open_ledger(settings, s3=store_of(s3_server)) as h:
        crawl_id = await start(h, maxDepth=3)
        _, result = captured(s3_server, crawl_id, "https://a.test/", links=[{"href": "https://a.test/n"}])
        body = report(0, [result])
        first = await post(h, crawl_id, body)
        assert first.status_code == 200
        again = await post(h, crawl_id, body)
        assert again.status_code == 200 and again.json() == first.json()
        changed = report(0, [{**result, "links": [{"href": "https://a.test/other"}]}])
        late = await post(h, crawl_id, changed)
        assert late.status_code == 409 and "already accepted" in late.json()["error"]
    assert rows(settings.database_url, "SELECT count(*) FROM archives")[0][0] == 1
    assert rows(settings.database_url, "SELECT count(*) FROM crawl_pages")[0][0] == 2


async def test_two_replicas_accept_one_report_once(settings, s3_server):
    """Two ledger instances (own pools, one database) get the same v2 report at once, then a
    different one for the same depth: one application, the same answer twice, then 409."""
    import asyncio

    async with open_ledger(settings, s3=store_of(s3_server)) as a, open_ledger(settings, s3=store_of(s3_server)) as b:
        crawl_id = await start(a, maxDepth=3, maxPages=100)
        _, result = captured(s3_server, crawl_id, "https://a.test/",
                             links=[{"href": f"https://a.test/n{i}"} for i in range(50)])
        body = report(0, [result])
        first, second = await asyncio.gather(post(a, crawl_id, body), post(b, crawl_id, body))
        assert (first.status_code, second.status_code) == (200, 200), (first.text, second.text)
        assert first.json() == second.json() and len(first.json()["next"]) == 50
        late = await post(b, crawl_id, report(0, [{**result, "links": []}]))
        assert late.status_code == 409
    assert rows(settings.database_url, "SELECT count(*) FROM crawl_pages")[0][0] == 51
    assert rows(settings.database_url, "SELECT pages_captured, current_depth FROM crawls")[0] == (1, 1)
    assert rows(settings.database_url, "SELECT count(*) FROM archives")[0][0] == 1
