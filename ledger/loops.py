"""The ledger's background loops, safe with several replicas on one database (issue 12).

Each loop round runs only on the replica that holds the loop's Postgres advisory lock for that
round (``pg_try_advisory_xact_lock(LOOP_LOCK, key)`` in a transaction held for the round);
the others skip the round. So with ``waggle serve --workers N`` or several ``waggle serve``
processes each row is handled by one round at a time:

* outbox drain (``ledger.authz.outbox.drain_all``): one drainer keeps rows that touch the same
  tuple in id order across replicas (its ``FOR UPDATE SKIP LOCKED`` also guards ``waggle fga drain``);
* reconciler (``ledger.archive.reconciler.reconcile``): one pass at a time, no double reads;
* watchdog (``ledger.crawl.watchdog.check_once``): one close per stuck crawl;
* lease loop (``ledger.crawl.dispatch.lease_round``): expired host leases, waiting levels
  (each claim is also race-free on its own: the crawl row is locked);
* limits (``ledger.crawl.limits.check_once``): crawls past their time or bytes limit stopped.
* search sweep (``ledger.search.indexer.sweep``): archives left unindexed (late admissions;
  its claims are also ``FOR UPDATE SKIP LOCKED``, so ``/index`` may run beside it).
* schedules (``ledger.crawl.schedule_reconcile.reconcile``): Windmill's workflow schedules
  repaired to match the workflows (decision 352); only when crawls go to a Windmill.

A replica that dies mid-round releases its lock with its connection; another takes the next round.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

log = logging.getLogger("waggle.loops")

LOOP_LOCK = 0x7767_6C70  # "wglp": advisory lock namespace of the background loops


@dataclass(frozen=True)
class Loop:
    """``name`` (log), ``key`` (advisory lock key), ``once(services)``, ``interval_s(settings)``."""

    name: str
    key: int
    once: Callable[[Any], Awaitable[Any]]
    interval_s: Callable[[Any], float]


async def run_exclusive(pool: Any, key: int, once: Callable[[], Awaitable[Any]]) -> bool:
    """Run ``once()`` while holding advisory lock ``(LOOP_LOCK, key)``; False (not run) when
    another replica holds it. The lock is held by a transaction on one pool connection and
    released when ``once`` returns or raises."""
    async with pool.connection() as conn, conn.transaction():
        cur = await conn.execute("SELECT pg_try_advisory_xact_lock(%s, %s) AS got", (LOOP_LOCK, key))
        if not (await cur.fetchone())["got"]:
            return False
        await once()
        return True


async def run_loop(services: Any, loop: Loop) -> None:
    """Run ``loop`` every ``interval_s`` until cancelled; errors are logged, never raised."""
    while True:
        try:
            await run_exclusive(services.pool, loop.key, lambda: loop.once(services))
        except asyncio.CancelledError:
            raise
        except Exception:  # noqa: BLE001 - a failed round is retried next interval
            log.exception("Background loop %s failed; retrying", loop.name)
        await asyncio.sleep(max(0.05, float(loop.interval_s(services.settings))))


async def _drain(services: Any) -> None:
    from ledger.authz.outbox import drain_all

    await drain_all(services.pool, services.authz)


async def _reconcile(services: Any) -> None:
    from ledger.archive.reconciler import reconcile

    if services.s3 is not None:
        await reconcile(services.pool, services.s3, since_days=services.settings.reconcile_since_days,
                        trusted_roots=services.settings.signing_trusted_roots)


async def _watchdog(services: Any) -> None:
    from ledger.crawl.watchdog import check_once

    await check_once(services)


async def _search(services: Any) -> None:
    from ledger.search.indexer import sweep

    await sweep(services)


async def _leases(services: Any) -> None:
    from ledger.crawl.dispatch import lease_round

    await lease_round(services)


async def _limits(services: Any) -> None:
    from ledger.crawl.limits import check_once

    await check_once(services)


async def _schedules(services: Any) -> None:
    from ledger.crawl.schedule_reconcile import reconcile
    from ledger.crawl.workflow_schedule import ScheduleUnavailable

    try:
        await reconcile(services.pool, services.http, services.settings)
    except ScheduleUnavailable as exc:  # Windmill away or refusing: one line, the next round retries
        log.warning("workflow schedules not reconciled: %s", exc.error)


def loops(settings: Any) -> list[Loop]:
    """The loops every ledger process runs (each round on one replica at a time)."""
    out = [
        Loop("outbox", 1, _drain, lambda s: s.drain_interval_s),
        Loop("reconciler", 2, _reconcile, lambda s: s.reconcile_interval_s),
        Loop("watchdog", 3, _watchdog, lambda s: s.watchdog_interval_s),
        Loop("leases", 4, _leases, lambda s: s.lease_interval_s),
        Loop("limits", 5, _limits, lambda s: s.lease_interval_s),  # time / bytes limits per crawl (issue 29)
        Loop("search", 6, _search, lambda s: s.search_sweep_interval_s),
        Loop("schedules", 7, _schedules, lambda s: s.schedule_reconcile_interval_s),
    ]
    return out


HEARTBEAT_S = 5.0
REPLICA_FRESH_S = 30.0  # a replica seen within this long counts as alive


def replica_id() -> str:
    """``hostname:pid`` of this process."""
    import os
    import socket

    return f"{socket.gethostname()}:{os.getpid()}"


async def heartbeat(services: Any) -> None:
    """Every :data:`HEARTBEAT_S`: note this process in ``ledger_replicas`` (every replica does;
    rows unseen for a day are dropped). Errors are logged, never raised."""
    me = replica_id()
    while True:
        try:
            async with services.pool.connection() as conn:
                await conn.execute("INSERT INTO ledger_replicas (id) VALUES (%s)"
                                   " ON CONFLICT (id) DO UPDATE SET seen_at = now()", (me,))
                await conn.execute("DELETE FROM ledger_replicas WHERE seen_at < now() - interval '1 day'")
        except asyncio.CancelledError:
            raise
        except Exception:  # noqa: BLE001
            log.warning("replica heartbeat failed", exc_info=True)
        await asyncio.sleep(HEARTBEAT_S)


def runners(settings: Any) -> list[Callable[[Any], Awaitable[None]]]:
    """``runner(services)`` coroutine functions for the app lifespan: the heartbeat, then one
    per loop."""

    def bind(loop: Loop) -> Callable[[Any], Awaitable[None]]:
        async def runner(services: Any) -> None:
            await run_loop(services, loop)

        runner.__module__ = f"waggle.loops.{loop.name}"
        return runner

    return [heartbeat, *(bind(loop) for loop in loops(settings))]
