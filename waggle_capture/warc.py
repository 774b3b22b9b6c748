"""WARC 1.1 writing and CDXJ indexing for the capture's WACZ (contracts.md §B.5, cases C8/C9).

Records: ``warcinfo`` first (``software``, ``format``; decision 391); per recorded exchange a ``response`` then a ``request`` record
linked by ``WARC-Concurrent-To``; ``metadata`` records for withheld requests (deny/no-archive),
dropped bodies (``truncated``) and failures (``incomplete``); ``resource`` records for the
screenshots (extension 15, ``urn:view:<url>``); a ``revisit`` record instead of a ``response``
for a payload the ledger says the organization holds (extension revisit, decision 181); nothing
for a sub-resource whose URL and payload an earlier capture of the same crawl wrote (extension
recrawl, decision 321). One
gzip member per record (warcio).

Payloads are rewritten to HTTP/1.1 form: status line ``HTTP/1.1 <code> <reason>``, HTTP/2
pseudo-headers dropped, ``Host`` synthesised, ``Content-Encoding``/``Transfer-Encoding`` kept
only as ``X-Archive-Orig-…`` (the body is stored as the network delivered it: content-decoded,
unchunked, never charset-converted — decision 111) and ``Content-Length`` set to the stored body
length, so replay never double-decodes. Digests are ``sha256:`` + RFC 4648 base32 (block and payload; an empty payload
is digested too). Deliberate difference from BrowserHive (which drops the ``=`` padding,
contracts.md §B.5): we keep the padding because ``warcio check`` (warcio 1.8.1,
``digestverifyingreader._to_b32``) misreads an unpadded 52-character SHA-256 value as base64 and
reports every record as failed; case C9 requires digests that ``warcio check`` accepts. The CDXJ index is produced by ``cdxj-indexer`` from the
written file (pywb's own SURT keys and offsets), one line per response record, sorted.
"""

from __future__ import annotations

import base64
import hashlib
import io
import zlib
from dataclasses import dataclass
from datetime import datetime
from http import HTTPStatus
from pathlib import Path
from urllib.parse import urlsplit

from cdxj_indexer.main import CDXJIndexer
from warcio.statusandheaders import StatusAndHeaders
from warcio.timeutils import datetime_to_iso_date
from warcio.warcwriter import GzippingWrapper, WARCWriter

from waggle_capture import conditional
from waggle_capture.recorder import Exchange
from waggle_capture.revisits import Revisits, eligible, payload_digest, skippable

EMPTY_SHA256_B32 = "sha256:" + base64.b32encode(hashlib.sha256(b"").digest()).decode()
HOP_BY_HOP = {"connection", "keep-alive"}
ORIG_ONLY = {"content-encoding", "transfer-encoding"}  # kept as X-Archive-Orig-… (the body is decoded)
DROP_REQUEST = {"connection", "keep-alive", "proxy-connection"}
CONTAINER = conditional.CONTAINER  # a collection member's name, nothing else (decision 322)


class _Sha256Digester:
    def __init__(self) -> None:
        self._h = hashlib.sha256()

    def update(self, buf: bytes) -> None:
        self._h.update(buf)

    def __str__(self) -> str:
        return "sha256:" + base64.b32encode(self._h.digest()).decode()


class _Gzip6(GzippingWrapper):
    """warcio's gzip member writer at zlib's default level 6 instead of 9: a 2.5 MB HTML record
    took 317 ms at 9, 93 ms at 6, for a 0.7 % larger member (Python docs' contents.html)."""

    def __init__(self, out) -> None:
        self.compressor = zlib.compressobj(6, zlib.DEFLATED, zlib.MAX_WBITS + 16)
        self.out = out


class Sha256WARCWriter(WARCWriter):
    """warcio WARCWriter (WARC/1.1, one gzip member per record, level 6) with base32 SHA-256 digests."""

    @staticmethod
    def _create_digester():  # type: ignore[override]
        return _Sha256Digester()

    def ensure_digest(self, record, block=True, payload=True):  # type: ignore[override]
        # contracts.md §B.5 digests the payload of responses; a request's empty payload has one
        # constant digest that tells nothing (~45 B a record gzip'd: decision 391)
        if record.rec_type == "request" and not record.payload_length:
            payload = False
        return super().ensure_digest(record, block=block, payload=payload)

    def _write_warc_record(self, out, record):  # type: ignore[override]
        if not self.gzip:
            return super()._write_warc_record(out, record)
        self.gzip = False  # warcio would wrap ``out`` at level 9: the member is ours
        try:
            return super()._write_warc_record(_Gzip6(out), record)  # it flushes (ends) the member
        finally:
            self.gzip = True


def reason_phrase(status: int, given: str = "") -> str:
    """The reason phrase (HTTP/2 gives none: fill it from the standard table)."""
    if given:
        return given
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return "Unknown"


def _date(dt: datetime) -> str:
    return datetime_to_iso_date(dt.replace(tzinfo=None), use_micros=True)


def response_headers(ex: Exchange, body_len: int) -> StatusAndHeaders:
    """HTTP/1.1 form of the response head with ``Content-Length`` = ``body_len`` (decision 111):
    the body is stored as the network delivered it — content coding and chunked framing removed
    — so ``Content-Encoding`` and ``Transfer-Encoding`` are kept only as ``X-Archive-Orig-…``
    (the headers received, still visible, claiming nothing), and so is a received
    ``Content-Length`` that differs from the stored body (encoded or cut). Hop-by-hop
    ``Connection``/``Keep-Alive`` are the capture proxy's, not the site's: dropped."""
    out: list[tuple[str, str]] = []
    for k, v in ex.resp_headers:
        name = k.lower()
        if k.startswith(":") or name in HOP_BY_HOP:
            continue
        # Several values of one header arrive newline-joined (Set-Cookie): one line each.
        for part in v.split("\n"):
            if name in ORIG_ONLY or (name == "content-length" and part.strip() != str(body_len)):
                out.append((f"X-Archive-Orig-{k}", part))
            elif name != "content-length":
                out.append((k, part))
    out.append(("Content-Length", str(body_len)))
    status = ex.status or 0
    return StatusAndHeaders(f"{status} {reason_phrase(status, ex.status_text)}", out, protocol="HTTP/1.1")


def request_headers(ex: Exchange) -> StatusAndHeaders:
    """HTTP/1.1 form of the request head (``Host`` synthesised when missing)."""
    parts = urlsplit(ex.url)
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    headers = [(k, v) for k, v in ex.req_headers if not k.startswith(":") and k.lower() not in DROP_REQUEST]
    if not any(k.lower() == "host" for k, _ in headers):
        headers.insert(0, ("Host", parts.netloc))
    if ex.req_body:
        headers = [(k, v) for k, v in headers if k.lower() != "content-length"]
        headers.append(("Content-Length", str(len(ex.req_body))))
    return StatusAndHeaders(f"{ex.method} {target} HTTP/1.1", headers, is_http_request=True)


def _fields(pairs: list[tuple[str, str]]) -> bytes:
    return "".join(f"{k}: {v}\r\n" for k, v in pairs).encode("utf-8")


@dataclass(frozen=True)
class Resource:
    """A WARC ``resource`` record: content made by the capture itself (a screenshot), under a
    ``urn:`` target URI (Browsertrix's and pywb's ``urn:view:<page url>``)."""

    uri: str
    mime: str
    data: bytes
    date: datetime


def write_warc(path: Path, *, task_id: str, url: str, software: str, exchanges: list[Exchange],
               denied: list[Exchange], created: datetime, resources: list[Resource] = (),
               revisits: Revisits | None = None) -> None:
    """Write the capture's WARC (gzip members) to ``path``; ``resources`` after the exchanges.
    ``revisits`` (extension ``revisit``): a response whose digest is held is a ``revisit``
    record (:func:`_write_revisit`); its ``count``/``bytes_saved`` are filled here."""
    with open(path, "wb") as fh:
        w = Sha256WARCWriter(fh, gzip=True, warc_version="1.1")
        # software and format only (decision 391): conformsTo restated the format, description the
        # page URL every record names, and robots-policy "ignore" was untrue of a crawl that obeys
        # robots.txt before it asks for a capture
        info = _fields([("software", software), ("format", "WARC File Format 1.1")])
        w.write_record(w.create_warc_record(
            "", "warcinfo", payload=io.BytesIO(info), length=len(info),
            warc_content_type="application/warc-fields",
            warc_headers_dict={"WARC-Filename": f"{task_id}.warc.gz", "WARC-Date": _date(created)}))
        for ex in exchanges:
            _write_exchange(w, ex, revisits)
        for ex in denied:
            _write_metadata(w, ex, [("action", "deny"), ("pattern", ex.pattern or ""), ("method", ex.method),
                                    ("resourceType", ex.resource_type), ("target", ex.target)])
        for res in resources:
            w.write_record(w.create_warc_record(res.uri, "resource", payload=io.BytesIO(res.data),
                                                length=len(res.data), warc_content_type=res.mime,
                                                warc_headers_dict={"WARC-Date": _date(res.date)}))


def _write_metadata(w: WARCWriter, ex: Exchange, pairs: list[tuple[str, str]], refers_to: str | None = None) -> None:
    body = _fields([(k, v) for k, v in pairs if v not in (None, "")])
    hdrs = {"WARC-Date": _date(ex.started)}
    if refers_to:
        hdrs["WARC-Refers-To"] = refers_to
    w.write_record(w.create_warc_record(ex.url, "metadata", payload=io.BytesIO(body), length=len(body),
                                        warc_content_type="application/warc-fields", warc_headers_dict=hdrs))


def _write_revisit(w: WARCWriter, ex: Exchange, digest: str, original: dict[str, str]):
    """A WARC/1.1 ``revisit`` (identical-payload-digest) for ``ex``: its HTTP headers as a
    response record would carry them (``Content-Length`` = the original body's), no body.
    ``WARC-Refers-To-Container`` names the original's WACZ when the lookup gave its name
    (decision 322): wabac.js opens only that member to resolve an original at another URL."""
    body_len = len(ex.body or b"")
    warc_headers = {"WARC-Date": _date(ex.started)}
    container = original.get("container")
    if isinstance(container, str) and CONTAINER.fullmatch(container):
        warc_headers["WARC-Refers-To-Container"] = container
    return w.create_revisit_record(ex.url, digest, original["uri"], original["date"],
                                   http_headers=response_headers(ex, body_len), warc_headers_dict=warc_headers)


def _write_exchange(w: WARCWriter, ex: Exchange, revisits: Revisits | None = None) -> None:
    if ex.status is None:
        _write_metadata(w, ex, [("incomplete", "true"), ("reason", ex.incomplete or "loadingFailed"),
                                ("blockedReason", ex.failure or "")])
        return
    if ex.withheld in ("no-archive", "deny"):
        _write_metadata(w, ex, [("action", ex.withheld), ("pattern", ex.pattern or ""), ("method", ex.method),
                                ("resourceType", ex.resource_type), ("target", ex.target)])
        return
    body = ex.body or b""
    if revisits is not None and revisits.written and skippable(ex):
        pair = (ex.url, payload_digest(body))
        if pair in revisits.written:  # an earlier capture of this crawl wrote it (decision 321)
            if pair not in revisits.left_out:
                revisits.left_out.append(pair)
                revisits.left_out_bytes += len(body)
            return
    date = _date(ex.started)
    warc_headers = {"WARC-Date": date}
    if ex.truncated:
        warc_headers["WARC-Truncated"] = "length"
    digest = payload_digest(body) if revisits and revisits.held and eligible(ex) else None
    if ex.not_modified is not None:  # extension conditional: the site answered 304 (decision 331)
        resp = conditional.revisit_record(w, ex, response_headers(ex, len(body)), date)
    elif digest is not None and digest in revisits.held:  # type: ignore[union-attr]
        resp = _write_revisit(w, ex, digest, revisits.held[digest])  # type: ignore[union-attr]
        revisits.count += 1  # type: ignore[union-attr]
        revisits.bytes_saved += len(body)  # type: ignore[union-attr]
    else:
        resp = w.create_warc_record(ex.url, "response", payload=io.BytesIO(body), length=len(body),
                                    http_headers=response_headers(ex, len(body)), warc_headers_dict=warc_headers)
    req_body = ex.req_body or b""
    req = w.create_warc_record(ex.url, "request", payload=io.BytesIO(req_body), length=len(req_body),
                               http_headers=request_headers(ex), warc_headers_dict={"WARC-Date": date})
    resp_id = resp.rec_headers.get_header("WARC-Record-ID")
    req.rec_headers.add_header("WARC-Concurrent-To", resp_id)
    resp.rec_headers.add_header("WARC-Concurrent-To", req.rec_headers.get_header("WARC-Record-ID"))
    w.write_record(resp)
    w.write_record(req)
    # a 304's own status line and headers: in the datapackage (conditional.answer, decision 391)
    if ex.truncated:
        _write_metadata(w, ex, [("truncated", ex.truncated), ("encodedDataLength", str(ex.encoded_length or 0)),
                                ("reason", ex.failure or "")], refers_to=resp_id)
    elif ex.incomplete:
        _write_metadata(w, ex, [("incomplete", "true"), ("reason", ex.incomplete), ("blockedReason", ex.failure or "")],
                        refers_to=resp_id)


def cdxj_index(warc_path: Path) -> bytes:
    """Sorted CDXJ of the response and resource records of ``warc_path`` (``filename`` = ``data.warc.gz``)."""
    out = io.StringIO()
    indexer = CDXJIndexer(out, [str(warc_path)], post_append=True, sort=True,
                          records="response,revisit,resource", filename="data.warc.gz")
    indexer.process_all()
    return out.getvalue().encode("utf-8")
