"""A crawl downloaded as one file (issue 25 item 4; docs/decisions/154-crawl-download.md).

The combined WACZ (``ledger.archive.combined``) of exactly the members a caller may view is kept
in S3 under ``combined/<crawl id>/<fingerprint>.wacz``, the fingerprint being the SHA-256 of the
members' archive ids and hashes in crawl order: the same member set is built once and served to
everyone who may view that set; a member admitted late (reconciler) or a different set of
viewable members is another fingerprint, hence another file — built on the first request for it.

:func:`prepare` answers at once: ``("ready", object key, size)`` when the file exists, else it
starts the build in a worker thread (one per fingerprint in this process) and answers
``("building", None, None)``; a failed build is said once as ``("failed", reason, None)``.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import tempfile
from pathlib import Path
from collections.abc import Iterator
from typing import Any

import anyio
from botocore.exceptions import ClientError

from ledger.archive import combined
from ledger.crawl.collection import MISSING_LISTED

log = logging.getLogger("waggle.download")
PREFIX = "combined"

_building: dict[str, asyncio.Task] = {}
_failed: dict[str, str] = {}


def fingerprint(members: list[Any]) -> str:
    """SHA-256 over the members' (``ledger.crawl.collection.Member``) archive ids and hashes, in
    order (hex) — the same text as when they were the answer's resources."""
    h = hashlib.sha256()
    for m in members:
        h.update(f"{m.aid} {m.resource['hash'] or ''}\n".encode())
    return h.hexdigest()


def _build_members(members: list[Any]) -> Iterator[dict]:
    """What :func:`ledger.archive.combined.build` reads of each member, one small dict at a time
    (a generator: the build's memory does not grow with the crawl, decision 372)."""
    for m in members:
        r = m.resource
        yield {"archiveId": m.aid, "url": m.url, "complete": r["complete"], "reason": r["reason"],
               "bucket": m.bucket, "object_key": m.object_key, **({"role": "original"} if m.original else {})}


def file_name(body: dict) -> str:
    """``<host>-<date>-<short id>.wacz`` — e.g. ``docs.python.org-2026-12-01-7d1e2f3a.wacz``."""
    host, _, day = body["title"].partition(" ")
    safe = "".join(c if c.isalnum() or c in ".-" else "_" for c in host)[:100] or "crawl"
    return f"{safe}-{day}-{body['crawlId'][:8]}.wacz"


def object_key(crawl_id: str, print_: str) -> str:
    return f"{PREFIX}/{crawl_id}/{print_}.wacz"


def _size(s3: Any, key: str) -> int | None:
    try:
        return int(s3.client.head_object(Bucket=s3.bucket, Key=key)["ContentLength"])
    except ClientError as exc:
        if exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode") == 404:
            return None
        raise


def _build_sync(s3: Any, head: dict, members: list[Any], missing: list[dict], key: str) -> int:
    """Build the combined WACZ on local disk, upload it (multipart, from disk) → its size."""

    def fetch(member: dict, path: Path) -> None:
        # one GET streamed to disk (download_file adds a HEAD and a thread pool per object)
        body = s3.client.get_object(Bucket=member["bucket"], Key=member["object_key"])["Body"]
        try:
            with path.open("wb") as out:
                while block := body.read(1024 * 1024):
                    out.write(block)
        finally:
            body.close()

    with tempfile.TemporaryDirectory(prefix="waggle-download-") as tmp:
        out = Path(tmp) / "crawl.wacz"
        said = [{k: p[k] for k in ("url", "why", "reason")} for p in missing[:MISSING_LISTED]]
        seed = members[0].url if members else None
        combined.build(_build_members(members), fetch, out, title=f"waggle crawl {head['title']}",
                       crawl_id=head["crawlId"], missing=said, main_url=seed)
        s3.client.upload_file(str(out), s3.bucket, key, ExtraArgs={"ContentType": "application/wacz"})
        return out.stat().st_size


async def prepare(services: Any, head: dict, members: list[Any], missing: list[dict]) -> tuple[str, str | None, int | None]:
    """``(state, key or reason, size)`` for the collection as this caller may see it
    (``ledger.crawl.collection.viewable_members``: its head, members and missing pages)."""
    s3 = services.s3
    print_ = fingerprint(members)
    key = object_key(head["crawlId"], print_)
    size = await anyio.to_thread.run_sync(_size, s3, key)
    if size is not None:
        return "ready", key, size
    if print_ in _failed:
        return "failed", _failed.pop(print_), None
    if print_ not in _building:

        async def run() -> None:
            try:
                built = await anyio.to_thread.run_sync(_build_sync, s3, head, members, missing, key)
                log.info("combined WACZ built", extra={"crawlId": head["crawlId"], "key": key, "bytes": built})
            except Exception as exc:  # noqa: BLE001 - said to the next request, logged here
                log.exception("combined WACZ build failed", extra={"crawlId": head["crawlId"]})
                _failed[print_] = f"the combined file could not be built: {type(exc).__name__}: {exc}"
            finally:
                _building.pop(print_, None)

        _building[print_] = asyncio.get_running_loop().create_task(run())
    return "building", None, None
