"""The outbox worker: delivers queued ``fga_outbox`` payloads to OpenFGA.

One drain = one transaction over up to ``batch_size`` due rows taken with ``FOR UPDATE SKIP
LOCKED`` (concurrent drainers never take the same row and never wait for each other), in id
order. Per row (reference/ledger.md §9.4, with our back-off):

1. the payload must be ``{"writes"?: [tuple], "deletes"?: [tuple]}``; otherwise it fails;
2. one Write with the whole payload; refused as "already exists"/"does not exist" → retried
   tuple by tuple, where those same refusals count as done (a batch refusal must not drop the
   new tuples of the same row);
3. delivered → ``processed_at = now()`` (rows are kept as an audit trail);
4. OpenFGA unreachable → stop this drain; this and later rows are untouched (no attempt
   counted, only ``last_error`` noted);
5. any other failure → ``attempts + 1``, ``last_error``, ``next_attempt_at = now() + back-off``
   where back-off = min(cap, base·2^(attempts−1)) × a random factor in [0.5, 1.0] (jitter),
   and the drain goes on with the next row.
"""

from __future__ import annotations

import asyncio
import logging
import random
from dataclasses import asdict, dataclass
from typing import Any

from openfga_sdk.exceptions import ApiException

from ledger.authz.fga import is_already_in_desired_state, is_unreachable

log = logging.getLogger("waggle.outbox")

BATCH_SIZE = 100
BACKOFF_BASE_S = 5.0
BACKOFF_CAP_S = 3600.0


@dataclass
class DrainResult:
    delivered: int = 0
    failed: int = 0
    unreachable: str | None = None
    batch: int = 0  # rows taken in this drain

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


class PayloadInvalid(ValueError):
    """The outbox row's payload is not a write request."""


def backoff_s(attempts: int, *, base_s: float = BACKOFF_BASE_S, cap_s: float = BACKOFF_CAP_S,
              rng: random.Random | None = None) -> float:
    """Seconds to wait after the ``attempts``-th failure (1-based): exponential, capped, jittered."""
    ceiling = min(cap_s, base_s * (2 ** max(0, attempts - 1)))
    return ceiling * (rng or random).uniform(0.5, 1.0)


def _tuples(payload: dict, name: str) -> list[dict]:
    items = payload.get(name)
    if items is None:
        return []
    if not isinstance(items, list):
        raise PayloadInvalid(f"{name} must be a list")
    for t in items:
        if not isinstance(t, dict) or not all(isinstance(t.get(k), str) and t.get(k) for k in ("user", "relation", "object")):
            raise PayloadInvalid(f"every item of {name} must have string user, relation and object")
    return items


async def deliver(authz: Any, payload: Any) -> None:
    """Write one payload; duplicates/absent tuples are retried one by one and count as done."""
    if not isinstance(payload, dict):
        raise PayloadInvalid("payload must be an object")
    writes, deletes = _tuples(payload, "writes"), _tuples(payload, "deletes")
    if not writes and not deletes:
        return
    try:
        await authz.write(writes or None, deletes or None)
        return
    except ApiException as exc:
        if not is_already_in_desired_state(exc):
            raise
    for t in writes:
        try:
            await authz.write([t], None)
        except ApiException as exc:
            if not is_already_in_desired_state(exc):
                raise
    for t in deletes:
        try:
            await authz.write(None, [t])
        except ApiException as exc:
            if not is_already_in_desired_state(exc):
                raise


async def drain_once(pool: Any, authz: Any, *, batch_size: int = BATCH_SIZE, base_s: float = BACKOFF_BASE_S,
                     cap_s: float = BACKOFF_CAP_S) -> DrainResult:
    """Deliver up to ``batch_size`` due rows; see the module docstring. Returns the counts."""
    out = DrainResult()
    async with pool.connection() as conn, conn.transaction():
        rows = await (await conn.execute(
            """
            SELECT id, payload, attempts FROM fga_outbox
            WHERE processed_at IS NULL AND (next_attempt_at IS NULL OR next_attempt_at <= now())
            ORDER BY id LIMIT %s
            FOR UPDATE SKIP LOCKED
            """,
            (batch_size,),
        )).fetchall()
        out.batch = len(rows)
        for row in rows:
            row_id, payload, attempts = row["id"], row["payload"], row["attempts"]
            try:
                await deliver(authz, payload)
            except Exception as exc:  # noqa: BLE001 - classified below
                message = f"{type(exc).__name__}: {exc}"[:2000]
                if is_unreachable(exc):
                    await conn.execute("UPDATE fga_outbox SET last_error = %s WHERE id = %s", (message, row_id))
                    log.error("OpenFGA unreachable; stopping this drain", extra={"error": message})
                    out.unreachable = message
                    break
                wait = backoff_s(attempts + 1, base_s=base_s, cap_s=cap_s)
                await conn.execute(
                    """
                    UPDATE fga_outbox SET attempts = attempts + 1, last_error = %s,
                           next_attempt_at = now() + make_interval(secs => %s)
                    WHERE id = %s
                    """,
                    (message, wait, row_id),
                )
                log.error("Outbox delivery failed; will retry", extra={"id": row_id, "error": message, "retryInS": round(wait, 1)})
                out.failed += 1
                continue
            await conn.execute(
                "UPDATE fga_outbox SET processed_at = now(), next_attempt_at = NULL WHERE id = %s", (row_id,)
            )
            out.delivered += 1
    if out.delivered or out.failed or out.unreachable:
        log.info("Outbox drained", extra=out.as_dict())
    return out


async def drain_all(pool: Any, authz: Any, *, batch_size: int = BATCH_SIZE, max_batches: int = 100) -> DrainResult:
    """Drain until a batch comes back short, OpenFGA is unreachable or ``max_batches`` ran."""
    total = DrainResult()
    for _ in range(max_batches):
        r = await drain_once(pool, authz, batch_size=batch_size)
        total.delivered += r.delivered
        total.failed += r.failed
        total.batch += r.batch
        total.unreachable = r.unreachable
        if r.unreachable or r.batch < batch_size or r.delivered == 0:
            break
    return total


async def run_periodically(services: Any) -> None:
    """Drain every ``settings.drain_interval_s`` seconds until cancelled; failures are logged
    (``Scheduled outbox drain failed``), never raised."""
    while True:
        try:
            await drain_all(services.pool, services.authz)
        except asyncio.CancelledError:
            raise
        except Exception:  # noqa: BLE001
            log.exception("Scheduled outbox drain failed")
        await asyncio.sleep(services.settings.drain_interval_s)
