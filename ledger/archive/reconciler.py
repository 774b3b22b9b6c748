"""The reconciler: captures reported with a manifest key but not (yet) in ``archives``.

Pending = ``capture_submissions`` rows with ``manifest_key`` and no archive of that task id
(optionally submitted within the last N days). Each manifest is read again at exactly the
recorded key of the configured bucket, checked against the submission's manifest summary
(``ledger.archive.verify.disagreement``; a disagreeing one is recorded in ``verify_error`` and
never admitted) and admitted with the submission's organization and
submitter (reference/ledger.md §9.5); reads run concurrently and a chunk's captures are admitted
in one transaction, each capture alone again when that fails. It never lists the bucket
and never builds a key. Runs as ``waggle reconcile`` and periodically inside the service.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import asdict, dataclass
from typing import Any

from ledger.archive.admission import READ_CONCURRENCY, Finding, admit_many, check_archives, fetch_manifests
from ledger.archive.wacz_check import HASH_MAX_BYTES_DEFAULT
from ledger.archive.manifest import CaptureReport, ManifestInvalid
from ledger.archive.verify import disagreement, record_disagreement, refusal_reason, refuse_archive
from ledger.crawl.salvage import promote_admitted

log = logging.getLogger("waggle.reconcile")

CHUNK = 200  # pending rows per round: reads in flight together, one admission transaction

PENDING_SQL = """
SELECT s.task_id, s.org_id, s.submitted_by, s.manifest_key, s.manifest_summary
FROM capture_submissions s
LEFT JOIN archives a ON a.task_id = s.task_id
WHERE a.task_id IS NULL AND s.manifest_key IS NOT NULL AND s.verify_error IS NULL
  AND (%(since_days)s::int IS NULL OR s.submitted_at >= now() - make_interval(days => %(since_days)s::int))
ORDER BY s.submitted_at, s.task_id
"""


@dataclass
class ReconcileResult:
    """``pending`` rows looked at; ``registered`` now; ``skipped`` (no archive, invalid or
    already known); ``missing`` (no object at the key); ``errors`` (S3 or DB failures)."""

    pending: int = 0
    registered: int = 0
    skipped: int = 0
    missing: int = 0
    errors: int = 0

    def as_dict(self) -> dict[str, int]:
        return asdict(self)


async def reconcile(pool: Any, s3: Any, *, since_days: int | None = None,
                    wacz_hash_max_bytes: int = HASH_MAX_BYTES_DEFAULT,
                    trusted_roots: str | None = None) -> ReconcileResult:
    """One reconcile pass. ``since_days`` (positive int or None = all time) limits by
    ``submitted_at``. Raises ``ValueError`` for a non-positive ``since_days``.

    Pending rows are taken in chunks of ``CHUNK`` (in the pending order); a chunk's manifests
    are read concurrently (≤ ``READ_CONCURRENCY``), then the found ones admitted together in one
    transaction (``admit_many``: a failing row is retried alone, so it never keeps the others
    out — the outcome per capture is that of one transaction each).
    """
    if since_days is not None and since_days < 1:
        raise ValueError("since_days must be a positive number of days")
    async with pool.connection() as conn:
        rows = await (await conn.execute(PENDING_SQL, {"since_days": since_days})).fetchall()
    out = ReconcileResult(pending=len(rows))
    for start in range(0, len(rows), CHUNK):
        chunk = rows[start:start + CHUNK]
        manifests = await fetch_manifests(s3, [row["manifest_key"] for row in chunk])
        found: list[tuple[dict, CaptureReport]] = []
        for row, manifest in zip(chunk, manifests):
            key = row["manifest_key"]
            if isinstance(manifest, ManifestInvalid):
                log.warning("manifest does not conform; skipped", extra={"key": key, "error": str(manifest)})
                out.skipped += 1
            elif isinstance(manifest, Exception):  # S3 down: try again next pass
                log.warning("could not read manifest",
                            extra={"key": key, "error": f"{type(manifest).__name__}: {manifest}"})
                out.errors += 1
            elif manifest is None:
                log.warning("Manifest is not where the capture reported writing it",
                            extra={"taskId": str(row["task_id"]), "key": key})
                out.missing += 1
            elif (reason := disagreement(manifest, row["task_id"], row.get("manifest_summary"))) is not None:
                log.warning("manifest disagrees with the capture answer; not admitted",
                            extra={"taskId": str(row["task_id"]), "key": key, "reason": reason})
                await _record(pool, row["task_id"], reason)
                out.skipped += 1
            else:
                found.append((row, manifest))
        indexed: dict = {}  # WACZ location → check: the digests admission records (decision 181)
        found = await _checked(pool, s3, found, out, wacz_hash_max_bytes, trusted_roots, indexed)
        await _admit_found(pool, found, out, indexed)
    log.info("Reconcile complete", extra=out.as_dict())
    return out


async def _record(pool: Any, task_id: Any, reason: str) -> None:
    """Keep a refusal (``verify_error``) so later passes leave the submission alone."""
    async with pool.connection() as conn:
        await record_disagreement(conn, task_id, reason)


async def _checked(pool: Any, s3: Any, found: list[tuple[dict, CaptureReport]], out: ReconcileResult,
                   hash_max_bytes: int, trusted_roots: str | None,
                   indexed: dict | None = None) -> list[tuple[dict, CaptureReport, Finding]]:
    """``found`` with each archive's WACZ check (``admission.check_archives``); a capture whose
    check could not decide (S3 down) is counted in ``errors`` and left for the next pass; a
    signed WACZ that does not verify is refused (``verify.refuse_archive``) and counted skipped."""
    checks = await check_archives(s3, [m for _, m in found], hash_max_bytes, trusted_roots, indexed=indexed)
    kept: list[tuple[dict, CaptureReport, Finding]] = []
    for (row, manifest), check in zip(found, checks):
        if isinstance(check, Exception):
            log.warning("could not check WACZ", extra={"key": row["manifest_key"], "error": f"{type(check).__name__}: {check}"})
            out.errors += 1
        elif check.refusal is not None:
            async with pool.connection() as conn, conn.transaction():
                await refuse_archive(conn, row["task_id"], refusal_reason(check.refusal))
            out.skipped += 1
        else:
            kept.append((row, manifest, check))
    return kept


async def _admit_found(pool: Any, found: list[tuple[dict, CaptureReport, Finding]], out: ReconcileResult,
                       indexed: dict | None = None) -> None:
    """Admit one chunk's manifests (each with its submission's organization and submitter) in
    one transaction; counts into ``out``."""
    if not found:
        return
    outcomes: list[Any] = []
    try:
        async with pool.connection() as conn, conn.transaction():
            # admit_many takes one organization/submitter; a chunk holds few distinct pairs
            groups: dict[tuple[str, str | None], list[int]] = {}
            for i, (row, _, _) in enumerate(found):
                groups.setdefault((row["org_id"], row["submitted_by"]), []).append(i)
            outcomes = [None] * len(found)
            for (org_id, submitted_by), idx in groups.items():
                got = await admit_many(conn, [found[i][1] for i in idx], org_id=org_id, submitted_by=submitted_by,
                                       problems=[found[i][2].problem for i in idx],
                                       signatures=[found[i][2].signature for i in idx], indexed=indexed)
                for i, outcome in zip(idx, got):
                    outcomes[i] = outcome
            # a page its failed crawl left waiting for this archive is captured now (issue 24 item 5)
            await promote_admitted(conn, [str(found[i][0]["task_id"]) for i, o in enumerate(outcomes)
                                          if not isinstance(o, Exception) and o.outcome == "registered"])
    except Exception as exc:  # noqa: BLE001 - the chunk's transaction did not commit
        outcomes = [exc] * len(found)
    for (row, _, _), admitted in zip(found, outcomes):
        if isinstance(admitted, Exception):
            log.warning("could not register archive",
                        extra={"key": row["manifest_key"], "error": f"{type(admitted).__name__}: {admitted}"})
            out.errors += 1
        elif admitted.outcome == "registered":
            out.registered += 1
        else:
            out.skipped += 1


async def run_periodically(services: Any) -> None:
    """Reconcile every ``settings.reconcile_interval_s`` seconds over the last
    ``settings.reconcile_since_days`` days, until cancelled. Failures are logged, never raised."""
    settings = services.settings
    while True:
        try:
            if services.s3 is not None:
                await reconcile(services.pool, services.s3, since_days=settings.reconcile_since_days,
                                wacz_hash_max_bytes=getattr(settings, "wacz_hash_max_bytes", HASH_MAX_BYTES_DEFAULT),
                                trusted_roots=getattr(settings, "signing_trusted_roots", None))
        except asyncio.CancelledError:
            raise
        except Exception:  # noqa: BLE001
            log.exception("Scheduled reconcile failed")
        await asyncio.sleep(settings.reconcile_interval_s)
