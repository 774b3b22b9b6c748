"""Batched admission (``admit_many``) and the chunked, concurrent reconciler: the same rows,
tuples and counts as one transaction per capture, one bad row never keeping the others out."""

from __future__ import annotations

import uuid

import pytest

import ledger.archive.reconciler as rec
from ledger.archive.admission import admit_many
from ledger.archive.manifest import read_manifest
from tests.archive.helpers import manifest
from tests.archive.test_admission import fast_path, record_submission, result, rows, unique_key

pytestmark = pytest.mark.anyio


async def test_batch_outcomes_in_order_with_a_duplicate_object_and_no_archive(pool) -> None:
    a, b, failed = (str(uuid.uuid4()) for _ in range(3))
    reports = [read_manifest(manifest(a, url="https://example.org/a")),
               read_manifest(manifest(b, wacz_key=f"{a}_crawl-1_smoke.wacz")),  # same object as a
               read_manifest(manifest(failed, status="failed")),
               read_manifest(manifest(str(uuid.uuid4()), bucket="", wacz_key="x"))]  # unusable location
    async with pool.connection() as conn, conn.transaction():
        got = await admit_many(conn, reports, org_id="acme", submitted_by=None)
    assert [getattr(g, "outcome", None) for g in got] == ["registered", "already-known", "no-archive", None]
    assert isinstance(got[3], ValueError)
    [archive] = await rows(pool, "SELECT id, task_id FROM archives")
    assert (str(archive["id"]), str(archive["task_id"])) == (got[0].archive_id, a)
    [o] = await rows(pool, "SELECT payload FROM fga_outbox")
    assert len(o["payload"]["writes"]) == 2  # no submitter: no owner tuple
    async with pool.connection() as conn, conn.transaction():  # a second time: nothing new
        again = await admit_many(conn, reports[:1], org_id="acme", submitted_by="alice")
    assert again[0].outcome == "already-known"
    assert len(await rows(pool, "SELECT 1 FROM fga_outbox")) == 1


async def test_one_row_postgres_refuses_falls_back_to_one_by_one(pool, s3server_put, s3store) -> None:
    good, bad = unique_key(), unique_key()
    s3server_put(good[1], manifest(good[0], url="https://example.org/good"))
    s3server_put(bad[1], manifest(bad[0], labels=["nul\u0000byte"]))  # text cannot hold NUL
    got = await fast_path(pool, s3store, [result(bad[0], bad[1]), result(good[0], good[1], status="failed",
                                                                          url="https://example.org/good")])
    assert (got.registered, got.errors, got.admitted_urls, got.recovered) == (1, 1, ["https://example.org/good"], {1})
    assert [str(r["task_id"]) for r in await rows(pool, "SELECT task_id FROM archives")] == [good[0]]
    assert len(await rows(pool, "SELECT 1 FROM fga_outbox")) == 1


async def test_reconciler_chunks_reads_and_counts(pool, s3server_put, s3store, monkeypatch) -> None:
    monkeypatch.setattr(rec, "CHUNK", 3)  # several chunks from a few rows
    present, invalid, nul = [unique_key() for _ in range(5)], unique_key(), unique_key()
    for task, key in present:
        s3server_put(key, manifest(task))
    s3server_put(invalid[1], {"taskId": invalid[0]})
    s3server_put(nul[1], manifest(nul[0], labels=["\u0000"]))
    missing = [unique_key() for _ in range(2)]
    for task, key in [*present, invalid, nul, *missing]:
        await record_submission(pool, task, key, by="bob")
    got = await rec.reconcile(pool, s3store)
    assert got.as_dict() == {"pending": 9, "registered": 5, "skipped": 1, "missing": 2, "errors": 1}
    assert sorted(str(r["task_id"]) for r in await rows(pool, "SELECT task_id FROM archives")) == sorted(
        t for t, _ in present)
    owners = {w["user"] for r in await rows(pool, "SELECT payload FROM fga_outbox") for w in r["payload"]["writes"]
              if w["relation"] == "owner"}
    assert owners == {"user:bob"}
    again = await rec.reconcile(pool, s3store)  # registered ones are no longer pending
    assert (again.pending, again.registered, again.errors) == (4, 0, 1)
