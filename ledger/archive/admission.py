"""Admission of archives from manifests, with their OpenFGA tuples queued in the outbox.

:func:`admit_archive` inserts one ``archives`` row (``ON CONFLICT (bucket, object_key) DO
NOTHING``) and, only when a row was inserted, one ``fga_outbox`` row with the archive's tuples,
on the caller's connection and transaction (reference/ledger.md §9.3).

:func:`admit_level` is the fast path of a level report: for every result with a ``taskId`` and
a ``manifestLocation`` (failed ones too) it reads the manifest at exactly that key of the
configured bucket and admits it. One page's failure never fails the report: each page runs in
its own savepoint and errors are logged and counted.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from typing import Any, Literal

from psycopg.types.json import Jsonb

from ledger.archive.manifest import CaptureReport, ManifestInvalid, manifest_key, read_manifest
from ledger.s3 import ObjectTooLarge, S3Unavailable, parse_location

log = logging.getLogger("waggle.archive")

MANIFEST_MAX_BYTES = 4 * 1024 * 1024  # a manifest is a few KB; anything bigger is not one
READ_CONCURRENCY = 8


@dataclass(frozen=True)
class Admitted:
    """Outcome of :func:`admit_archive`: ``registered`` (with ``archive_id``), ``already-known``
    (the object is in the ledger; nothing queued) or ``no-archive`` (failed capture / no WACZ)."""

    outcome: Literal["registered", "already-known", "no-archive"]
    archive_id: str | None = None


@dataclass
class LevelAdmission:
    """Counts of one fast-path run. ``recovered``: indices of results reported ``failed``
    whose manifest shows an archive; ``admitted_urls``: page URLs registered now."""

    registered: int = 0
    skipped: int = 0
    missing: int = 0
    errors: int = 0
    recovered: set[int] = field(default_factory=set)
    admitted_urls: list[str] = field(default_factory=list)


def archive_tuples(archive_id: str, task_id: str, org_id: str, submitted_by: str | None) -> list[dict]:
    """The tuples that make an archive visible: job→archive, organization→job, owner→job."""
    writes = [
        {"user": f"capture_job:{task_id}", "relation": "parent", "object": f"archive:{archive_id}"},
        {"user": f"organization:{org_id}", "relation": "parent", "object": f"capture_job:{task_id}"},
    ]
    if submitted_by:
        writes.append({"user": f"user:{submitted_by}", "relation": "owner", "object": f"capture_job:{task_id}"})
    return writes


async def admit_archive(conn: Any, report: CaptureReport, *, org_id: str, submitted_by: str | None) -> Admitted:
    """Insert the archive of ``report`` and queue its tuples, on ``conn``'s transaction.

    Row: bucket/key from the report's own ``artifacts.wacz`` location; ``captured_at`` =
    BrowserHive's timestamp (ms precision, the listing cursor's unit); ``wacz_complete`` and
    ``signed`` three-valued (NULL written explicitly when absent). Raises ``ValueError`` when
    the WACZ location is not ``s3://bucket/key``.
    """
    if not report.has_archive:
        log.warning("capture produced no archive; not adding to the ledger",
                    extra={"taskId": report.task_id, "status": report.status})
        return Admitted("no-archive")
    bucket, key = parse_location(report.artifacts.wacz or "")
    row = await (await conn.execute(
        """
        INSERT INTO archives (task_id, correlation_id, bucket, object_key, source_url, labels,
                              wacz_complete, signed, captured_at)
        VALUES (%s, %s, %s, %s, %s, %s, %s, %s, date_trunc('milliseconds', %s::timestamptz))
        ON CONFLICT (bucket, object_key) DO NOTHING
        RETURNING id
        """,
        (
            report.task_id,
            report.correlation_id or None,
            bucket,
            key,
            report.url,
            list(report.labels),
            report.completeness.complete if report.completeness else None,
            report.signature.signed if report.signature else None,
            report.timestamp,
        ),
    )).fetchone()
    if row is None:
        return Admitted("already-known")
    archive_id = str(row["id"] if isinstance(row, dict) else row[0])
    payload = {"writes": archive_tuples(archive_id, report.task_id, org_id, submitted_by)}
    await conn.execute("INSERT INTO fga_outbox (payload) VALUES (%s)", (Jsonb(payload),))
    log.info("archive registered", extra={"archiveId": archive_id, "taskId": report.task_id})
    return Admitted("registered", archive_id)


async def fetch_manifest(s3: Any, key: str, *, bucket: str | None = None) -> CaptureReport | None:
    """The validated manifest at ``key`` (verbatim), or None when there is no such object.

    Raises :class:`ManifestInvalid` (bad JSON, too large, not conforming) and ``S3Unavailable``.
    """
    try:
        data = await s3.get_json(key, MANIFEST_MAX_BYTES, bucket=bucket)
    except ObjectTooLarge as exc:
        raise ManifestInvalid(f"manifest larger than {MANIFEST_MAX_BYTES} bytes: {key}") from exc
    except ValueError as exc:  # JSON / UTF-8
        raise ManifestInvalid(f"manifest is not JSON: {key}: {exc}") from exc
    if data is None:
        return None
    return read_manifest(data)


async def admit_level(conn: Any, s3: Any, *, bucket: str, org_id: str, submitted_by: str | None,
                      results: list[dict]) -> LevelAdmission:
    """Fast path for one level report (``results`` as received, camelCase, ledger.md §6.9).

    Runs inside the caller's transaction; each page in a savepoint. Manifests are read from
    the configured ``bucket`` at the reported key, concurrently (≤ 8), then admitted in order.
    A missing manifest counts as ``missing`` (left for the reconciler); an invalid one as
    ``skipped``; S3 not answering or a page's database error as ``errors`` (logged).
    """
    out = LevelAdmission()
    todo: list[tuple[int, dict, str]] = []
    for index, result in enumerate(results):
        if not isinstance(result, dict) or not result.get("taskId"):
            continue
        key, reason = manifest_key(result.get("manifestLocation"), result.get("manifestError"), bucket)
        if key is None:
            if result.get("manifestLocation"):
                log.warning("manifest location is not readable", extra={"taskId": result["taskId"], "reason": reason})
                out.skipped += 1
            continue
        todo.append((index, result, key))

    gate = asyncio.Semaphore(READ_CONCURRENCY)

    async def read(key: str) -> CaptureReport | None | BaseException:
        async with gate:
            try:
                return await fetch_manifest(s3, key)
            except (ManifestInvalid, S3Unavailable) as exc:
                return exc
            except Exception as exc:  # noqa: BLE001 - one page never fails the report
                return exc

    manifests = await asyncio.gather(*(read(key) for _, _, key in todo))
    for (index, result, key), manifest in zip(todo, manifests):
        if manifest is None:
            log.debug("manifest not there yet; reconcile will retry", extra={"key": key})
            out.missing += 1
            continue
        if isinstance(manifest, ManifestInvalid):
            log.warning("manifest does not conform; skipped", extra={"key": key, "error": str(manifest)})
            out.skipped += 1
            continue
        if isinstance(manifest, BaseException):
            log.warning("could not read this page's manifest; reconcile will retry",
                        extra={"key": key, "error": f"{type(manifest).__name__}: {manifest}"})
            out.errors += 1
            continue
        try:
            async with conn.transaction():  # savepoint: a failed page leaves the report's transaction usable
                admitted = await admit_archive(conn, manifest, org_id=org_id, submitted_by=submitted_by)
        except Exception as exc:  # noqa: BLE001
            log.warning("could not register this page; reconcile will retry",
                        extra={"key": key, "error": f"{type(exc).__name__}: {exc}"})
            out.errors += 1
            continue
        if admitted.outcome == "registered":
            out.registered += 1
            out.admitted_urls.append(result.get("url") or manifest.url)
        else:
            out.skipped += 1
        if manifest.has_archive and result.get("status") == "failed":
            out.recovered.add(index)
    return out
