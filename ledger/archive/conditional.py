"""The previous capture of a page, for a conditional request (issue 27 item 4, decision 331,
docs/capture-server.md extension "conditional").

* :func:`validators_of` — at admission: the main document's validators the capture server
  reported in ``datapackage.json`` (``browserhive:capture.conditional.validators``: ``{url,
  etag, lastModified, digest}``); :func:`record_validators` keeps them in ``document_validators``.
* :func:`previous` — the capture server's question through ``POST /api/crawls/{id}/previous``:
  the newest validators of that URL in the crawl's organization whose original (the digest's
  first ``response`` record in ``payload_digests``, same organization, at any URL: decision 392)
  still exists,
  with where that record is: a signed GET of its WACZ and the record's byte range in it (from the
  WACZ's CDXJ; only a WACZ whose WARC is stored uncompressed in the zip can be ranged).

Every query names the organization: an original of another organization is never named.
"""

from __future__ import annotations

import json
import logging
import zipfile
from typing import Any

import anyio
from botocore.exceptions import BotoCoreError, ClientError

from ledger.archive.cdxj import INDEX_MAX_BYTES, cdxj_records
from ledger.archive.digests import normal

log = logging.getLogger("waggle.archive")

URL_EXPIRY_S = 120  # the capture server reads the original right away
TEXT_MAX = 1000  # an ETag / Last-Modified longer than this is not kept


def validators_of(zf: zipfile.ZipFile) -> dict[str, str | None] | None:
    """``{url, etag, lastModified, digest}`` from the WACZ's datapackage, or None (absent, or
    not of that shape)."""
    try:
        doc = json.loads(zf.read("datapackage.json").decode("utf-8"))
        v = doc["browserhive:capture"]["conditional"]["validators"]
    except (KeyError, TypeError, ValueError, UnicodeDecodeError):
        return None
    if not isinstance(v, dict) or not isinstance(v.get("url"), str) or not isinstance(v.get("digest"), str):
        return None
    etag, modified = v.get("etag"), v.get("lastModified")
    etag = etag if isinstance(etag, str) and 0 < len(etag) <= TEXT_MAX else None
    modified = modified if isinstance(modified, str) and 0 < len(modified) <= TEXT_MAX else None
    if etag is None and modified is None:
        return None
    return {"url": v["url"][:8000], "etag": etag, "lastModified": modified, "digest": normal(v["digest"])}


async def record_validators(conn: Any, org_id: str, archive_id: str, validators: dict | None) -> None:
    """Keep ``validators`` of the registered archive ``archive_id`` (on ``conn``'s transaction)."""
    if not validators:
        return
    await conn.execute(
        "INSERT INTO document_validators (archive_id, org_id, url, etag, last_modified, digest)"
        " VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT (archive_id) DO NOTHING",
        (archive_id, org_id, validators["url"], validators["etag"], validators["lastModified"],
         validators["digest"]))


def record_range(size: int, fetch: Any, uri: str, digest: str) -> tuple[int, int] | None:
    """``(offset in the WACZ object, length)`` of the ``response`` record of ``uri`` with payload
    ``digest`` (normal form), from the WACZ's CDXJ; None when the index does not name it or the
    WARC is compressed inside the zip (no byte range of the object then holds the record)."""
    from ledger.archive.range_file import TAIL_BYTES, _RangeFile

    f = _RangeFile(size, fetch)
    f.prefetch(max(0, size - TAIL_BYTES), TAIL_BYTES)
    with zipfile.ZipFile(f) as zf:  # type: ignore[arg-type]
        text = ""
        for name in sorted(n for n in zf.namelist() if n.startswith("indexes/") and n.endswith((".cdx", ".cdxj"))):
            if zf.getinfo(name).file_size <= INDEX_MAX_BYTES:
                text += zf.read(name).decode("utf-8", "replace") + "\n"
        for _, fields in cdxj_records(text):
            if (fields.get("url") != uri or fields.get("mime") == "warc/revisit"
                    or normal(str(fields.get("digest") or "")) != digest):
                continue
            try:
                offset, length = int(fields["offset"]), int(fields["length"])
                info = zf.getinfo(f"archive/{fields.get('filename') or 'data.warc.gz'}")
            except (KeyError, ValueError, TypeError):
                return None
            if info.compress_type != zipfile.ZIP_STORED or offset + length > info.file_size:
                return None
            local = fetch(info.header_offset, 30)  # the local header's own name/extra lengths
            start = info.header_offset + 30 + int.from_bytes(local[26:28], "little") + int.from_bytes(local[28:30], "little")
            return start + offset, length
    return None


def _range_sync(s3: Any, bucket: str, key: str, uri: str, digest: str) -> tuple[int, int] | None:
    client = s3.client
    try:
        size = client.head_object(Bucket=bucket, Key=key)["ContentLength"]

        def fetch(start: int, length: int) -> bytes:
            resp = client.get_object(Bucket=bucket, Key=key, Range=f"bytes={start}-{start + length - 1}")
            with resp["Body"] as body:
                return body.read()

        return record_range(size, fetch, uri, digest)
    except (ClientError, BotoCoreError, zipfile.BadZipFile, EOFError, OSError) as exc:
        log.warning("original of %s not located in s3://%s/%s: %s", uri, bucket, key, exc)
        return None


async def previous(pool: Any, s3: Any, org_id: str, url: str) -> dict[str, Any]:
    """The answer of ``POST /api/crawls/{id}/previous`` for ``url`` in ``org_id``: ``{etag,
    lastModified, digest, uri, date, container, original: {url, offset, length}}`` or ``{}``."""
    async with pool.connection() as conn:
        row = await (await conn.execute(
            "SELECT v.etag, v.last_modified, v.digest, pd.uri, pd.captured_at, a.id AS archive_id, a.bucket, a.object_key"
            " FROM document_validators v"
            # the digest's original at any URL of the organization: a page whose earlier capture was
            # itself a revisit of another URL keeps validators of its own URL (decision 392)
            " JOIN payload_digests pd ON pd.org_id = v.org_id AND pd.digest = v.digest"
            " JOIN archives a ON a.id = pd.archive_id"
            " WHERE v.org_id = %s AND v.url = %s ORDER BY v.captured_at DESC LIMIT 1",
            (org_id, url))).fetchone()
    if row is None:
        return {}
    found = await anyio.to_thread.run_sync(_range_sync, s3, row["bucket"], row["object_key"], row["uri"], row["digest"])
    if found is None:
        return {}
    offset, length = found
    return {"etag": row["etag"], "lastModified": row["last_modified"], "digest": row["digest"], "uri": row["uri"],
            "date": row["captured_at"].strftime("%Y-%m-%dT%H:%M:%SZ"),
            "container": f"{row['archive_id']}.wacz",  # the original's member name in a collection (decision 322)
            "original": {"url": s3.presign_get(row["object_key"], URL_EXPIRY_S, bucket=row["bucket"]),
                         "offset": offset, "length": length}}
