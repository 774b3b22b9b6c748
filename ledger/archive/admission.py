"""Admission of archives from manifests, with their OpenFGA tuples queued in the outbox.

:func:`admit_archive` inserts one ``archives`` row (``ON CONFLICT (bucket, object_key) DO
NOTHING``) and, only when a row was inserted, one ``fga_outbox`` row with the archive's tuples,
on the caller's connection and transaction (reference/ledger.md §9.3).

:func:`admit_level` is the fast path of a level report: for every result with a ``taskId`` and
a ``manifestLocation`` (failed ones too) it reads the manifest at exactly that key of the
configured bucket and admits them together (:func:`admit_many`). One page's failure never fails
the report: a failing batch is retried page by page, each in its own savepoint, and errors are
logged and counted.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from typing import Any, Literal

from psycopg.types.json import Jsonb

from ledger.archive.manifest import CaptureReport, ManifestInvalid, manifest_key, read_manifest
from ledger.archive.conditional import record_validators
from ledger.archive.digests import record_digests
from ledger.archive.signature import UNSIGNED, SignatureCheck
from ledger.archive.wacz_check import HASH_MAX_BYTES_DEFAULT, WaczCheck, check_many
from ledger.s3 import ObjectTooLarge, parse_location

log = logging.getLogger("waggle.archive")

MANIFEST_MAX_BYTES = 4 * 1024 * 1024  # a manifest is a few KB; anything bigger is not one
READ_CONCURRENCY = 8


@dataclass(frozen=True)
class Admitted:
    """Outcome of :func:`admit_archive`: ``registered`` (with ``archive_id``), ``already-known``
    (the object is in the ledger; nothing queued) or ``no-archive`` (failed capture / no WACZ)."""

    outcome: Literal["registered", "already-known", "no-archive"]
    archive_id: str | None = None


@dataclass(frozen=True)
class Finding:
    """The WACZ check of one capture's archive, as admission uses it: ``problem`` (None =
    complete; else stored as ``wacz_problem``), ``signature`` (what the ledger found of its
    wacz-auth signature) and ``refusal`` (a signed WACZ that does not verify: never admitted)."""

    problem: str | None = None
    signature: SignatureCheck = UNSIGNED
    refusal: str | None = None


def _signature_columns(report: CaptureReport, signature: SignatureCheck | None) -> dict[str, Any]:
    """``signed`` / ``signature_domain`` / ``signature_verified`` of an archive row: the ledger's
    own finding when it checked the WACZ; else the report's ``signature`` (verified unknown)."""
    if signature is not None and signature.signed:
        return {"signed": True, "signature_domain": signature.domain, "signature_verified": signature.verified}
    if signature is not None and report.signature is None:
        return {"signed": None, "signature_domain": None, "signature_verified": None}
    if signature is not None:  # the report says signed but the WACZ carries no signature
        return {"signed": False, "signature_domain": None, "signature_verified": False}
    return {"signed": report.signature.signed if report.signature else None,
            "signature_domain": report.signature.domain if report.signature else None, "signature_verified": None}


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


async def admit_archive(conn: Any, report: CaptureReport, *, org_id: str, submitted_by: str | None,
                        problem: str | None = None, signature: SignatureCheck | None = None) -> Admitted:
    """Insert the archive of ``report`` and queue its tuples, on ``conn``'s transaction.

    Row: bucket/key from the report's own ``artifacts.wacz`` location; ``captured_at`` =
    BrowserHive's timestamp (ms precision, the listing cursor's unit); ``wacz_complete`` and
    ``signed`` three-valued (NULL written explicitly when absent). ``problem`` (the ledger's
    own WACZ check, ``ledger.archive.wacz_check``) forces ``wacz_complete`` false and is stored
    as ``wacz_problem``. ``signature``: the ledger's check of its wacz-auth signature (columns
    ``signed``, ``signature_domain``, ``signature_verified``; :func:`_signature_columns`).
    Raises ``ValueError`` when the WACZ location is not ``s3://bucket/key``.
    """
    if not report.has_archive:
        log.warning("capture produced no archive; not adding to the ledger",
                    extra={"taskId": report.task_id, "status": report.status})
        return Admitted("no-archive")
    bucket, key = parse_location(report.artifacts.wacz or "")
    comp = report.completeness_row()
    sig = _signature_columns(report, signature)
    row = await (await conn.execute(
        """
        INSERT INTO archives (task_id, correlation_id, bucket, object_key, source_url, labels,
                              wacz_complete, signed, captured_at, wacz_problem, missing_body_urls,
                              missing_body_count, truncated_urls, incomplete_reason,
                              signature_domain, signature_verified)
        VALUES (%s, %s, %s, %s, %s, %s, %s, %s, date_trunc('milliseconds', %s::timestamptz), %s, %s, %s, %s, %s,
                %s, %s)
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
            _complete(report, problem),
            sig["signed"],
            report.timestamp,
            problem,
            comp["missing_body_urls"],
            comp["missing_body_count"],
            comp["truncated_urls"],
            comp["incomplete_reason"],
            sig["signature_domain"],
            sig["signature_verified"],
        ),
    )).fetchone()
    if row is None:
        return Admitted("already-known")
    archive_id = str(row["id"] if isinstance(row, dict) else row[0])
    payload = {"writes": archive_tuples(archive_id, report.task_id, org_id, submitted_by)}
    await conn.execute("INSERT INTO fga_outbox (payload) VALUES (%s)", (Jsonb(payload),))
    log.info("archive registered", extra={"archiveId": archive_id, "taskId": report.task_id})
    return Admitted("registered", archive_id)


_BATCH_ARCHIVES_SQL = """
INSERT INTO archives (task_id, correlation_id, bucket, object_key, source_url, labels,
                      wacz_complete, signed, captured_at, wacz_problem, missing_body_urls, missing_body_count,
                      truncated_urls, incomplete_reason, signature_domain, signature_verified)
SELECT v.task_id, v.correlation_id, v.bucket, v.object_key, v.source_url, v.labels,
       v.wacz_complete, v.signed, date_trunc('milliseconds', v.captured_at), v.wacz_problem,
       v.missing_body_urls, v.missing_body_count, v.truncated_urls, v.incomplete_reason,
       v.signature_domain, v.signature_verified
FROM jsonb_to_recordset(%s::jsonb) AS v(n int, task_id uuid, correlation_id text, bucket text,
     object_key text, source_url text, labels text[], wacz_complete boolean, signed boolean,
     captured_at timestamptz, wacz_problem text, missing_body_urls text[], missing_body_count int,
     truncated_urls text[], incomplete_reason text, signature_domain text, signature_verified boolean)
ORDER BY v.n
ON CONFLICT (bucket, object_key) DO NOTHING
RETURNING id, bucket, object_key
"""


def _complete(report: CaptureReport, problem: str | None) -> bool | None:
    """``archives.wacz_complete``: false when the ledger's WACZ check found a problem, else the
    manifest's completeness (false when it names a URL without a body; NULL when absent)."""
    if problem is not None:
        return False
    return report.completeness_row()["wacz_complete"]


async def admit_many(conn: Any, reports: list[CaptureReport], *, org_id: str,
                     submitted_by: str | None, problems: list[str | None] | None = None,
                     signatures: list[SignatureCheck | None] | None = None,
                     indexed: dict[str, WaczCheck] | None = None) -> list[Admitted | Exception]:
    """:func:`admit_archive` for many reports at once, on ``conn``'s transaction: one INSERT
    into ``archives`` and one into ``fga_outbox`` for the lot, in a savepoint. Returns one
    outcome per report, in order: an :class:`Admitted`, or the exception that kept that report
    out (its row is not written; the others are). Same rows, tuples and outcomes as calling
    :func:`admit_archive` report by report (two reports of one WACZ object: the first is
    ``registered``, the second ``already-known``). When the batch statement fails, every report
    is retried alone in its own savepoint, so one bad row never keeps the others out.
    ``problems`` (aligned with ``reports``): the WACZ check's finding per report, if any;
    ``signatures`` (aligned): the ledger's check of each WACZ's signature, if it ran.
    ``indexed`` (WACZ location → check, :func:`check_archives`): the payload digests of each
    registered archive go into the organization's digest index in the same savepoint.
    """
    out: list[Admitted | Exception | None] = [None] * len(reports)
    problems = problems or [None] * len(reports)
    signatures = signatures or [None] * len(reports)
    batch: list[tuple[int, CaptureReport, str, str]] = []
    for i, report in enumerate(reports):
        if not report.has_archive:
            log.warning("capture produced no archive; not adding to the ledger",
                        extra={"taskId": report.task_id, "status": report.status})
            out[i] = Admitted("no-archive")
            continue
        try:
            bucket, key = parse_location(report.artifacts.wacz or "")
        except ValueError as exc:
            out[i] = exc
            continue
        batch.append((i, report, bucket, key))
    if not batch:
        return out  # type: ignore[return-value]
    rows = [{
        "n": n, "task_id": r.task_id, "correlation_id": r.correlation_id or None, "bucket": bucket,
        "object_key": key, "source_url": r.url, "labels": list(r.labels),
        **_signature_columns(r, signatures[i]), "captured_at": r.timestamp.isoformat(),
        **r.completeness_row(),
        "wacz_complete": _complete(r, problems[i]), "wacz_problem": problems[i],
    } for n, (i, r, bucket, key) in enumerate(batch)]
    try:
        async with conn.transaction():
            cur = await conn.execute(_BATCH_ARCHIVES_SQL, (Jsonb(rows),))
            ids = {(row["bucket"], row["object_key"]): str(row["id"]) for row in await cur.fetchall()}
            payloads: list[Jsonb] = []
            claimed: set[tuple[str, str]] = set()
            for i, report, bucket, key in batch:
                archive_id = ids.get((bucket, key))
                if archive_id is None or (bucket, key) in claimed:
                    out[i] = Admitted("already-known")
                    continue
                claimed.add((bucket, key))
                out[i] = Admitted("registered", archive_id)
                if indexed and (check := indexed.get(report.artifacts.wacz or "")) is not None:
                    await record_digests(conn, org_id, archive_id, check.digests, check.bytes_saved)
                    await record_validators(conn, org_id, archive_id, check.validators)  # decision 331
                payloads.append(Jsonb({"writes": archive_tuples(archive_id, report.task_id, org_id, submitted_by)}))
            if payloads:
                await conn.execute(
                    "INSERT INTO fga_outbox (payload) SELECT p FROM unnest(%s::jsonb[]) WITH ORDINALITY AS v(p, n)"
                    " ORDER BY v.n", (payloads,))
    except Exception as exc:  # noqa: BLE001 - one bad row: retry each alone to find it
        log.warning("batch admission failed; admitting one by one", extra={"error": f"{type(exc).__name__}: {exc}"})
        for i, report, _, _ in batch:
            try:
                async with conn.transaction():
                    out[i] = await admit_archive(conn, report, org_id=org_id, submitted_by=submitted_by,
                                                 problem=problems[i], signature=signatures[i])
                    check = (indexed or {}).get(report.artifacts.wacz or "")
                    if check is not None and out[i].archive_id:  # type: ignore[union-attr]
                        await record_digests(conn, org_id, out[i].archive_id, check.digests,  # type: ignore[union-attr]
                                             check.bytes_saved)
                        await record_validators(conn, org_id, out[i].archive_id, check.validators)  # type: ignore[union-attr]
            except Exception as one:  # noqa: BLE001
                out[i] = one
        return out  # type: ignore[return-value]
    for i, report, _, _ in batch:
        admitted = out[i]
        if isinstance(admitted, Admitted) and admitted.outcome == "registered":
            log.info("archive registered", extra={"archiveId": admitted.archive_id, "taskId": report.task_id})
    return out  # type: ignore[return-value]


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


async def fetch_manifests(s3: Any, keys: list[str]) -> list[CaptureReport | None | Exception]:
    """:func:`fetch_manifest` for each key, ≤ ``READ_CONCURRENCY`` GETs in flight; one outcome
    per key, in order: the manifest, None (no such object) or the exception that reading or
    validating it raised (``ManifestInvalid``, ``S3Unavailable``, …) — never raises for one key."""
    gate = asyncio.Semaphore(READ_CONCURRENCY)

    async def read(key: str) -> CaptureReport | None | Exception:
        async with gate:
            try:
                return await fetch_manifest(s3, key)
            except Exception as exc:  # noqa: BLE001 - the caller counts it per key
                return exc

    return list(await asyncio.gather(*(read(key) for key in keys)))


async def check_archives(s3: Any, manifests: list[CaptureReport],
                         hash_max_bytes: int = HASH_MAX_BYTES_DEFAULT,
                         trusted_roots: str | None = None, *,
                         indexed: dict[str, WaczCheck] | None = None) -> list[Finding | Exception]:
    """The WACZ check (``ledger.archive.wacz_check``, with the signature against
    ``trusted_roots``) of each manifest's archive, aligned with ``manifests``: a :class:`Finding`
    (empty when nothing is wrong or there is no archive), or the exception that kept the check
    from deciding (S3 down: the capture is left for the reconciler). ``indexed`` (optional,
    filled): WACZ location → its check, whose payload digests :func:`admit_many` records
    (``ledger.archive.digests``, decision 181)."""
    checks = await check_many(s3, [m.artifacts.wacz if m.has_archive else None for m in manifests],
                              hash_max_bytes=hash_max_bytes, trusted_roots=trusted_roots)
    out: list[Finding | Exception] = []
    for manifest, check in zip(manifests, checks):
        if indexed is not None and isinstance(check, WaczCheck):
            indexed[manifest.artifacts.wacz or ""] = check
        if isinstance(check, Exception):
            out.append(check)
        elif check is None:
            out.append(Finding())
        elif check.refusal is not None:
            log.warning("signed WACZ does not verify; not admitted",
                        extra={"taskId": manifest.task_id, "reason": check.refusal})
            out.append(Finding(check.problem, check.signature, check.refusal))
        else:
            if check.problem is not None:
                log.warning("WACZ is not complete; registered as incomplete",
                            extra={"taskId": manifest.task_id, "problem": check.problem})
            out.append(Finding(check.problem, check.signature))
    return out


async def admit_level(conn: Any, s3: Any, *, bucket: str, org_id: str, submitted_by: str | None,
                      results: list[dict], wacz_hash_max_bytes: int = HASH_MAX_BYTES_DEFAULT,
                      trusted_roots: str | None = None) -> LevelAdmission:
    """Fast path for one level report (``results`` as received, camelCase, ledger.md §6.9).

    Runs inside the caller's transaction. Manifests are read from the configured ``bucket`` at
    the reported key, concurrently (≤ 8), then admitted together (:func:`admit_many`: one
    savepoint, each page alone in its own when the batch fails).
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

    manifests = await fetch_manifests(s3, [key for _, _, key in todo])
    ready: list[tuple[int, dict, str, CaptureReport]] = []
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
        ready.append((index, result, key, manifest))
    indexed: dict[str, WaczCheck] = {}
    checks = await check_archives(s3, [m for _, _, _, m in ready], wacz_hash_max_bytes, trusted_roots,
                                  indexed=indexed)
    checked = [(r, c) for r, c in zip(ready, checks) if isinstance(c, Finding) and c.refusal is None]
    for (_, _, key, _), check in zip(ready, checks):
        if isinstance(check, Exception):
            log.warning("could not check this page's WACZ; reconcile will retry",
                        extra={"key": key, "error": f"{type(check).__name__}: {check}"})
            out.errors += 1
        elif check.refusal is not None:
            out.skipped += 1  # a signed WACZ that does not verify is never admitted
    ready = [r for r, _ in checked]  # a capture whose WACZ could not be checked waits for the reconciler
    outcomes = await admit_many(conn, [m for _, _, _, m in ready], org_id=org_id, submitted_by=submitted_by,
                                problems=[c.problem for _, c in checked],
                                signatures=[c.signature for _, c in checked], indexed=indexed)
    for ((index, result, key, manifest), finding), admitted in zip(checked, outcomes):
        problem = finding.problem
        if isinstance(admitted, Exception):
            log.warning("could not register this page; reconcile will retry",
                        extra={"key": key, "error": f"{type(admitted).__name__}: {admitted}"})
            out.errors += 1
            continue
        if admitted.outcome == "registered":
            out.registered += 1
            out.admitted_urls.append(result.get("url") or manifest.url)
        else:
            out.skipped += 1
        if manifest.has_archive and problem is None and result.get("status") == "failed":
            out.recovered.add(index)  # a broken WACZ does not turn a failed page into a capture
    return out
