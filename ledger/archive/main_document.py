"""The main document of an admitted archive: its payload digest and HTTP status as the WACZ's
CDXJ index names them (issue 27 item 3, docs/decisions/211-what-changed-between-two-crawls.md).

What changed between two crawls is decided by the main document's ``WARC-Payload-Digest``: a
``revisit`` record carries its original's digest, so an unchanged page compares equal whether
its body was stored again or not. The digest is read from the index (``indexes/*.cdx[j]``), not
the WARC: two small ranged GETs per archive (the zip's tail, then the index), once — the result
is kept in ``archive_main_documents`` (an archive is immutable once admitted).

The page's line: the first line whose ``url`` is the page's final URL (else its requested URL)
and whose status is not a redirect; else the first line of that URL. None of those: the digest
is unknown (a row with ``digest`` NULL), never guessed from another line.
"""

from __future__ import annotations

import logging
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import anyio
from botocore.exceptions import BotoCoreError, ClientError

from ledger.archive.cdxj import INDEX_MAX_BYTES, cdxj_records
from ledger.archive.digests import normal
from ledger.archive.range_file import open_object
from ledger.s3 import S3Unavailable

log = logging.getLogger("waggle.archive")

CONCURRENCY = 8


@dataclass(frozen=True)
class MainDocument:
    """``url`` looked up; ``digest`` (normal form) and ``http_status`` None when unknown."""

    url: str
    digest: str | None
    http_status: int | None
    revisit: bool
    mime: str | None = None  # the line's ``mime`` (``warc/revisit`` for a revisit)


def main_document_of_cdxj(text: str, urls: Sequence[str]) -> MainDocument:
    """The page's line in CDXJ ``text``, trying ``urls`` in order (final URL, then requested)."""
    lines: dict[str, list[dict]] = {}
    for _, fields in cdxj_records(text):
        if isinstance(fields.get("url"), str):
            lines.setdefault(fields["url"], []).append(fields)
    for url in urls:
        found = lines.get(url)
        if not found:
            continue
        status = lambda f: str(f.get("status") or "")  # noqa: E731
        pick = next((f for f in found if not status(f).startswith("3")), found[0])
        digest = pick.get("digest")
        mime = pick.get("mime")
        return MainDocument(url, normal(digest) if isinstance(digest, str) and digest else None,
                            int(status(pick)) if status(pick).isdigit() else None, mime == "warc/revisit",
                            str(mime)[:200] if mime else None)
    return MainDocument(urls[0], None, None, False)


def _read_sync(s3: Any, bucket: str, key: str, urls: Sequence[str]) -> MainDocument | None:
    """The main document of the WACZ at ``s3://bucket/key``; None when the object is missing."""
    client = s3.client
    try:
        f = open_object(client, bucket, key)
        if f is None:
            return None
        text = ""
        try:
            with zipfile.ZipFile(f) as zf:  # type: ignore[arg-type]
                for name in sorted(n for n in zf.namelist() if n.startswith("indexes/") and n.endswith((".cdx", ".cdxj"))):
                    if zf.getinfo(name).file_size <= INDEX_MAX_BYTES:
                        text += zf.read(name).decode("utf-8", "replace") + "\n"
        except (zipfile.BadZipFile, zipfile.LargeZipFile, EOFError, OSError):
            text = ""  # an unreadable WACZ: its main document is unknown
        return main_document_of_cdxj(text, urls)
    except ClientError as exc:
        raise S3Unavailable(f"s3 refused reading {key!r}: {exc}") from exc
    except BotoCoreError as exc:
        raise S3Unavailable(f"s3 did not answer while reading {key!r}: {exc}") from exc


async def main_documents(pool: Any, s3: Any, archives: Sequence[dict]) -> dict[str, MainDocument]:
    """``{archive id: MainDocument}`` of ``archives`` (rows with ``archive_id``, ``bucket``,
    ``object_key``, ``url`` and optionally ``final_url``): kept rows from ``archive_main_documents``,
    the others read from S3 (at most :data:`CONCURRENCY` at a time) and kept. An archive whose
    object is missing or unreadable now is left out (logged; asked again next time)."""
    ids = list(dict.fromkeys(str(a["archive_id"]) for a in archives))
    if not ids:
        return {}
    async with pool.connection() as conn:
        rows = await (await conn.execute(
            "SELECT archive_id, url, digest, http_status, revisit FROM archive_main_documents"
            " WHERE archive_id = ANY(%s::uuid[])", (ids,))).fetchall()
    found = {str(r["archive_id"]): MainDocument(r["url"], r["digest"], r["http_status"], r["revisit"]) for r in rows}
    todo = {str(a["archive_id"]): a for a in archives if str(a["archive_id"]) not in found}
    if not todo or s3 is None:
        return found
    read: dict[str, MainDocument] = {}
    limiter = anyio.CapacityLimiter(CONCURRENCY)

    async def one(aid: str, a: dict) -> None:
        urls = [u for u in dict.fromkeys((a.get("final_url"), a["url"])) if u]
        try:
            got = await anyio.to_thread.run_sync(_read_sync, s3, a["bucket"], a["object_key"], urls, limiter=limiter)
        except S3Unavailable as exc:
            log.warning("could not read an archive's index", extra={"archiveId": aid, "error": str(exc)})
            return
        if got is None:
            log.warning("an admitted archive's object is missing", extra={"archiveId": aid})
            return
        read[aid] = got

    async with anyio.create_task_group() as tg:
        for aid, a in todo.items():
            tg.start_soon(one, aid, a)
    if read:
        async with pool.connection() as conn:
            await conn.execute(
                "INSERT INTO archive_main_documents (archive_id, url, digest, http_status, revisit)"
                " SELECT * FROM unnest(%s::uuid[], %s::text[], %s::text[], %s::int[], %s::bool[])"
                " ON CONFLICT DO NOTHING",
                (list(read), [m.url for m in read.values()], [m.digest for m in read.values()],
                 [m.http_status for m in read.values()], [m.revisit for m in read.values()]))
    return {**found, **read}
