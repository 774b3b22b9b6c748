"""The outbox worker against real Postgres and the real OpenFGA server over HTTP."""

from __future__ import annotations

import asyncio
import random
import uuid

import pytest
from psycopg.types.json import Jsonb

from ledger.authz.fga import Authz
from ledger.authz.outbox import backoff_s, drain_all, drain_once
from tests.fixtures.fga import FgaProcess, create_store

pytestmark = pytest.mark.anyio


def payload_for(n: int) -> dict:
    job = f"capture_job:{uuid.uuid4()}"
    return {"writes": [
        {"user": job, "relation": "parent", "object": f"archive:{uuid.uuid4()}"},
        {"user": f"organization:org{n}", "relation": "parent", "object": job},
        {"user": f"user:u{n}", "relation": "owner", "object": job},
    ]}


async def queue(pool, payloads: list) -> list[int]:
    async with pool.connection() as conn:
        ids = []
        for p in payloads:
            row = await (await conn.execute("INSERT INTO fga_outbox (payload) VALUES (%s) RETURNING id", (Jsonb(p),))).fetchone()
            ids.append(row["id"])
        return ids


async def outbox(pool) -> list[dict]:
    async with pool.connection() as conn:
        return await (await conn.execute("SELECT * FROM fga_outbox ORDER BY id")).fetchall()


def stored(store) -> set[tuple[str, str, str]]:
    return {(t["user"], t["relation"], t["object"]) for t in store.read()}


def expected(payloads: list[dict]) -> set[tuple[str, str, str]]:
    return {(t["user"], t["relation"], t["object"]) for p in payloads for t in p["writes"]}


async def test_drain_delivers_and_keeps_rows(pool, fga_store) -> None:
    payloads = [payload_for(i) for i in range(3)]
    await queue(pool, payloads)
    az = Authz(fga_store.api_url, fga_store.store_id, fga_store.model_id)
    try:
        r = await drain_once(pool, az)
        assert (r.delivered, r.failed, r.unreachable) == (3, 0, None)
        assert (await drain_once(pool, az)).batch == 0  # nothing pending any more
    finally:
        await az.close()
    rows = await outbox(pool)
    assert len(rows) == 3 and all(r["processed_at"] is not None and r["attempts"] == 0 for r in rows)
    assert stored(fga_store) == expected(payloads)


async def test_existing_tuples_do_not_lose_the_new_ones(pool, fga_store) -> None:
    p = payload_for(1)
    fga_store.write([p["writes"][1]])  # one of three already there: OpenFGA refuses the whole batch
    gone = {"user": "user:ghost", "relation": "submitter", "object": "organization:acme"}
    await queue(pool, [p | {"deletes": [gone]}])  # and one delete of a tuple that is absent
    az = Authz(fga_store.api_url, fga_store.store_id, fga_store.model_id)
    try:
        r = await drain_once(pool, az)
    finally:
        await az.close()
    assert (r.delivered, r.failed) == (1, 0)
    assert stored(fga_store) == expected([p])


async def test_real_refusal_counts_an_attempt_and_backs_off(pool, fga_store) -> None:
    bad = {"writes": [{"user": "user:x", "relation": "no_such_relation", "object": "archive:a"}]}
    good = payload_for(2)
    await queue(pool, [bad, good, {"writes": "not a list"}])
    az = Authz(fga_store.api_url, fga_store.store_id, fga_store.model_id)
    try:
        r = await drain_once(pool, az, base_s=4.0, cap_s=60)
        assert (r.delivered, r.failed, r.unreachable) == (1, 2, None)
        rows = await outbox(pool)
        for row in (rows[0], rows[2]):
            assert row["attempts"] == 1 and row["processed_at"] is None and row["last_error"]
            wait = (row["next_attempt_at"] - row["created_at"]).total_seconds()
            assert 2.0 <= wait <= 4.0 + 3.0  # base 4 s × jitter [0.5, 1.0] (+ slack for a loaded machine)
        assert "no_such_relation" in rows[0]["last_error"] and "list" in rows[2]["last_error"]
        assert (await drain_once(pool, az, base_s=4.0)).batch == 0  # not due yet: not retried at once
        async with pool.connection() as conn:
            due = (await (await conn.execute(
                "SELECT extract(epoch FROM max(next_attempt_at) - now()) AS s FROM fga_outbox")).fetchone())["s"]
        await asyncio.sleep(float(due) + 0.1)
        r = await drain_once(pool, az, base_s=4.0)
        assert (r.batch, r.failed) == (2, 2)
        rows = await outbox(pool)
        assert rows[0]["attempts"] == 2 and rows[1]["processed_at"] is not None
    finally:
        await az.close()


def test_backoff_grows_caps_and_jitters() -> None:
    rng = random.Random(7)
    samples = {n: [backoff_s(n, base_s=5, cap_s=3600, rng=rng) for _ in range(200)] for n in (1, 2, 5, 20)}
    assert all(2.5 <= s <= 5 for s in samples[1]) and all(5 <= s <= 10 for s in samples[2])
    assert all(40 <= s <= 80 for s in samples[5]) and all(1800 <= s <= 3600 for s in samples[20])
    assert len({round(s, 6) for s in samples[5]}) > 150  # jitter: rows do not retry in lockstep


async def test_openfga_down_for_a_while(pool, create_database) -> None:
    """Rows stay pending while OpenFGA is down (no attempts counted), then all arrive once."""
    proc = FgaProcess(create_database()).start()
    try:
        store = create_store(proc.api_url)
        payloads = [payload_for(i) for i in range(5)]
        await queue(pool, payloads[:2])
        az = Authz(proc.api_url, store.store_id, store.model_id, timeout_s=2)
        assert (await drain_once(pool, az)).delivered == 2
        await queue(pool, payloads[2:])
        proc.stop()
        for _ in range(3):
            r = await drain_once(pool, az)
            assert r.unreachable and (r.delivered, r.failed) == (0, 0)
            assert "not reachable" in r.unreachable
        rows = await outbox(pool)
        assert [r["processed_at"] is None for r in rows] == [False, False, True, True, True]
        assert all(r["attempts"] == 0 and r["next_attempt_at"] is None for r in rows)
        assert rows[2]["last_error"] and rows[3]["last_error"] is None  # stopped at the first
        proc.start()  # same port, same database: stores, model and tuples survive
        r = await drain_all(pool, az)
        assert (r.delivered, r.failed, r.unreachable) == (3, 0, None)
        assert (await drain_once(pool, az)).batch == 0
        assert stored(store) == expected(payloads)
        await az.close()
    finally:
        proc.stop()


class SlowRecorder:
    """Wraps the real client: records every Write and holds it a little, so drains overlap."""

    def __init__(self, inner: Authz, calls: list):
        self.inner, self.calls = inner, calls

    async def write(self, writes=None, deletes=None):
        self.calls.append((tuple((t["user"], t["relation"], t["object"]) for t in writes or []), bool(deletes)))
        await asyncio.sleep(0.01)
        await self.inner.write(writes, deletes)


async def test_two_drainers_deliver_each_row_once(pool, fga_store) -> None:
    payloads = [payload_for(i) for i in range(40)]
    ids = await queue(pool, payloads)
    calls: list = []
    az = Authz(fga_store.api_url, fga_store.store_id, fga_store.model_id)
    try:
        drainers = [SlowRecorder(az, calls), SlowRecorder(az, calls)]
        results = await asyncio.gather(*(drain_all(pool, d, batch_size=5) for d in drainers))
    finally:
        await az.close()
    assert sum(r.delivered for r in results) == len(ids)
    assert all(r.delivered > 0 for r in results)  # both really worked, side by side
    assert all(r.failed == 0 for r in results)
    # every tuple was written exactly once: no duplicate delivery, no per-row or per-tuple retries
    written = [t for c in calls for t in c[0]]
    assert len(calls) < len(payloads)  # rows were combined into Writes
    assert sorted(written) == sorted(expected(payloads))
    assert stored(fga_store) == expected(payloads)
    assert all(r["processed_at"] is not None for r in await outbox(pool))


def key(t: dict) -> tuple[str, str, str]:
    return (t["user"], t["relation"], t["object"])


async def drain_recorded(pool, fga_store):
    """One ``drain_once`` into the stand-in; returns its result and every Write made
    (``SlowRecorder`` calls)."""
    calls: list = []
    az = Authz(fga_store.api_url, fga_store.store_id, fga_store.model_id)
    try:
        return await drain_once(pool, SlowRecorder(az, calls)), calls
    finally:
        await az.close()


async def test_rows_are_combined_into_writes_of_at_most_100_tuples(pool, fga_store) -> None:
    payloads = [payload_for(i) for i in range(70)]  # 210 tuples: 33 whole rows per Write
    await queue(pool, payloads)
    r, calls = await drain_recorded(pool, fga_store)
    assert (r.delivered, r.failed, r.unreachable) == (70, 0, None)
    assert sorted(len(c[0]) for c in calls) == [12, 99, 99]
    assert sorted(t for c in calls for t in c[0]) == sorted(expected(payloads))
    assert stored(fga_store) == expected(payloads)


async def test_rows_touching_one_tuple_apply_in_order_never_in_one_write(pool, fga_store) -> None:
    shared = {"user": "user:bob", "relation": "member", "object": "organization:acme"}
    others = [payload_for(i) for i in range(4)]
    queued = [others[0], {"writes": [shared]}, others[1], {"deletes": [shared]}, others[2],
              {"writes": [shared]}, others[3], {"writes": [shared]}]  # the last one: already there
    await queue(pool, queued)
    r, calls = await drain_recorded(pool, fga_store)
    assert (r.delivered, r.failed) == (8, 0)
    assert all(len(c[0]) == len(set(c[0])) for c in calls)  # no Write held a tuple twice
    assert stored(fga_store) == expected(others) | {key(shared)}  # write, delete, write: present
    assert all(row["processed_at"] is not None for row in await outbox(pool))


async def test_a_refused_combined_write_falls_back_row_by_row(pool, fga_store) -> None:
    payloads = [payload_for(i) for i in range(10)]
    fga_store.write([payloads[6]["writes"][0]])  # already there: the combined Write is refused
    bad = {"writes": [{"user": "user:x", "relation": "no_such_relation", "object": "archive:a"}]}
    await queue(pool, payloads[:3] + [bad] + payloads[3:])
    az = Authz(fga_store.api_url, fga_store.store_id, fga_store.model_id)
    try:
        r = await drain_once(pool, az)
    finally:
        await az.close()
    assert (r.delivered, r.failed, r.unreachable) == (10, 1, None)
    rows = await outbox(pool)
    assert [row["processed_at"] is None for row in rows] == [False] * 3 + [True] + [False] * 7
    assert rows[3]["attempts"] == 1 and "no_such_relation" in rows[3]["last_error"]
    assert stored(fga_store) == expected(payloads)
