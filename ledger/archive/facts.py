"""What an admitted archive holds, known from admission (issue 25 item 5; decision 341).

The admission check (``ledger.archive.wacz_check``) already reads the object's size (HEAD), the
zip's central directory and the CDXJ index; :func:`facts_of_zip` adds the first page of
``pages/pages.jsonl`` and takes from them the archive's ``wacz_bytes``, the page's ``title``
and its main document's ``http_status`` and ``content_type`` (the CDXJ line of the page's URL,
``ledger.archive.main_document``). :func:`record_facts` keeps them in ``archive_facts``
(migration 350) in the admission's transaction, with the original archive of a main document
that is a ``revisit`` (its payload digest in the organization's ``payload_digests``): a revisit's
content type is its original's, read through that link (:data:`FACTS_SQL`).

Archives admitted before migration 350 have no row: :func:`backfill` reads them (HEAD, the tail,
the index and pages.jsonl by ranged GETs; at most :data:`CONCURRENCY` at once) the first time a
list shows them, and keeps the row. A value the archive does not hold stays None — unknown.
"""

from __future__ import annotations

import json
import logging
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import anyio
from botocore.exceptions import BotoCoreError, ClientError

from ledger.archive.main_document import main_document_of_cdxj
from ledger.archive.range_file import open_object
from ledger.s3 import S3Unavailable

log = logging.getLogger("waggle.archive")

CONCURRENCY = 8
PAGES_LINE_MAX = 64 * 1024  # the first page's line of pages.jsonl (its header line may precede it)
REVISIT_MIME = "warc/revisit"

# Columns for a list query that has ``archives a``: the archive's facts (``x``) and, for a revisit,
# its original's content type (``ox``: its facts; ``of``: the collection measure of decision 155).
FACTS_JOIN = """
LEFT JOIN archive_facts x ON x.archive_id = a.id
LEFT JOIN archive_facts ox ON ox.archive_id = x.original_archive_id
LEFT JOIN archive_files ofl ON ofl.archive_id = x.original_archive_id
"""
FACTS_COLUMNS = """
x.archive_id IS NOT NULL AS facts_read, x.wacz_bytes AS facts_bytes, x.title AS facts_title,
x.http_status AS facts_http_status, x.revisit AS facts_revisit,
CASE WHEN x.revisit THEN coalesce(ox.content_type, NULLIF(ofl.content_type, 'warc/revisit'))
     ELSE x.content_type END AS facts_content_type
"""


@dataclass(frozen=True)
class WaczFacts:
    """``wacz_bytes`` (None: the object was missing), ``title``, ``url`` (looked up),
    ``http_status``, ``content_type`` (None for a revisit: the original's is read), ``revisit``,
    ``digest`` (the main document's payload digest, normal form) — None where unknown."""

    wacz_bytes: int | None
    title: str | None = None
    url: str | None = None
    http_status: int | None = None
    content_type: str | None = None
    revisit: bool = False
    digest: str | None = None


def _first_page(zf: zipfile.ZipFile) -> dict:
    """The first page row of ``pages/pages.jsonl`` (``{}`` when there is none)."""
    if "pages/pages.jsonl" not in zf.namelist():
        return {}
    with zf.open("pages/pages.jsonl") as f:
        for _ in range(4):  # a header line, then the first page
            line = f.readline(PAGES_LINE_MAX)
            if not line:
                break
            try:
                row = json.loads(line) if line.strip() else {}
            except ValueError:
                return {}
            if isinstance(row, dict) and "url" in row:
                return row
    return {}


def facts_of_zip(zf: zipfile.ZipFile, size: int, index_text: str, urls: Sequence[str | None] = ()) -> WaczFacts:
    """The facts of an open WACZ of ``size`` bytes whose CDXJ index text is ``index_text``; the
    main document is looked up by the first page's URL, then ``urls`` (e.g. the report's URL)."""
    page = _first_page(zf)
    title = page.get("title")
    title = str(title)[:500] if title else None
    tried = [u for u in dict.fromkeys([page.get("url"), *urls]) if isinstance(u, str) and u]
    if not tried:
        return WaczFacts(size, title)
    main = main_document_of_cdxj(index_text, tried)
    return WaczFacts(size, title, main.url, main.http_status, None if main.revisit else main.mime, main.revisit,
                     main.digest)


async def record_facts(conn: Any, org_id: str | None, archive_id: str, facts: WaczFacts) -> None:
    """Keep ``facts`` of ``archive_id`` (on ``conn``'s transaction); a revisit's original is the
    archive of ``org_id`` holding its digest (none known: NULL)."""
    await conn.execute(
        "INSERT INTO archive_facts (archive_id, wacz_bytes, title, url, http_status, content_type, revisit, digest,"
        " original_archive_id)"
        " VALUES (%(a)s, %(b)s, %(t)s, %(u)s, %(s)s, %(c)s, %(r)s, %(d)s,"
        "  (SELECT d.archive_id FROM payload_digests d WHERE %(r)s AND d.org_id = %(o)s AND d.digest = %(d)s"
        "     AND d.archive_id <> %(a)s::uuid))"
        " ON CONFLICT (archive_id) DO NOTHING",
        {"a": archive_id, "b": facts.wacz_bytes, "t": facts.title, "u": facts.url, "s": facts.http_status,
         "c": facts.content_type, "r": facts.revisit, "d": facts.digest, "o": org_id})


def _read_sync(s3: Any, bucket: str, key: str, urls: Sequence[str]) -> WaczFacts:
    """The facts of the WACZ at ``s3://bucket/key`` by ranged GETs (missing object: bytes None)."""
    from ledger.archive.cdxj import INDEX_MAX_BYTES

    client = s3.client
    try:
        f = open_object(client, bucket, key)
        if f is None:
            return WaczFacts(None)
        size = f.size
        try:
            with zipfile.ZipFile(f) as zf:  # type: ignore[arg-type]
                text = ""
                for name in sorted(n for n in zf.namelist() if n.startswith("indexes/") and n.endswith((".cdx", ".cdxj"))):
                    if zf.getinfo(name).file_size <= INDEX_MAX_BYTES:
                        text += zf.read(name).decode("utf-8", "replace") + "\n"
                return facts_of_zip(zf, size, text, urls)
        except (zipfile.BadZipFile, zipfile.LargeZipFile, EOFError, OSError, ValueError):
            return WaczFacts(size)  # not a readable WACZ: only its size is known
    except ClientError as exc:
        raise S3Unavailable(f"s3 refused reading {key!r}: {exc}") from exc
    except BotoCoreError as exc:
        raise S3Unavailable(f"s3 did not answer while reading {key!r}: {exc}") from exc


_ORG_OF = """
SELECT a.id, (SELECT c.org_id FROM crawls c WHERE c.id = CASE WHEN a.correlation_id
         ~* '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$' THEN a.correlation_id::uuid END) AS org_id
FROM archives a WHERE a.id = ANY(%s::uuid[])
"""


async def backfill(pool: Any, s3: Any, rows: Sequence[dict]) -> dict[str, WaczFacts]:
    """Read and keep the facts of ``rows`` (``id`` or ``archive_id``, ``bucket``, ``object_key``,
    ``source_url`` or ``url``) that have none → ``{archive id: facts}``. An archive S3 does not
    answer for now is left out (logged; read again next time)."""
    if not rows or s3 is None:
        return {}
    limiter = anyio.CapacityLimiter(CONCURRENCY)
    read: dict[str, WaczFacts] = {}

    async def one(r: dict) -> None:
        aid = str(r.get("archive_id") or r["id"])
        urls = [u for u in (r.get("final_url"), r.get("url"), r.get("source_url")) if u]
        try:
            read[aid] = await anyio.to_thread.run_sync(_read_sync, s3, r["bucket"], r["object_key"], urls,
                                                       limiter=limiter)
        except S3Unavailable as exc:
            log.warning("could not read an archive's facts", extra={"archiveId": aid, "error": str(exc)})

    async with anyio.create_task_group() as tg:
        for r in rows:
            tg.start_soon(one, r)
    if read:
        async with pool.connection() as conn:
            orgs = {str(o["id"]): o["org_id"] for o in await (await conn.execute(_ORG_OF, (list(read),))).fetchall()}
            async with conn.transaction():
                for aid, facts in read.items():
                    await record_facts(conn, orgs.get(aid), aid, facts)
    return read


def facts_columns(facts: WaczFacts | None, original_content_type: str | None = None) -> dict[str, Any]:
    """``facts_*`` columns (as :data:`FACTS_COLUMNS` names them) of facts just read."""
    if facts is None:
        return {}
    return {"facts_read": True, "facts_bytes": facts.wacz_bytes, "facts_title": facts.title,
            "facts_http_status": facts.http_status, "facts_revisit": facts.revisit,
            "facts_content_type": original_content_type if facts.revisit else facts.content_type}
