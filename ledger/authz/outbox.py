"""The outbox worker: delivers queued ``fga_outbox`` payloads to OpenFGA.

One drain = one transaction over up to ``batch_size`` due rows taken with ``FOR UPDATE SKIP
LOCKED`` (concurrent drainers never take the same row and never wait for each other), in id
order. Delivery (reference/ledger.md §9.4, with our batching and back-off):

1. each payload must be ``{"writes"?: [tuple], "deletes"?: [tuple]}``; otherwise the row fails;
2. whole rows are combined into Writes of at most 100 tuples (OpenFGA's per-request limit),
   never with the same tuple twice in one wave of Writes (OpenFGA refuses a Write holding a
   duplicate, and rows touching the same tuple must apply in id order); up to 4 Writes of a
   wave run concurrently (:func:`plan_writes`);
3. a combined Write refused for any reason → its rows are delivered one by one: one Write
   with the row's whole payload; refused as "already exists"/"does not exist" → retried
   tuple by tuple, where those same refusals count as done (a batch refusal must not drop the
   new tuples of the same row);
4. delivered → ``processed_at = now()`` (rows are kept as an audit trail);
5. OpenFGA unreachable → stop this drain; the first unreachable row notes ``last_error``, it
   and later rows are otherwise untouched (no attempt counted); rows of the same wave that
   were delivered meanwhile are marked delivered;
6. any other failure → ``attempts + 1``, ``last_error``, ``next_attempt_at = now() + back-off``
   where back-off = min(cap, base·2^(attempts−1)) × a random factor in [0.5, 1.0] (jitter),
   and the drain goes on with the other rows.
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

BATCH_SIZE = 500  # rows per drain (one transaction)
MAX_TUPLES_PER_WRITE = 100  # OpenFGA's default maxTuplesPerWrite (the stand-in enforces it too)
CONCURRENT_WRITES = 4
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


def parse_payload(payload: Any) -> tuple[list[dict], list[dict]]:
    """``(writes, deletes)`` of one outbox payload ``{"writes"?: [tuple], "deletes"?: [tuple]}``;
    raises :class:`PayloadInvalid` saying what is wrong."""
    if not isinstance(payload, dict):
        raise PayloadInvalid("payload must be an object")
    return _tuples(payload, "writes"), _tuples(payload, "deletes")


async def deliver(authz: Any, writes: list[dict], deletes: list[dict]) -> None:
    """Write one row's tuples in one Write; when refused as "already exists"/"does not exist",
    retry them one by one, where those refusals count as done."""
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


@dataclass
class _Row:
    id: int
    payload: Any
    attempts: int
    writes: list[dict]
    deletes: list[dict]
    outcome: str | None = None  # "delivered" | "failed" | "unreachable"
    error: BaseException | None = None

    @property
    def keys(self) -> list[tuple[str, str, str]]:
        return [(t["object"], t["relation"], t["user"]) for t in self.writes + self.deletes]


def plan_writes(rows: list[_Row], *, max_tuples: int = MAX_TUPLES_PER_WRITE) -> list[list[list[_Row]]]:
    """Group rows (in id order) into waves of Writes: each Write holds whole rows and at most
    ``max_tuples`` tuples; within a wave no tuple key appears twice, so the Writes of a wave
    can run concurrently and none of them is refused for a duplicate tuple (OpenFGA refuses the
    whole request then). A row that touches a key already in the wave starts the next wave, so
    rows touching the same tuple are applied in id order. A row with more than ``max_tuples``
    tuples or a duplicate of its own is sent alone, exactly as queued (OpenFGA answers it)."""
    waves: list[list[list[_Row]]] = []
    wave: list[list[_Row]] = []
    wave_keys: set[tuple[str, str, str]] = set()
    current: list[_Row] = []
    size = 0
    for row in rows:
        keys = row.keys
        own = set(keys)
        if not own.isdisjoint(wave_keys):
            if current:
                wave.append(current)
            if wave:
                waves.append(wave)
            wave, wave_keys, current, size = [], set(), [], 0
        wave_keys |= own
        if len(own) != len(keys) or len(keys) > max_tuples:
            wave.append([row])  # alone: answered by OpenFGA as it is
            continue
        if size + len(keys) > max_tuples:
            wave.append(current)
            current, size = [], 0
        current.append(row)
        size += len(keys)
    if current:
        wave.append(current)
    if wave:
        waves.append(wave)
    return waves


async def _deliver_rows(authz: Any, rows: list[_Row]) -> None:
    """One Write for all of ``rows``; refused (for any reason) → each row on its own with
    :func:`deliver`, so one row's refusal never fails or drops its neighbours. Sets each
    row's ``outcome``; stops at the first unreachable error (later rows: unreachable too)."""
    if len(rows) > 1:
        try:
            await authz.write([t for r in rows for t in r.writes] or None,
                              [t for r in rows for t in r.deletes] or None)
        except Exception as exc:  # noqa: BLE001 - classified below
            if is_unreachable(exc):
                for r in rows:
                    r.outcome, r.error = "unreachable", exc
                return
        else:
            for r in rows:
                r.outcome = "delivered"
            return
    for i, r in enumerate(rows):
        try:
            await deliver(authz, r.writes, r.deletes)
        except Exception as exc:  # noqa: BLE001 - classified below
            if is_unreachable(exc):
                for rest in rows[i:]:
                    rest.outcome, rest.error = "unreachable", exc
                return
            r.outcome, r.error = "failed", exc
        else:
            r.outcome = "delivered"


async def drain_once(pool: Any, authz: Any, *, batch_size: int = BATCH_SIZE, base_s: float = BACKOFF_BASE_S,
                     cap_s: float = BACKOFF_CAP_S, concurrency: int = CONCURRENT_WRITES) -> DrainResult:
    """Deliver up to ``batch_size`` due rows; see the module docstring. Returns the counts.

    Rows are combined into Writes of up to 100 tuples (:func:`plan_writes`); up to
    ``concurrency`` Writes of one wave are in flight at once."""
    out = DrainResult()
    async with pool.connection() as conn, conn.transaction():
        fetched = await (await conn.execute(
            """
            SELECT id, payload, attempts FROM fga_outbox
            WHERE processed_at IS NULL AND (next_attempt_at IS NULL OR next_attempt_at <= now())
            ORDER BY id LIMIT %s
            FOR UPDATE SKIP LOCKED
            """,
            (batch_size,),
        )).fetchall()
        out.batch = len(fetched)
        rows: list[_Row] = []
        for f in fetched:
            row = _Row(f["id"], f["payload"], f["attempts"], [], [])
            try:
                row.writes, row.deletes = parse_payload(row.payload)
            except PayloadInvalid as exc:
                row.outcome, row.error = "failed", exc
            rows.append(row)
        pending = [r for r in rows if r.outcome is None and (r.writes or r.deletes)]
        for r in rows:
            if r.outcome is None and not (r.writes or r.deletes):
                r.outcome = "delivered"  # nothing to write
        gate = asyncio.Semaphore(max(1, concurrency))

        async def one(group: list[_Row]) -> None:
            async with gate:
                await _deliver_rows(authz, group)

        for wave in plan_writes(pending):
            await asyncio.gather(*(one(g) for g in wave))
            if any(r.outcome == "unreachable" for g in wave for r in g):
                break
        # rows after the first unreachable one stay untouched (not attempted or not noted)
        first_down = next((r for r in rows if r.outcome == "unreachable"), None)
        if first_down is not None:
            message = f"{type(first_down.error).__name__}: {first_down.error}"[:2000]
            await conn.execute("UPDATE fga_outbox SET last_error = %s WHERE id = %s", (message, first_down.id))
            log.error("OpenFGA unreachable; stopping this drain", extra={"error": message})
            out.unreachable = message
        for r in rows:
            if r.outcome != "failed" or (first_down is not None and r.id > first_down.id):
                continue
            message = f"{type(r.error).__name__}: {r.error}"[:2000]
            wait = backoff_s(r.attempts + 1, base_s=base_s, cap_s=cap_s)
            await conn.execute(
                """
                UPDATE fga_outbox SET attempts = attempts + 1, last_error = %s,
                       next_attempt_at = now() + make_interval(secs => %s)
                WHERE id = %s
                """,
                (message, wait, r.id),
            )
            log.error("Outbox delivery failed; will retry", extra={"id": r.id, "error": message, "retryInS": round(wait, 1)})
            out.failed += 1
        done = [r.id for r in rows if r.outcome == "delivered"]
        if done:
            await conn.execute(
                "UPDATE fga_outbox SET processed_at = now(), next_attempt_at = NULL WHERE id = ANY(%s)", (done,)
            )
            out.delivered = len(done)
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
