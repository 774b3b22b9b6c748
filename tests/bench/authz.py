"""Many authorization decisions at once, on the real OpenFGA server (issue 28 items 4 and 5).

Parts: the real OpenFGA server (datastore ``postgres`` on pgserver, as the local stack runs
it), the ledger's own client (``ledger.authz.fga.Authz``), ``waggle serve`` for the list.

* ``authz-many``: for 100 / 1,000 / 10,000 archive ids — half of them the caller's
  organization's (one capture job each, as admission writes them), half another's — the same
  set of viewable ids three ways: **BatchCheck** (``Authz._batch_check``: 50 Checks a request,
  2 requests in flight), **ListObjects** (``Authz.list_viewable`` ∩ the ids) and **one
  Check per archive** (``Authz.can_view``, 10 in flight). Every way must give the same set.
  Reported: median wall of 3 rounds (one at 10,000), OpenFGA CPU and the client's CPU per round. Each size has
  its own store holding only its archives: ListObjects' cost follows what the caller can see
  in the store, the other two follow the number of ids asked.
* ``archives-list``: ``GET /api/archives`` followed page by page (``nextBefore``) to the end
  over 10,000 archives all visible to the caller: total seconds, pages, per-page p50/p99.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import time
import uuid
from datetime import datetime, timedelta, timezone

import httpx
import psycopg

from tests.bench import infra
from tests.bench.harness import Context, percentile

ORG, OTHER, SUBJECT = "acme", "globex", "alice"
ROUNDS = 3
T0 = datetime(2026, 11, 29, 12, tzinfo=timezone.utc)


class Who:
    subject, organizations = SUBJECT, [ORG]


def _cpu_s(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def _write_all(authz, tuples: list[dict], in_flight: int = 8) -> None:
    sem = asyncio.Semaphore(in_flight)

    async def one(chunk: list[dict]) -> None:
        async with sem:
            await authz.write(chunk)

    await asyncio.gather(*(one(tuples[i:i + 100]) for i in range(0, len(tuples), 100)))


def _archive_tuples(n: int) -> tuple[list[str], set[str], list[dict]]:
    """``n`` archive ids (every other one the caller's organization's), the viewable ones, tuples."""
    ids, mine, tuples = [], set(), []
    for i in range(n):
        aid, job = str(uuid.uuid4()), str(uuid.uuid4())
        org = ORG if i % 2 == 0 else OTHER
        ids.append(aid)
        if org == ORG:
            mine.add(aid)
        tuples += [{"user": f"capture_job:{job}", "relation": "parent", "object": f"archive:{aid}"},
                   {"user": f"organization:{org}", "relation": "parent", "object": f"capture_job:{job}"}]
    return ids, mine, tuples


async def _per_check(authz, ids: list[str], in_flight: int = 10) -> set[str]:
    sem = asyncio.Semaphore(in_flight)

    async def one(aid: str) -> str | None:
        async with sem:
            return aid if await authz.can_view(Who(), aid) else None

    return {a for a in await asyncio.gather(*(one(i) for i in ids)) if a}


async def _batch(authz, ids: list[str]) -> set[str]:
    """BatchCheck alone (what ``Authz.viewable`` does for up to 50 ids, here for any number)."""
    allowed: set[str] = set()
    failed = await authz._batch_check(Who(), ids, allowed)
    assert not failed, f"{len(failed)} BatchCheck items failed, e.g. {next(iter(failed.values()))}"
    return allowed


async def _list(authz, ids: list[str]) -> set[str]:
    return await authz.list_viewable(Who()) & set(ids)


async def _measure(store, fga_pid: int, sizes: list[int]) -> dict:
    from ledger.authz.fga import Authz
    from tests.fixtures.fga import create_store

    out: dict = {}
    for n in sizes:
        sized = create_store(store.api_url, f"bench-{n}")
        authz = Authz(sized.api_url, sized.store_id, sized.model_id, timeout_s=120)
        try:
            ids, mine, tuples = _archive_tuples(n)
            await _write_all(authz, tuples)
            ways = {"BatchCheck": lambda: _batch(authz, ids),
                    "ListObjects": lambda: _list(authz, ids),
                    "Check per archive": lambda: _per_check(authz, ids)}
            for way, call in ways.items():
                if n < 10_000:  # a warm-up; at 10,000 the first round is warm enough
                    assert await call() == mine, f"{way} disagrees at {n}"
                walls, fga_cpu, our_cpu = [], [], []
                for _ in range(ROUNDS if n < 10_000 else 1):
                    c0, p0, t0 = _cpu_s(fga_pid), time.process_time(), time.monotonic()
                    got = await call()
                    walls.append(time.monotonic() - t0)
                    fga_cpu.append(_cpu_s(fga_pid) - c0)
                    our_cpu.append(time.process_time() - p0)
                    assert got == mine, f"{way} disagrees at {n}"
                out[(n, way)] = {"wall_ms": round(statistics.median(walls) * 1000, 1),
                                 "walls_ms": [round(w * 1000, 1) for w in walls],
                                 "openfga_cpu_ms": round(statistics.median(fga_cpu) * 1000, 1),
                                 "client_cpu_ms": round(statistics.median(our_cpu) * 1000, 1)}
        finally:
            await authz.close()
    return out


def authz_many(ctx: Context) -> None:
    """BatchCheck vs ListObjects vs one Check per archive for 100 / 1,000 / 10,000 ids (reported, no target)."""
    sizes = [100, 1000] if ctx.quick else [100, 1000, 10_000]
    ctx.detail("load", {"sizes": sizes, "rounds": ROUNDS, "viewable": "every other id (membership, contextual)",
                        "batch": "50 Checks a request, 2 requests in flight (Authz._batch_check)",
                        "per_check_in_flight": 10, "datastore": "postgres"})
    with infra.postgres() as pg, infra.fga(pg) as store:
        results = asyncio.run(_measure(store, store.pid, sizes))
    ctx.detail("results", {f"{n} {way}": r for (n, way), r in results.items()})
    for (n, way), r in results.items():
        ctx.metric(f"{n:,} ids: {way}", r["wall_ms"], "ms",
                   note=f"OpenFGA CPU {r['openfga_cpu_ms']} ms, client CPU {r['client_cpu_ms']} ms")


def archives_list(ctx: Context) -> None:
    """``GET /api/archives`` to the end over 10,000 archives visible to the caller (reported, no target)."""
    from ledger.authz.fga import Authz

    n = 2000 if ctx.quick else 10_000
    with infra.postgres() as pg, infra.s3() as s3_server, infra.fga(pg) as store:
        db = pg.new_db()
        from tests.bench.ledger_scale import _migrate

        _migrate(db)
        tuples: list[dict] = []
        with psycopg.connect(db) as conn:
            with conn.cursor().copy("COPY archives (task_id, bucket, object_key, source_url, captured_at)"
                                    " FROM STDIN") as copy:
                tasks = [str(uuid.uuid4()) for _ in range(n)]
                for i, task in enumerate(tasks):
                    # one second apart: the list's cursor is the last row's capture time
                    copy.write_row([task, "browserhive", f"{task}_c.wacz", f"https://h{i % 20:02d}.example/p{i}",
                                    T0 - timedelta(seconds=i)])
            conn.commit()
            rows = conn.execute("SELECT id, task_id FROM archives").fetchall()
        for aid, task in rows:
            tuples += [{"user": f"capture_job:{task}", "relation": "parent", "object": f"archive:{aid}"},
                       {"user": f"organization:{ORG}", "relation": "parent", "object": f"capture_job:{task}"}]

        async def load() -> None:
            authz = Authz(store.api_url, store.store_id, store.model_id)
            try:
                await _write_all(authz, tuples)
            finally:
                await authz.close()

        asyncio.run(load())
        env = infra.ledger_env(db, store, s3_server, None, WAGGLE_DRAIN_INTERVAL_S="3600",
                               WAGGLE_RECONCILE_INTERVAL_S="3600", WAGGLE_WATCHDOG_INTERVAL_S="3600")
        with infra.ledger(env) as led, httpx.Client(base_url=led.url, headers=infra.who(SUBJECT, ORG),
                                                     timeout=60) as client:
            client.get("/api/archives").raise_for_status()  # warm-up
            runs = []
            for _ in range(2):
                pages, seen, before = [], 0, None
                cpu0, t0 = _cpu_s(store.pid), time.monotonic()
                while True:
                    t = time.monotonic()
                    r = client.get("/api/archives", params={"before": before} if before else None)
                    pages.append(time.monotonic() - t)
                    r.raise_for_status()
                    body = r.json()
                    seen += len(body["archives"])
                    before = body["nextBefore"]
                    if not before:
                        break
                runs.append({"seconds": time.monotonic() - t0, "pages": pages, "seen": seen,
                             "openfga_cpu_s": _cpu_s(store.pid) - cpu0})
    best = min(runs, key=lambda r: r["seconds"])
    if best["seen"] != n:
        raise RuntimeError(f"the list showed {best['seen']} of {n} archives")
    ctx.detail("runs", [{k: (round(v, 3) if isinstance(v, float) else len(v) if isinstance(v, list) else v)
                         for k, v in r.items()} for r in runs])
    ctx.metric(f"archives list, {n:,} visible, to the end", best["seconds"], "s", key="list_to_end_s",
               note=f"{len(best['pages'])} pages of 50, the better of 2 runs")
    ctx.metric("  per page p50", percentile(best["pages"], 50) * 1000, "ms")
    ctx.metric("  per page p99", percentile(best["pages"], 99) * 1000, "ms")
    ctx.metric("  OpenFGA CPU per page", best["openfga_cpu_s"] * 1000 / len(best["pages"]), "ms")
