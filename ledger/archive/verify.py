"""Archive admission after the level report has been answered (issue 14, docs/internals.md
"Level report v2").

The level report records one ``capture_submissions`` row per captured task (with the
``manifestSummary`` the flow relayed, when it did) and answers without touching S3. Admission
then runs here, after the answer: :func:`verify_level` reads each task's manifest at its
recorded key, checks it against the submission (:func:`disagreement`), checks the WACZ of the
ones that agree (``admission.check_archives``, issue 13), admits them in one batch
(``admit_many``) and recovers pages reported ``failed`` whose manifest shows
an archive. A manifest that disagrees is never admitted: the reason is logged and stored in
``capture_submissions.verify_error`` (the reconciler then leaves the row alone). Whatever this
pass does not finish (S3 down, ledger stopped) stays pending for the reconciler, which applies
the same check. Every step is idempotent, so two ledger replicas may run it for the same tasks.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import asdict, dataclass
from typing import Any

from ledger.archive.admission import Admitted, Finding, admit_many, check_archives, fetch_manifests
from ledger.archive.wacz_check import HASH_MAX_BYTES_DEFAULT
from ledger.archive.manifest import CaptureReport, ManifestInvalid

log = logging.getLogger("waggle.archive")

VERIFY_ERROR_MAX_CHARS = 500


@dataclass
class Verified:
    """Counts of one :func:`verify_level` pass."""

    registered: int = 0
    skipped: int = 0
    missing: int = 0
    errors: int = 0
    disagreed: int = 0
    recovered: int = 0

    def as_dict(self) -> dict[str, int]:
        return asdict(self)


def disagreement(manifest: CaptureReport, task_id: str, summary: dict | None) -> str | None:
    """Why ``manifest`` may not be admitted for submission ``task_id`` with the flow's
    ``summary`` (``{status, wacz?}`` or None for an old-shape report), or None when it agrees.

    The manifest's ``taskId`` must be the submission's; with a summary, its ``status`` and
    ``artifacts.wacz`` must be the summary's (the manifest is the very report the capture
    answered with, contracts.md §B.3, so any difference means it changed or is another's)."""
    if str(uuid.UUID(manifest.task_id)) != str(uuid.UUID(str(task_id))):
        return f"the manifest names task {manifest.task_id}, not {task_id}"
    if summary is None:
        return None
    if manifest.status != summary.get("status"):
        return f"the manifest says status {manifest.status}, the capture answer said {summary.get('status')}"
    if (manifest.artifacts.wacz or None) != (summary.get("wacz") or None):
        return (f"the manifest names WACZ {manifest.artifacts.wacz!r}, the capture answer"
                f" named {summary.get('wacz')!r}")
    return None


async def record_disagreement(conn: Any, task_id: Any, reason: str) -> None:
    """Store why a task's manifest was refused (``capture_submissions.verify_error``)."""
    await conn.execute("UPDATE capture_submissions SET verify_error = %s WHERE task_id = %s",
                       (reason[:VERIFY_ERROR_MAX_CHARS], task_id))


REFUSED_PREFIX = "archive not admitted: "


def refusal_reason(refusal: str) -> str:
    """The reason shown for a WACZ the ledger refused (``verify_error`` and the page's reason)."""
    return (REFUSED_PREFIX + refusal)[:VERIFY_ERROR_MAX_CHARS]


async def refuse_archive(conn: Any, task_id: Any, reason: str) -> None:
    """A signed WACZ that does not verify: keep ``reason`` in ``verify_error`` (the reconciler
    leaves the submission alone) and show it on the crawl's page, which becomes ``failed``
    (class ``permanent``: recapturing does not fix a signer) and leaves ``pages_captured``."""
    await record_disagreement(conn, task_id, reason)
    rows = await (await conn.execute(
        """
        WITH old AS (SELECT id, crawl_id, state FROM crawl_pages WHERE task_id = %s FOR UPDATE)
        UPDATE crawl_pages p SET state = 'failed', failure_class = 'permanent', skip_reason = %s
        FROM old WHERE p.id = old.id RETURNING p.crawl_id, old.state AS was
        """, (str(task_id), reason))).fetchall()
    for row in rows:
        if row["was"] == "captured":
            await conn.execute("UPDATE crawls SET pages_captured = GREATEST(pages_captured - 1, 0) WHERE id = %s",
                               (row["crawl_id"],))


_SUBMISSIONS_SQL = """
SELECT s.task_id, s.manifest_key, s.manifest_summary, s.org_id, s.submitted_by
FROM capture_submissions s
LEFT JOIN archives a ON a.task_id = s.task_id
WHERE s.task_id = ANY(%s::uuid[]) AND a.task_id IS NULL
  AND s.manifest_key IS NOT NULL AND s.verify_error IS NULL
"""


async def verify_level(services: Any, crawl_id: Any, depth: int, failed_tasks: set[str],
                       task_ids: list[str]) -> Verified:
    """Read, check and admit the manifests of ``task_ids`` (one level report's tasks) and
    recover the pages of ``failed_tasks`` whose manifest shows an archive. Never raises:
    failures are logged and left to the reconciler."""
    out = Verified()
    if services.s3 is None or not task_ids:
        return out
    try:
        await _verify(services, crawl_id, depth, failed_tasks, task_ids, out)
    except Exception:  # noqa: BLE001 - the reconciler retries whatever is left pending
        log.exception("post-answer admission failed; the reconciler will retry",
                      extra={"crawlId": str(crawl_id), "depth": depth})
    log.info("level admission done", extra={"crawlId": str(crawl_id), "depth": depth, **out.as_dict()})
    return out


async def _verify(services: Any, crawl_id: Any, depth: int, failed_tasks: set[str],
                  task_ids: list[str], out: Verified) -> None:
    async with services.pool.connection() as conn:
        rows = await (await conn.execute(_SUBMISSIONS_SQL, (task_ids,))).fetchall()
    manifests = await fetch_manifests(services.s3, [r["manifest_key"] for r in rows])
    ready: list[tuple[dict, CaptureReport]] = []
    refused: list[tuple[Any, str]] = []
    for row, manifest in zip(rows, manifests):
        key = row["manifest_key"]
        if manifest is None:
            log.debug("manifest not there yet; reconcile will retry", extra={"key": key})
            out.missing += 1
        elif isinstance(manifest, ManifestInvalid):
            log.warning("manifest does not conform; skipped", extra={"key": key, "error": str(manifest)})
            out.skipped += 1
        elif isinstance(manifest, Exception):
            log.warning("could not read this page's manifest; reconcile will retry",
                        extra={"key": key, "error": f"{type(manifest).__name__}: {manifest}"})
            out.errors += 1
        elif (reason := disagreement(manifest, row["task_id"], row["manifest_summary"])) is not None:
            log.warning("manifest disagrees with the capture answer; not admitted",
                        extra={"taskId": str(row["task_id"]), "key": key, "reason": reason})
            refused.append((row["task_id"], reason))
            out.disagreed += 1
        else:
            ready.append((row, manifest))
    # the WACZ check (issue 13) reads S3 too: done before the transaction opens
    indexed: dict = {}
    checks = await check_archives(services.s3, [m for _, m in ready],
                                  getattr(services.settings, "wacz_hash_max_bytes", HASH_MAX_BYTES_DEFAULT),
                                  getattr(services.settings, "signing_trusted_roots", None), indexed=indexed)
    checked: list[tuple[dict, CaptureReport, Finding]] = []
    signature_refusals: list[tuple[Any, str]] = []
    for (row, manifest), check in zip(ready, checks):
        if isinstance(check, Exception):  # the check could not decide: the reconciler retries
            log.warning("could not check this page's WACZ; reconcile will retry",
                        extra={"key": row["manifest_key"], "error": f"{type(check).__name__}: {check}"})
            out.errors += 1
        elif check.refusal is not None:  # a signed WACZ that does not verify is never admitted
            signature_refusals.append((row["task_id"], refusal_reason(check.refusal)))
            out.disagreed += 1
        else:
            checked.append((row, manifest, check))
    async with services.pool.connection() as conn, conn.transaction():
        for task_id, reason in refused:
            await record_disagreement(conn, task_id, reason)
        for task_id, reason in signature_refusals:
            await refuse_archive(conn, task_id, reason)
        recover: list[str] = []
        for (row, manifest, finding), admitted in zip(checked, await _admit(conn, checked, indexed)):
            problem = finding.problem
            if isinstance(admitted, Exception):
                log.warning("could not register this page; reconcile will retry",
                            extra={"key": row["manifest_key"], "error": f"{type(admitted).__name__}: {admitted}"})
                out.errors += 1
                continue
            if admitted.outcome == "registered":
                out.registered += 1
            else:
                out.skipped += 1
            if manifest.has_archive and problem is None and str(row["task_id"]) in failed_tasks:
                recover.append(str(row["task_id"]))  # a broken WACZ does not turn a failed page into a capture
        out.recovered = await _recover(conn, crawl_id, depth, recover)


async def _admit(conn: Any, ready: list[tuple[dict, CaptureReport, Finding]],
                 indexed: dict | None = None) -> list[Admitted | Exception]:
    """``admit_many`` (with each WACZ check's problem) per (organization, submitter) of the
    submissions; outcomes in order."""
    outcomes: list[Any] = [None] * len(ready)
    groups: dict[tuple[str, str | None], list[int]] = {}
    for i, (row, _, _) in enumerate(ready):
        groups.setdefault((row["org_id"], row["submitted_by"]), []).append(i)
    for (org_id, submitted_by), idx in groups.items():
        got = await admit_many(conn, [ready[i][1] for i in idx], org_id=org_id, submitted_by=submitted_by,
                               problems=[ready[i][2].problem for i in idx],
                               signatures=[ready[i][2].signature for i in idx], indexed=indexed)
        for i, outcome in zip(idx, got):
            outcomes[i] = outcome
    return outcomes


async def _recover(conn: Any, crawl_id: Any, depth: int, task_ids: list[str]) -> int:
    """Pages of level ``depth`` reported failed whose manifest shows an archive become
    ``captured`` (ledger.md §7.3 step 3), counted once into ``pages_captured``."""
    if not task_ids:
        return 0
    cur = await conn.execute(
        "UPDATE crawl_pages SET state = 'captured', skip_reason = NULL, failure_class = NULL"
        " WHERE crawl_id = %s AND depth = %s"
        " AND task_id = ANY(%s::text[]) AND state <> 'captured' RETURNING id", (crawl_id, depth, task_ids))
    n = len(await cur.fetchall())
    if n:
        await conn.execute("UPDATE crawls SET pages_captured = pages_captured + %s WHERE id = %s", (n, crawl_id))
        log.info("recovered captures the flow could not see: crawl %s depth %d: %d", crawl_id, depth, n)
    return n
