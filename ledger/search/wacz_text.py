"""The page's text out of a WACZ: its WARC ``response`` record for the page URL (redirects
followed within the archive), parsed as HTML or PDF (:mod:`ledger.search.extract`).

Works for every archive the ledger admits — a real BrowserHive v12 WACZ has no text of its
own (``pages.jsonl`` without ``text``), so the text is taken from the bytes the site sent
(docs/decisions/161-search-text-from-the-warc.md). The WACZ is read from S3 with ranged GETs
(the zip's central directory, then the WARC members), never more than :data:`WARC_MAX_BYTES`.
"""

from __future__ import annotations

import json
import zipfile
from typing import Any, BinaryIO
from urllib.parse import urljoin

import anyio
from botocore.exceptions import BotoCoreError, ClientError
from warcio.archiveiterator import ArchiveIterator
from warcio.exceptions import ArchiveLoadFailed

from ledger.archive.wacz_check import _RangeFile
from ledger.s3 import S3Unavailable, is_missing_object
from ledger.search.extract import PageText, from_html, from_pdf

WARC_MAX_BYTES = 256 * 1024 * 1024
BODY_READ_MAX_BYTES = 16 * 1024 * 1024  # an HTML document or PDF larger than this is read only this far
REDIRECTS_MAX = 5
HTML_TYPES = ("text/html", "application/xhtml+xml")
PDF_TYPES = ("application/pdf",)


class NoText(ValueError):
    """The archive holds no page text to index (reason in the message)."""


class RevisitOnly(NoText):
    """The page's document is a WARC revisit record (identical payload): its text is the
    original's, found by ``digest`` (``WARC-Payload-Digest``) in the organization's index."""

    def __init__(self, url: str, digest: str):
        super().__init__(f"the page is a revisit of an earlier capture ({digest})")
        self.url, self.digest = url, digest


def _media_type(value: str | None) -> tuple[str, str | None]:
    if not value:
        return "", None
    parts = [p.strip() for p in value.split(";")]
    charset = next((p.split("=", 1)[1].strip(' "\'') for p in parts[1:] if p.lower().startswith("charset=")), None)
    return parts[0].lower(), charset


def page_url_of(zf: zipfile.ZipFile) -> str | None:
    """The first page URL of ``pages/pages.jsonl`` (its header line has no ``url``)."""
    try:
        with zf.open("pages/pages.jsonl") as f:
            for line in f:
                try:
                    item = json.loads(line)
                except ValueError:
                    continue
                if isinstance(item, dict) and isinstance(item.get("url"), str):
                    return item["url"]
    except KeyError:
        return None
    return None


def _responses(zf: zipfile.ZipFile) -> dict[str, tuple[int, str, str | None, str | None, bytes]]:
    """URL → (status, media type, charset, Location, body) of each HTML/PDF/redirect response."""
    found: dict[str, tuple[int, str, str | None, str | None, bytes]] = {}
    for name in sorted(n for n in zf.namelist() if n.startswith("archive/") and ".warc" in n):
        if zf.getinfo(name).file_size > WARC_MAX_BYTES:
            continue
        with zf.open(name) as stream:
            for record in ArchiveIterator(stream):
                if record.rec_type != "response" or record.http_headers is None:
                    continue
                url = record.rec_headers.get_header("WARC-Target-URI") or ""
                try:
                    status = int(record.http_headers.get_statuscode() or 0)
                except ValueError:
                    continue
                media, charset = _media_type(record.http_headers.get_header("Content-Type"))
                location = record.http_headers.get_header("Location")
                if 300 <= status < 400 and location:
                    found.setdefault(url, (status, media, charset, location, b""))
                elif 200 <= status < 300 and media in HTML_TYPES + PDF_TYPES:
                    found.setdefault(url, (status, media, charset, None, record.content_stream().read(BODY_READ_MAX_BYTES)))
    return found


def _revisits(zf: zipfile.ZipFile) -> dict[str, str]:
    """URL → payload digest of each 2xx HTML/PDF ``revisit`` record (a recrawl's unchanged page)."""
    found: dict[str, str] = {}
    for name in sorted(n for n in zf.namelist() if n.startswith("archive/") and ".warc" in n):
        if zf.getinfo(name).file_size > WARC_MAX_BYTES:
            continue
        with zf.open(name) as stream:
            for record in ArchiveIterator(stream):
                digest = record.rec_headers.get_header("WARC-Payload-Digest")
                if record.rec_type != "revisit" or record.http_headers is None or not digest:
                    continue
                status = record.http_headers.get_statuscode() or ""
                media, _ = _media_type(record.http_headers.get_header("Content-Type"))
                if status.startswith("2") and media in HTML_TYPES + PDF_TYPES:
                    found.setdefault(record.rec_headers.get_header("WARC-Target-URI") or "", digest)
    return found


def text_of_zip(zf: zipfile.ZipFile, fallback_url: str | None) -> PageText:
    """The page's text in an opened WACZ; raises :class:`NoText` when there is none, and
    :class:`RevisitOnly` when the page's document is a revisit record (its text is elsewhere)."""
    url = page_url_of(zf) or fallback_url
    responses = _responses(zf)
    if not responses.get(url or ""):
        revisits = _revisits(zf)
        if url in revisits or (revisits and not any(r[3] is None for r in responses.values())):
            at = url if url in revisits else next(iter(revisits))
            raise RevisitOnly(at or "", revisits[at])
    if not responses:
        raise NoText("the archive holds no HTML or PDF response")
    hit = responses.get(url or "")
    for _ in range(REDIRECTS_MAX):
        if hit is None or hit[3] is None:
            break
        url = urljoin(url or "", hit[3])
        hit = responses.get(url)
    if hit is None or hit[3] is not None:  # the page URL is not there: the first document is the page
        hit = next((r for r in responses.values() if r[3] is None), None)
    if hit is None:
        raise NoText("the archive holds only redirects")
    _status, media, charset, _loc, body = hit
    if media in PDF_TYPES:
        try:
            return from_pdf(body)
        except ValueError as exc:
            raise NoText(str(exc)) from exc
    return from_html(body, charset)


def text_of_wacz(fileobj: BinaryIO, fallback_url: str | None = None) -> PageText:
    """:func:`text_of_zip` over a seekable WACZ file; :class:`NoText` for an unreadable zip or WARC."""
    try:
        with zipfile.ZipFile(fileobj) as zf:
            return text_of_zip(zf, fallback_url)
    except (zipfile.BadZipFile, zipfile.LargeZipFile, EOFError, ArchiveLoadFailed, OSError) as exc:
        raise NoText(f"the WACZ could not be read: {str(exc)[:200]}") from exc


def _from_s3_sync(s3: Any, bucket: str, key: str, fallback_url: str | None) -> PageText:
    client = s3.client
    try:
        try:
            size = client.head_object(Bucket=bucket, Key=key)["ContentLength"]
        except ClientError as exc:
            if is_missing_object(exc):
                raise NoText(f"the WACZ object is missing: s3://{bucket}/{key}") from exc
            raise

        def fetch(start: int, length: int) -> bytes:
            resp = client.get_object(Bucket=bucket, Key=key, Range=f"bytes={start}-{start + length - 1}")
            with resp["Body"] as body:
                return body.read()

        return text_of_wacz(_RangeFile(size, fetch), fallback_url)  # type: ignore[arg-type]
    except ClientError as exc:
        raise S3Unavailable(f"s3 refused reading {key!r}: {exc}") from exc
    except BotoCoreError as exc:
        raise S3Unavailable(f"s3 did not answer while reading {key!r}: {exc}") from exc


async def text_from_s3(s3: Any, bucket: str, key: str, fallback_url: str | None) -> PageText:
    """The page text of the WACZ at ``s3://bucket/key``. Raises :class:`NoText` (nothing to
    index, for good) and ``S3Unavailable`` (try again later)."""
    return await anyio.to_thread.run_sync(_from_s3_sync, s3, bucket, key, fallback_url)
