"""Fast path (level report) and reconciler against real Postgres and a real S3 server."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from ledger.archive.admission import admit_level
from ledger.archive.reconciler import reconcile
from tests.archive.helpers import manifest

pytestmark = pytest.mark.anyio
BUCKET = "browserhive"


def result(task_id: str, key: str | None, *, status: str = "captured", url: str = "https://example.org/") -> dict:
    r: dict[str, Any] = {"url": url, "status": status, "taskId": task_id}
    if key is not None:
        r["manifestLocation"] = f"s3://{BUCKET}/{key}"
    return r


async def fast_path(pool, s3store, results: list[dict], org: str = "acme", by: str | None = "alice"):
    async with pool.connection() as conn, conn.transaction():
        return await admit_level(conn, s3store, bucket=BUCKET, org_id=org, submitted_by=by, results=results)


async def record_submission(pool, task_id: str, key: str | None, org: str = "acme", by: str | None = "alice",
                            days_ago: int = 0) -> None:
    async with pool.connection() as conn:
        await conn.execute(
            "INSERT INTO capture_submissions (task_id, org_id, submitted_by, manifest_key, submitted_at)"
            " VALUES (%s, %s, %s, %s, now() - make_interval(days => %s))", (task_id, org, by, key, days_ago))


async def rows(pool, sql: str, *args) -> list[dict]:
    async with pool.connection() as conn:
        return await (await conn.execute(sql, args)).fetchall()


def unique_key(suffix: str = ".result.json") -> tuple[str, str]:
    task = str(uuid.uuid4())
    return task, f"{task}_crawl-1_smoke{suffix}"


async def test_fast_path_registers_and_queues_tuples(pool, s3server_put, s3store) -> None:
    task, key = unique_key()
    s3server_put(key, manifest(task, complete=False, url="https://example.org/a"))
    got = await fast_path(pool, s3store, [result(task, key, url="https://example.org/a")])
    assert (got.registered, got.skipped, got.missing, got.errors) == (1, 0, 0, 0)
    assert got.admitted_urls == ["https://example.org/a"] and got.recovered == set()
    [a] = await rows(pool, "SELECT * FROM archives")
    assert str(a["task_id"]) == task and a["bucket"] == BUCKET and a["object_key"] == f"{task}_crawl-1_smoke.wacz"
    assert a["wacz_complete"] is False and a["signed"] is None and a["labels"] == ["smoke"]
    assert a["captured_at"].isoformat() == "2026-09-24T00:00:04.210000+00:00"  # BrowserHive's time, not ours
    [o] = await rows(pool, "SELECT * FROM fga_outbox")
    assert o["processed_at"] is None and o["attempts"] == 0
    assert sorted((t["user"], t["relation"], t["object"]) for t in o["payload"]["writes"]) == sorted([
        (f"capture_job:{task}", "parent", f"archive:{a['id']}"),
        ("organization:acme", "parent", f"capture_job:{task}"),
        ("user:alice", "owner", f"capture_job:{task}"),
    ])


async def test_missing_bodies_are_stored_capped_and_make_the_archive_incomplete(pool, s3server_put, s3store) -> None:
    """Issue 17 item 3: the manifest's missingBodyUrls (capped at 20) and missingBodyCount are
    kept; a manifest that names URLs without a body is incomplete even if it says complete."""
    urls = [f"https://example.org/poll/{i:02d}" for i in range(25)]
    task, key = unique_key()
    s3server_put(key, manifest(task, completeness={
        "bodylessUrls": [], "truncatedUrls": ["https://example.org/big.bin"], "missingBodyUrls": urls,
        "missingBodyCount": 31, "complete": False}))
    task2, key2 = unique_key()
    s3server_put(key2, manifest(task2, completeness={
        "bodylessUrls": [], "truncatedUrls": [], "missingBodyUrls": ["https://example.org/poll"],
        "missingBodyCount": 1, "complete": True}))
    got = await fast_path(pool, s3store, [result(task, key), result(task2, key2)])
    assert got.registered == 2
    by_task = {str(a["task_id"]): a for a in await rows(pool, "SELECT * FROM archives")}
    a, b = by_task[task], by_task[task2]
    assert a["wacz_complete"] is False and a["missing_body_urls"] == urls[:20] and a["missing_body_count"] == 31
    assert a["truncated_urls"] == ["https://example.org/big.bin"]
    assert b["wacz_complete"] is False and b["missing_body_urls"] == ["https://example.org/poll"]


async def test_a_capture_at_the_page_load_deadline_is_admitted_incomplete_with_its_reason(
        pool, s3server_put, s3store) -> None:
    """Extension 14: a success with ``incomplete`` is an archive, recorded incomplete with the
    reason, even when its completeness lists nothing (the load event just never came); the pending
    URLs are the missing bodies. A v12 manifest (no member) keeps NULL."""
    hang = "https://example.org/hang.png"
    task, key = unique_key()
    s3server_put(key, manifest(task, completeness={
        "bodylessUrls": [], "truncatedUrls": [], "missingBodyUrls": [hang], "missingBodyCount": 1, "complete": False},
        incomplete={"reason": "page-load-deadline", "deadlineMs": 30000, "pendingUrls": [hang], "pendingCount": 1}))
    task2, key2 = unique_key()
    s3server_put(key2, manifest(task2, incomplete={"reason": "page-load-deadline", "pendingUrls": [], "pendingCount": 0}))
    task3, key3 = unique_key()
    s3server_put(key3, manifest(task3))
    got = await fast_path(pool, s3store, [result(task, key), result(task2, key2), result(task3, key3)])
    assert got.registered == 3
    by_task = {str(a["task_id"]): a for a in await rows(pool, "SELECT * FROM archives")}
    a, b, c = by_task[task], by_task[task2], by_task[task3]
    assert (a["incomplete_reason"], a["wacz_complete"], a["missing_body_urls"]) == ("page-load-deadline", False, [hang])
    assert (b["incomplete_reason"], b["wacz_complete"]) == ("page-load-deadline", False)
    assert (c["incomplete_reason"], c["wacz_complete"]) == (None, True)


async def test_fast_path_then_reconciler_is_a_no_op(pool, s3server_put, s3store) -> None:
    task, key = unique_key()
    s3server_put(key, manifest(task))
    assert (await fast_path(pool, s3store, [result(task, key)])).registered == 1
    await record_submission(pool, task, key)
    again = await reconcile(pool, s3store)
    assert (again.pending, again.registered) == (0, 0)  # it has an archive: not pending
    # and the fast path a second time (e.g. a duplicated report) queues nothing either
    second = await fast_path(pool, s3store, [result(task, key)])
    assert (second.registered, second.skipped) == (0, 1)
    assert len(await rows(pool, "SELECT 1 FROM archives")) == 1
    assert len(await rows(pool, "SELECT 1 FROM fga_outbox")) == 1


async def test_reconciler_then_fast_path_is_a_no_op(pool, s3server_put, s3store) -> None:
    task, key = unique_key()
    await record_submission(pool, task, key, org="beta", by="bob")
    first = await reconcile(pool, s3store)
    assert (first.pending, first.missing, first.registered) == (1, 1, 0)  # not written yet
    s3server_put(key, manifest(task))
    second = await reconcile(pool, s3store)
    assert (second.pending, second.registered, second.missing) == (1, 1, 0)
    late = await fast_path(pool, s3store, [result(task, key)], org="beta", by="bob")
    assert (late.registered, late.skipped) == (0, 1)
    [o] = await rows(pool, "SELECT payload FROM fga_outbox")
    assert {"user": "organization:beta", "relation": "parent", "object": f"capture_job:{task}"} in o["payload"]["writes"]
    assert {"user": "user:bob", "relation": "owner", "object": f"capture_job:{task}"} in o["payload"]["writes"]


@pytest.mark.parametrize("status", ["failed", "timeout", "http_error"])
async def test_failed_captures_never_enter(pool, s3server_put, s3store, status: str) -> None:
    task, key = unique_key()
    # even a failed manifest that names a WACZ (a partial upload, C10) stays out
    s3server_put(key, manifest(task, status=status) | {"artifacts": {"wacz": f"s3://{BUCKET}/{task}.wacz"}})
    got = await fast_path(pool, s3store, [result(task, key, status="failed")])
    assert (got.registered, got.skipped, got.recovered) == (0, 1, set())
    await record_submission(pool, task, key)
    rec = await reconcile(pool, s3store)
    assert (rec.pending, rec.registered, rec.skipped) == (1, 0, 1)
    assert await rows(pool, "SELECT 1 FROM archives") == [] and await rows(pool, "SELECT 1 FROM fga_outbox") == []


async def test_manifest_without_wacz_never_enters(pool, s3server_put, s3store) -> None:
    task, key = unique_key()
    s3server_put(key, manifest(task) | {"artifacts": {"png": f"s3://{BUCKET}/{task}.png"}})
    got = await fast_path(pool, s3store, [result(task, key)])
    assert (got.registered, got.skipped) == (0, 1)
    assert await rows(pool, "SELECT 1 FROM archives") == []


async def test_failed_page_with_an_archive_is_recovered(pool, s3server_put, s3store) -> None:
    ok_task, ok_key = unique_key()
    lost_task, lost_key = unique_key()
    s3server_put(ok_key, manifest(ok_task))
    s3server_put(lost_key, manifest(lost_task, url="https://example.org/lost"))
    got = await fast_path(pool, s3store, [
        result(ok_task, ok_key),
        {"url": "https://example.org/skipped", "status": "skipped", "skipReason": "robots"},
        result(lost_task, lost_key, status="failed", url="https://example.org/lost"),
    ])
    assert got.registered == 2 and got.recovered == {2}
    assert got.admitted_urls == ["https://example.org/", "https://example.org/lost"]


async def test_missing_and_broken_manifests_never_fail_the_level(pool, s3server_put, s3store, s3_server) -> None:
    good, good_key = unique_key()
    missing, missing_key = unique_key()
    broken, broken_key = unique_key()
    garbage, garbage_key = unique_key()
    old, old_key = unique_key()
    s3server_put(good_key, manifest(good))
    s3server_put(broken_key, manifest(broken) | {"completeness": {"complete": "yes"}})
    s3_server.client().put_object(Bucket=BUCKET, Key=garbage_key, Body=b"\x00not json")
    s3server_put(old_key, manifest(old) | {"status": "CAPTURE_STATUS_SUCCESS"})
    got = await fast_path(pool, s3store, [
        result(broken, broken_key), result(missing, missing_key), result(garbage, garbage_key),
        {"url": "https://example.org/x", "status": "failed", "taskId": str(uuid.uuid4()), "manifestError": "sink 500"},
        {"url": "https://example.org/y", "status": "captured", "taskId": str(uuid.uuid4()),
         "manifestLocation": "s3://another-bucket/x.result.json"},
        result(good, good_key), result(old, old_key),
    ])
    assert (got.registered, got.missing, got.skipped, got.errors) == (2, 1, 3, 0)
    assert {str(r["task_id"]) for r in await rows(pool, "SELECT task_id FROM archives")} == {good, old}


async def test_keys_are_read_verbatim(pool, s3server_put, s3store) -> None:
    task = str(uuid.uuid4())
    key = f"elsewhere/{task} x y+z %2F ü_.result.json"
    s3server_put(key, manifest(task, wacz_key=f"org/acme/2026-09/{task} a+b ü.wacz"))
    got = await fast_path(pool, s3store, [result(task, key)])
    assert got.registered == 1
    [a] = await rows(pool, "SELECT object_key FROM archives")
    assert a["object_key"] == f"org/acme/2026-09/{task} a+b ü.wacz"


async def test_wacz_in_another_bucket_keeps_its_bucket(pool, s3server_put, s3store) -> None:
    task, key = unique_key()
    s3server_put(key, manifest(task, bucket="archive-b", complete=None) | {"signature": {"signed": True}})
    assert (await fast_path(pool, s3store, [result(task, key)], by=None)).registered == 1
    [a] = await rows(pool, "SELECT bucket, wacz_complete, signed, signature_verified FROM archives")
    # the report claims a signature its WACZ does not carry: the row records what the ledger found
    assert (a["bucket"], a["wacz_complete"], a["signed"], a["signature_verified"]) == ("archive-b", None, False, False)
    [o] = await rows(pool, "SELECT payload FROM fga_outbox")
    assert len(o["payload"]["writes"]) == 2  # no submitter → no owner tuple


async def test_reconcile_since_days(pool, s3server_put, s3store) -> None:
    recent, recent_key = unique_key()
    old, old_key = unique_key()
    for t, k in ((recent, recent_key), (old, old_key)):
        s3server_put(k, manifest(t))
    await record_submission(pool, recent, recent_key, days_ago=1)
    await record_submission(pool, old, old_key, days_ago=30)
    await record_submission(pool, str(uuid.uuid4()), None)  # reported with manifestError: never pending
    got = await reconcile(pool, s3store, since_days=7)
    assert (got.pending, got.registered) == (1, 1)
    got = await reconcile(pool, s3store)
    assert (got.pending, got.registered) == (1, 1)
    with pytest.raises(ValueError):
        await reconcile(pool, s3store, since_days=0)


async def test_reconciler_runs_periodically_in_the_service(pool, s3server_put, s3store) -> None:
    """``run_periodically`` admits a late manifest on its own, and survives a failing pass."""
    import asyncio
    from types import SimpleNamespace

    from ledger.archive.reconciler import run_periodically

    task, key = unique_key()
    await record_submission(pool, task, key)
    broken = SimpleNamespace(get_json=None)  # first pass: an S3 object that cannot read (logged, not raised)
    services = SimpleNamespace(pool=pool, s3=broken, settings=SimpleNamespace(reconcile_interval_s=0.05,
                                                                              reconcile_since_days=7))
    runner = asyncio.create_task(run_periodically(services))
    try:
        await asyncio.sleep(0.2)
        assert not runner.done()
        services.s3 = s3store
        s3server_put(key, manifest(task))
        for _ in range(100):
            if await rows(pool, "SELECT 1 FROM archives"):
                break
            await asyncio.sleep(0.05)
        assert len(await rows(pool, "SELECT 1 FROM archives")) == 1
    finally:
        runner.cancel()
        with pytest.raises(asyncio.CancelledError):
            await runner
