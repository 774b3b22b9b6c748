"""A crawl as one web archive: its admitted WACZ files as a multi-WACZ collection (issue 25,
docs/decisions/151-crawl-collection.md).

The answer is the JSON ReplayWeb.page (wabac.js ``MultiWACZ``, root source type ``json``) loads,
the form Browsertrix serves as ``replay.json``::

    {"profile": "multi-wacz-package", "title", "crawlId", "state", "running",
     "expiresIn": <s>, "expiresAt": <ISO 8601>,
     "resources": [{"name": "<archive id>.wacz", "path": <signed S3 GET>, "hash": "sha256:<hex>" | null,
                    "bytes": <int> | null, "crawlId", "archiveId", "url", "ts", "title", "httpStatus",
                    "contentType" (null: unknown), "complete", "reason"}],
     "pages": {"total", "inCollection", "missing"},
     "missing": [{"url", "depth", "why", "reason"}],  # the first MISSING_LISTED, seed first
     "missingCount": <int>}

Members are the archives of the crawl's pages (``crawl_pages.task_id`` → ``archives``) that the
caller may view (one batched ``authz.viewable``); each is signed for ``expiry_s`` seconds, so a
player whose URL expired asks again (wabac.js re-fetches the JSON on a 403) and gets fresh URLs.
``why`` of a missing page: ``failed``, ``skipped``, ``blocked``, ``not-captured-yet`` (a running crawl's
pending page), ``not-admitted-yet`` (captured, archive not yet admitted: the reconciler will),
``not-viewable`` (an archive this caller may not view). A member whose archive is incomplete
is in ``resources`` with ``complete: false`` and ``reason``.
"""

from __future__ import annotations

import asyncio
import uuid
from datetime import datetime, timedelta, timezone
from typing import Any
from urllib.parse import urlsplit

from ledger.archive.digests import referred_archives
from ledger.archive.facts import FACTS_COLUMNS, FACTS_JOIN, REVISIT_MIME
from ledger.archive.files import measure_missing
from ledger.archive.presign_many import presign_many
from ledger.crawl.pages import incomplete_reason

PROFILE = "multi-wacz-package"
MEASURE_INLINE = 200  # members measured within one answer; more go on in the background
_measuring: dict[str, asyncio.Task] = {}  # crawl id → its background measuring (one at a time)
UUID_TEXT = "^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$"
MISSING_LISTED = 1000

_MEMBERS = """
SELECT p.id AS page_id, p.url, p.final_url, p.depth, p.state, p.failure_class, p.skip_reason, p.task_id,
       a.id AS archive_id, a.bucket, a.object_key, a.captured_at, a.wacz_complete, a.wacz_problem,
       a.missing_body_count, a.truncated_urls, a.incomplete_reason, a.missing_body_urls,
       f.bytes, f.sha256, f.title, f.http_status, f.content_type, s.manifest_key, """ + FACTS_COLUMNS + """
FROM crawl_pages p
-- the task id as uuid (an index lookup; a text comparison would read every archive per page)
LEFT JOIN LATERAL (SELECT * FROM archives a WHERE a.task_id = (CASE WHEN p.task_id ~* '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$'
                   THEN p.task_id::uuid END) ORDER BY a.created_at LIMIT 1) a ON true
LEFT JOIN archive_files f ON f.archive_id = a.id
LEFT JOIN capture_submissions s ON s.task_id = a.task_id AND f.archive_id IS NULL""" + FACTS_JOIN + """
WHERE p.crawl_id = %s
ORDER BY p.depth, p.id
"""

# Archives of earlier crawls that hold the originals of this crawl's revisit records
# (ledger.archive.digests.referred_archives): members too, so every page of a recrawl replays.
_ORIGINALS = """
SELECT a.id AS archive_id, a.bucket, a.object_key, a.captured_at, a.wacz_complete, a.wacz_problem,
       a.missing_body_count, a.truncated_urls, a.incomplete_reason, a.missing_body_urls, a.source_url AS url,
       f.bytes, f.sha256, f.title, f.http_status, f.content_type, """ + FACTS_COLUMNS + """
FROM archives a LEFT JOIN archive_files f ON f.archive_id = a.id""" + FACTS_JOIN + """
WHERE a.id = ANY(%s::uuid[]) ORDER BY a.captured_at
"""


def _iso(value: datetime) -> str:
    return value.astimezone(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def title_of(crawl: dict) -> str:
    """``<first seed's host> <start date>`` — how people name a crawl (e.g. ``docs.python.org 2026-12-01``)."""
    host = urlsplit(crawl["seeds"][0]).hostname or crawl["seeds"][0]
    return f"{host} {crawl['started_at'].astimezone(timezone.utc).date().isoformat()}"


def _contents(row: dict, measured: dict) -> dict:
    """``title``, ``httpStatus``, ``contentType`` of a member: from admission (decision 341; a
    revisit's type is its original's), else as measured (decision 155), never ``warc/revisit``."""
    if row.get("facts_read"):
        return {"title": row["facts_title"], "httpStatus": row["facts_http_status"],
                "contentType": row["facts_content_type"]}
    ctype = measured["content_type"]
    return {"title": measured["title"], "httpStatus": measured["http_status"],
            "contentType": None if ctype == REVISIT_MIME else ctype}


def _missing(row: dict, running: bool) -> dict | None:
    """The missing-list entry of a page without a member, or None when it has one."""
    state = row["state"]
    if state == "failed":
        why, reason = "failed", row["skip_reason"] or row["failure_class"]
    elif state == "skipped":
        why, reason = "skipped", row["skip_reason"]
    elif state == "blocked":  # the host answered a challenge or block page (decision 231)
        why, reason = "blocked", row["skip_reason"] or "the host was blocked"
    elif state == "pending":
        why = "not-captured-yet" if running else "not-captured"
        reason = "waiting for its capture" if running else "the crawl ended before its capture"
    elif row["archive_id"] is None:
        why, reason = "not-admitted-yet", "captured; its archive is not admitted yet (the reconciler admits it)"
    else:
        return None
    return {"url": row["url"], "depth": row["depth"], "why": why, "reason": reason}


async def collection(services: Any, identity: Any, crawl_id: uuid.UUID, *, expiry_s: int,
                     with_rows: bool = False) -> dict | None:
    """The collection of crawl ``crawl_id`` as ``identity`` may see it, or None for no such crawl.
    The caller has already checked that the crawl is one of the identity's organizations'.
    ``with_rows`` adds ``_rows``: each member's ``archiveId``, ``bucket`` and ``object_key`` (for
    the combined download; never sent to a client)."""
    async with services.pool.connection() as conn:
        crawl = await (await conn.execute(
            "SELECT id, seeds, state, started_at, finished_at FROM crawls WHERE id = %s", (crawl_id,))).fetchone()
        if crawl is None:
            return None
        rows = await (await conn.execute(_MEMBERS, (crawl_id,))).fetchall()
    referred = await referred_archives(services.pool, str(crawl_id))
    originals: list[dict] = []
    if referred:
        async with services.pool.connection() as conn:
            originals = [{**r, "page_id": None, "depth": None, "final_url": None, "manifest_key": None} for r in await (await conn.execute(_ORIGINALS, (referred,))).fetchall()]
    for r in rows + originals:  # each id as text once (10,000 UUID.__str__ per use were a tenth of the answer)
        r["aid"] = None if r["archive_id"] is None else str(r["archive_id"])
    with_archive = [r for r in rows if r["aid"] is not None] + originals
    allowed = await services.authz.viewable(identity, [r["aid"] for r in with_archive]) \
        if with_archive else set()
    members = [r for r in with_archive if r["aid"] in allowed]
    unmeasured = [{**r, "url": r["final_url"] or r["url"]} for r in members if r["sha256"] is None]
    measured = await measure_missing(services.pool, services.s3, unmeasured[:MEASURE_INLINE]) if unmeasured else {}
    later = unmeasured[MEASURE_INLINE:]
    if later and str(crawl_id) not in _measuring:  # a bounded answer; its next ones carry the rest
        task = asyncio.get_running_loop().create_task(measure_missing(services.pool, services.s3, later))
        _measuring[str(crawl_id)] = task
        task.add_done_callback(lambda _t, key=str(crawl_id): _measuring.pop(key, None))
    running = crawl["state"] == "running"
    now = datetime.now(timezone.utc)
    resources, missing = [], []
    crawl_text = str(crawl_id)
    viewable_rows = members
    paths = dict(zip((r["aid"] for r in viewable_rows),
                     presign_many(services.s3, [(r["bucket"], r["object_key"]) for r in viewable_rows], expiry_s)))
    for r in rows + originals:
        original = r.get("page_id") is None
        entry = None if original else _missing(r, running)
        if entry is None and r["aid"] not in allowed:
            entry = {"url": r["url"], "depth": r["depth"], "why": "original-not-viewable" if original else "not-viewable",
                     "reason": "the archive holding the original of its revisit records is not shared with you"
                               if original else "its archive is not shared with you"}
        if entry is not None:
            missing.append(entry)
            continue
        aid = r["aid"]
        facts = measured.get(aid) or r
        size, sha = facts["bytes"], facts["sha256"]
        resources.append({
            "name": f"{aid}.wacz",
            "path": paths[aid],
            "hash": f"sha256:{sha}" if sha else None,
            "bytes": size,
            "crawlId": crawl_text,
            "archiveId": aid,
            "url": r["url"],
            "depth": r["depth"],
            "ts": _iso(r["captured_at"]),
            **_contents(r, facts),
            "complete": r["wacz_complete"],
            "reason": incomplete_reason(r),
            **({"role": "original"} if original else {}),  # an earlier crawl's, for this crawl's revisits
        })
    return {
        "profile": PROFILE,
        "title": title_of(crawl),
        "crawlId": str(crawl_id),
        "state": crawl["state"],
        "running": running,
        "expiresIn": expiry_s,
        "expiresAt": _iso(now + timedelta(seconds=expiry_s)),
        "resources": resources,
        "pages": {"total": len(rows), "inCollection": len(resources), "missing": len(missing)},
        "missing": missing[:MISSING_LISTED],
        "missingCount": len(missing),
        **({"_rows": [{"archiveId": r["aid"], "bucket": r["bucket"], "object_key": r["object_key"]}
                      for r in members]} if with_rows else {}),
    }


async def collection_bytes(pool: Any, crawl_id: uuid.UUID) -> dict:
    """``{"totalBytes", "bytesUnknown"}``: the summed size of the crawl's archives whose size is
    known (from admission, decision 341, or measured) and how many have none yet."""
    async with pool.connection() as conn:
        row = await (await conn.execute(
            "SELECT coalesce(sum(coalesce(f.bytes, x.wacz_bytes)), 0)::bigint AS total,"
            " count(*) FILTER (WHERE f.bytes IS NULL AND x.wacz_bytes IS NULL) AS unknown"
            " FROM crawl_pages p JOIN archives a ON a.task_id = (CASE WHEN p.task_id ~* %s THEN p.task_id::uuid END)"
            " LEFT JOIN archive_files f ON f.archive_id = a.id LEFT JOIN archive_facts x ON x.archive_id = a.id"
            " WHERE p.crawl_id = %s", (UUID_TEXT, crawl_id))).fetchone()
    return {"totalBytes": int(row["total"]), "bytesUnknown": int(row["unknown"])}
