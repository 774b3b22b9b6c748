"""Each admitted WACZ's size and SHA-256 (``archive_files``), for the collections that name it,
and what is in it: the page's title, HTTP status and content type, and its screenshot.

A multi-WACZ collection lists every member with its ``bytes`` and ``hash``
(``sha256:<hex>``, as a WACZ datapackage names its files). Neither is in the capture manifest,
so the ledger reads each object once from S3, in 1 MiB blocks through the hash (memory flat in
the object's size), and keeps the result: an archive is immutable once admitted. The bytes go
from S3 to the ledger's hash only, never to a caller.

In the same pass (the object is on local disk for the hash anyway) the page's facts are read:
``title`` from ``pages/pages.jsonl`` (the first page), ``http_status`` and ``content_type`` from
the CDXJ line of the page's URL (else the first line), and the screenshot the capture wrote
beside it (the manifest's ``artifacts.webp`` or ``.png``). A fact the archive does not hold is
None — said as unknown, never guessed.

:func:`measure_missing` is called by the collection for the members it has no row for (the first
answer after a capture pays for it, later ones read the table).
"""

from __future__ import annotations

import hashlib
import json
import logging
import tempfile
import zipfile
from collections.abc import Sequence
from typing import Any

import anyio
from botocore.exceptions import BotoCoreError, ClientError

from ledger.s3 import S3Unavailable, parse_location

log = logging.getLogger("waggle.archive")

BLOCK_BYTES = 1024 * 1024
CONCURRENCY = 8


def _page_facts(path: str, url: str | None) -> dict[str, Any]:
    """``title``, ``http_status``, ``content_type`` of the WACZ at ``path`` (None where unknown)."""
    facts: dict[str, Any] = {"title": None, "http_status": None, "content_type": None}
    try:
        zf = zipfile.ZipFile(path)
    except zipfile.BadZipFile:
        return facts
    with zf:
        names = set(zf.namelist())
        if "pages/pages.jsonl" in names:
            with zf.open("pages/pages.jsonl") as f:
                for line in f:
                    row = json.loads(line) if line.strip() else {}
                    if "url" in row:
                        facts["title"] = (row.get("title") or None) and str(row["title"])[:500]
                        url = url or row["url"]
                        break
        first = None
        for name in sorted(n for n in names if n.startswith("indexes/") and n.endswith((".cdx", ".cdxj"))):
            with zf.open(name) as f:
                for line in f:
                    parts = line.split(b" ", 2)
                    if len(parts) < 3:
                        continue
                    entry = json.loads(parts[2])
                    first = first or entry
                    if entry.get("url") == url:
                        first = entry
                        break
        if first is not None:
            status = str(first.get("status") or "")
            facts["http_status"] = int(status) if status.isdigit() else None
            facts["content_type"] = (first.get("mime") or None) and str(first["mime"])[:200]
    return facts


def _screenshot(s3: Any, manifest_key: str | None) -> tuple[str | None, str | None]:
    """(bucket, key) of the capture's screenshot as its manifest names it, or (None, None)."""
    if not manifest_key:
        return None, None
    try:
        body = s3.client.get_object(Bucket=s3.bucket, Key=manifest_key)["Body"]
        try:
            manifest = json.loads(body.read(1024 * 1024))
        finally:
            body.close()
        artifacts = manifest.get("artifacts") or {}
        location = artifacts.get("webp") or artifacts.get("png")
        return parse_location(location) if location else (None, None)
    except (ClientError, BotoCoreError, ValueError, AttributeError):
        return None, None


def _measure_sync(s3: Any, bucket: str, key: str, url: str | None = None,
                  manifest_key: str | None = None) -> dict[str, Any] | None:
    """``{bytes, sha256, title, http_status, content_type, screenshot_bucket, screenshot_key}``
    of one object, or None when it is not there."""
    try:
        resp = s3.client.get_object(Bucket=bucket, Key=key)
    except ClientError as exc:
        status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
        if status == 404:
            return None
        raise S3Unavailable(f"s3 answered {status} for {key!r}") from exc
    except BotoCoreError as exc:
        raise S3Unavailable(f"s3 at {s3.endpoint} did not answer: {exc}") from exc
    body, digest, size = resp["Body"], hashlib.sha256(), 0
    with tempfile.NamedTemporaryFile(prefix="waggle-member-") as local:
        try:
            while block := body.read(BLOCK_BYTES):
                digest.update(block)
                local.write(block)
                size += len(block)
        except BotoCoreError as exc:
            raise S3Unavailable(f"s3 read of {key!r} broke off: {exc}") from exc
        finally:
            body.close()
        local.flush()
        facts = _page_facts(local.name, url)
    shot_bucket, shot_key = _screenshot(s3, manifest_key)
    return {"bytes": size, "sha256": digest.hexdigest(), **facts,
            "screenshot_bucket": shot_bucket, "screenshot_key": shot_key}


COLUMNS = ("bytes", "sha256", "title", "http_status", "content_type", "screenshot_bucket", "screenshot_key")


async def measure_missing(pool: Any, s3: Any, members: Sequence[dict],
                          gone: set[str] | None = None) -> dict[str, dict[str, Any]]:
    """Measure ``members`` (rows with ``archive_id``, ``bucket``, ``object_key`` and optionally
    ``url``, ``manifest_key``) at most :data:`CONCURRENCY` at a time, store them in
    ``archive_files`` and return ``{archive id: {bytes, sha256, title, …}}`` for those measured.
    An object that is missing or unreadable is left out (logged): its entry says unknown.
    ``gone`` (optional) gets the ids whose object the store says is missing (not those it did
    not answer for)."""
    found: dict[str, dict[str, Any]] = {}
    if not members or s3 is None:
        return found
    limiter = anyio.CapacityLimiter(CONCURRENCY)

    async def one(m: dict) -> None:
        try:
            got = await anyio.to_thread.run_sync(_measure_sync, s3, m["bucket"], m["object_key"], m.get("url"),
                                                 m.get("manifest_key"), limiter=limiter)
        except S3Unavailable as exc:
            log.warning("could not measure an archive", extra={"archiveId": str(m["archive_id"]), "error": str(exc)})
            return
        if got is None:
            log.warning("an admitted archive's object is missing", extra={"archiveId": str(m["archive_id"])})
            if gone is not None:
                gone.add(str(m["archive_id"]))
            return
        found[str(m["archive_id"])] = got

    async with anyio.create_task_group() as tg:
        for m in members:
            tg.start_soon(one, m)
    if found:
        async with pool.connection() as conn:
            await conn.execute(
                "INSERT INTO archive_files (archive_id, bytes, sha256, title, http_status, content_type,"
                " screenshot_bucket, screenshot_key)"
                " SELECT * FROM unnest(%s::uuid[], %s::bigint[], %s::text[], %s::text[], %s::int[], %s::text[],"
                " %s::text[], %s::text[]) ON CONFLICT DO NOTHING",
                (list(found), *[[v[c] for v in found.values()] for c in COLUMNS]))
    return found
