"""Each admitted WACZ's size and SHA-256 (``archive_files``), for the collections that name it.

A multi-WACZ collection lists every member with its ``bytes`` and ``hash``
(``sha256:<hex>``, as a WACZ datapackage names its files). Neither is in the capture manifest,
so the ledger reads each object once from S3, in 1 MiB blocks through the hash (memory flat in
the object's size), and keeps the result: an archive is immutable once admitted. The bytes go
from S3 to the ledger's hash only, never to a caller.

:func:`measure_missing` is called by the collection for the members it has no row for (the first
answer after a capture pays for it, later ones read the table).
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Sequence
from typing import Any

import anyio
from botocore.exceptions import BotoCoreError, ClientError

from ledger.s3 import S3Unavailable

log = logging.getLogger("waggle.archive")

BLOCK_BYTES = 1024 * 1024
CONCURRENCY = 8


def _measure_sync(s3: Any, bucket: str, key: str) -> tuple[int, str] | None:
    """``(bytes, sha256 hex)`` of one object, or None when it is not there."""
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
    try:
        while block := body.read(BLOCK_BYTES):
            digest.update(block)
            size += len(block)
    except BotoCoreError as exc:
        raise S3Unavailable(f"s3 read of {key!r} broke off: {exc}") from exc
    finally:
        body.close()
    return size, digest.hexdigest()


async def measure_missing(pool: Any, s3: Any, members: Sequence[dict]) -> dict[str, tuple[int, str]]:
    """Measure ``members`` (rows with ``archive_id``, ``bucket``, ``object_key``) at most
    :data:`CONCURRENCY` at a time, store them in ``archive_files`` and return
    ``{archive id: (bytes, sha256 hex)}`` for those measured. An object that is missing or
    unreadable is left out (logged): its collection entry says its size and hash are unknown."""
    found: dict[str, tuple[int, str]] = {}
    if not members or s3 is None:
        return found
    limiter = anyio.CapacityLimiter(CONCURRENCY)

    async def one(m: dict) -> None:
        try:
            got = await anyio.to_thread.run_sync(_measure_sync, s3, m["bucket"], m["object_key"], limiter=limiter)
        except S3Unavailable as exc:
            log.warning("could not measure an archive", extra={"archiveId": str(m["archive_id"]), "error": str(exc)})
            return
        if got is None:
            log.warning("an admitted archive's object is missing", extra={"archiveId": str(m["archive_id"])})
            return
        found[str(m["archive_id"])] = got

    async with anyio.create_task_group() as tg:
        for m in members:
            tg.start_soon(one, m)
    if found:
        async with pool.connection() as conn:
            await conn.execute(
                "INSERT INTO archive_files (archive_id, bytes, sha256)"
                " SELECT * FROM unnest(%s::uuid[], %s::bigint[], %s::text[]) ON CONFLICT DO NOTHING",
                (list(found), [v[0] for v in found.values()], [v[1] for v in found.values()]))
    return found
