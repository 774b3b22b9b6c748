"""Step 2 of a level report (ledger.md §9.2): the ``capture_submissions`` row of each captured
result, so its archive can be admitted once its manifest is read. Shared by the level report
(``ledger.crawl.levels``) and a crawl failed before its report (``ledger.crawl.salvage``)."""

from __future__ import annotations

import json
import uuid
from typing import Any

from ledger.archive.manifest import manifest_key


def manifest_outcome(result: dict, bucket: str | None) -> tuple[str | None, str | None]:
    """``(manifest_key, manifest_error)`` for a result with a taskId (ledger.md §9.2); the rule
    itself is ``ledger.archive.manifest.manifest_key`` (one place for fast path and ledger)."""
    return manifest_key(result.get("manifestLocation"), result.get("manifestError"), bucket or "")


async def attribute_tasks(conn: Any, crawl: dict, results: list[dict], bucket: str | None) -> list[uuid.UUID]:
    """Step 2 in one statement: a ``capture_submissions`` row for every result with a taskId
    (``ON CONFLICT (task_id) DO NOTHING``; within one report the first result of a task wins),
    with the flow's ``manifestSummary`` when given. Returns the task ids with a manifest key
    (what admission will read after the answer)."""
    rows: dict[uuid.UUID, tuple] = {}
    for r in results:
        if not r.get("taskId"):
            continue
        task = uuid.UUID(r["taskId"])
        if task in rows:
            continue
        manifest_key, manifest_error = manifest_outcome(r, bucket)
        summary = r.get("manifestSummary")
        rows[task] = (str(task), r.get("correlationId") or str(crawl["id"]), manifest_key, manifest_error,
                      json.dumps(summary) if summary is not None else None)
    if not rows:
        return []
    cols = list(zip(*rows.values()))
    await conn.execute(
        "INSERT INTO capture_submissions (task_id, correlation_id, org_id, submitted_by, manifest_key, manifest_error,"
        " manifest_summary)"
        " SELECT v.task_id, v.correlation_id, %s, %s, v.manifest_key, v.manifest_error, v.summary"
        " FROM unnest(%s::uuid[], %s::text[], %s::text[], %s::text[], %s::jsonb[])"
        " AS v(task_id, correlation_id, manifest_key, manifest_error, summary)"
        " ON CONFLICT (task_id) DO NOTHING",
        (crawl["org_id"], crawl["requested_by"], *[list(c) for c in cols]),
    )
    return [t for t, (_, _, key, _, _) in rows.items() if key is not None]
