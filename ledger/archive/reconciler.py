"""The reconciler: captures reported with a manifest key but not (yet) in ``archives``.

Pending = ``capture_submissions`` rows with ``manifest_key`` and no archive of that task id
(optionally submitted within the last N days). Each manifest is read again at exactly the
recorded key of the configured bucket and admitted with the submission's organization and
submitter, one transaction per capture (reference/ledger.md §9.5). It never lists the bucket
and never builds a key. Runs as ``waggle reconcile`` and periodically inside the service.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import asdict, dataclass
from typing import Any

from ledger.archive.admission import admit_archive, fetch_manifest
from ledger.archive.manifest import ManifestInvalid

log = logging.getLogger("waggle.reconcile")

PENDING_SQL = """
SELECT s.task_id, s.org_id, s.submitted_by, s.manifest_key
FROM capture_submissions s
LEFT JOIN archives a ON a.task_id = s.task_id
WHERE a.task_id IS NULL AND s.manifest_key IS NOT NULL
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


async def reconcile(pool: Any, s3: Any, *, since_days: int | None = None) -> ReconcileResult:
    """One reconcile pass. ``since_days`` (positive int or None = all time) limits by
    ``submitted_at``. Raises ``ValueError`` for a non-positive ``since_days``."""
    if since_days is not None and since_days < 1:
        raise ValueError("since_days must be a positive number of days")
    async with pool.connection() as conn:
        rows = await (await conn.execute(PENDING_SQL, {"since_days": since_days})).fetchall()
    out = ReconcileResult(pending=len(rows))
    for row in rows:
        task_id, org_id, submitted_by, key = (row["task_id"], row["org_id"], row["submitted_by"], row["manifest_key"])
        try:
            manifest = await fetch_manifest(s3, key)
        except ManifestInvalid as exc:
            log.warning("manifest does not conform; skipped", extra={"key": key, "error": str(exc)})
            out.skipped += 1
            continue
        except Exception as exc:  # noqa: BLE001 - S3 down: try again next pass
            log.warning("could not read manifest", extra={"key": key, "error": f"{type(exc).__name__}: {exc}"})
            out.errors += 1
            continue
        if manifest is None:
            log.warning("Manifest is not where the capture reported writing it", extra={"taskId": str(task_id), "key": key})
            out.missing += 1
            continue
        try:
            async with pool.connection() as conn, conn.transaction():
                admitted = await admit_archive(conn, manifest, org_id=org_id, submitted_by=submitted_by)
        except Exception as exc:  # noqa: BLE001
            log.warning("could not register archive", extra={"key": key, "error": f"{type(exc).__name__}: {exc}"})
            out.errors += 1
            continue
        if admitted.outcome == "registered":
            out.registered += 1
        else:
            out.skipped += 1
    log.info("Reconcile complete", extra=out.as_dict())
    return out


async def run_periodically(services: Any) -> None:
    """Reconcile every ``settings.reconcile_interval_s`` seconds over the last
    ``settings.reconcile_since_days`` days, until cancelled. Failures are logged, never raised."""
    settings = services.settings
    while True:
        try:
            if services.s3 is not None:
                await reconcile(services.pool, services.s3, since_days=settings.reconcile_since_days)
        except asyncio.CancelledError:
            raise
        except Exception:  # noqa: BLE001
            log.exception("Scheduled reconcile failed")
        await asyncio.sleep(settings.reconcile_interval_s)
