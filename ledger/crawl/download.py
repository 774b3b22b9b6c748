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
from typing import Any

import anyio
from botocore.exceptions import ClientError

from ledger.archive import combined

log = logging.getLogger("waggle.download")
PREFIX = "combined"

_building: dict[str, asyncio.Task] = {}
_failed: dict[str, str] = {}


def fingerprint(resources: list[dict]) -> str:
    """SHA-256 over the members' ``archiveId`` and ``hash``, in order (hex)."""
    h = hashlib.sha256()
    for m in resources:
        h.update(f"{m['archiveId']} {m.get('hash') or ''}\n".encode())
    return h.hexdigest()


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


def _build_sync(s3: Any, body: dict, members: list[dict], key: str) -> int:
    """Build the combined WACZ on local disk, upload it (multipart, from disk) → its size."""
    locations = {m["archiveId"]: (m["bucket"], m["object_key"]) for m in members}

    def fetch(member: dict, path: Path) -> None:
        # one GET streamed to disk (download_file adds a HEAD and a thread pool per object)
        bucket, obj = locations[member["archiveId"]]
        body = s3.client.get_object(Bucket=bucket, Key=obj)["Body"]
        try:
            with path.open("wb") as out:
                while block := body.read(1024 * 1024):
                    out.write(block)
        finally:
            body.close()

    with tempfile.TemporaryDirectory(prefix="waggle-download-") as tmp:
        out = Path(tmp) / "crawl.wacz"
        missing = [{k: p[k] for k in ("url", "why", "reason")} for p in body["missing"]]
        seed = body["resources"][0]["url"] if body["resources"] else None
        combined.build(body["resources"], fetch, out, title=f"waggle crawl {body['title']}",
                       crawl_id=body["crawlId"], missing=missing, main_url=seed)
        s3.client.upload_file(str(out), s3.bucket, key, ExtraArgs={"ContentType": "application/wacz"})
        return out.stat().st_size


async def prepare(services: Any, body: dict) -> tuple[str, str | None, int | None]:
    """``(state, key or reason, size)`` for the collection ``body`` (as
    ``ledger.crawl.collection.collection`` answered it for this caller, with ``_rows``)."""
    s3 = services.s3
    print_ = fingerprint(body["resources"])
    key = object_key(body["crawlId"], print_)
    size = await anyio.to_thread.run_sync(_size, s3, key)
    if size is not None:
        return "ready", key, size
    if print_ in _failed:
        return "failed", _failed.pop(print_), None
    if print_ not in _building:
        members = body["_rows"]

        async def run() -> None:
            try:
                built = await anyio.to_thread.run_sync(_build_sync, s3, body, members, key)
                log.info("combined WACZ built", extra={"crawlId": body["crawlId"], "key": key, "bytes": built})
            except Exception as exc:  # noqa: BLE001 - said to the next request, logged here
                log.exception("combined WACZ build failed", extra={"crawlId": body["crawlId"]})
                _failed[print_] = f"the combined file could not be built: {type(exc).__name__}: {exc}"
            finally:
                _building.pop(print_, None)

        _building[print_] = asyncio.get_running_loop().create_task(run())
    return "building", None, None
