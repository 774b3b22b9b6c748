"""Test data for search: WACZ files with given responses, crawls and admitted archives."""

from __future__ import annotations

import io
import tempfile
import uuid
from pathlib import Path
from typing import Any

import psycopg

from waggle_capture.wacz import build_wacz, pages_jsonl
from ledger.archive.admission import admit_level
from tests.archive.helpers import manifest, put_json


def warc(responses: list[tuple[str, int, str, bytes, dict[str, str]]]) -> bytes:
    """A gzipped WARC of ``(url, status, content type, body, extra headers)`` responses."""
    from warcio.statusandheaders import StatusAndHeaders
    from warcio.warcwriter import WARCWriter

    out = io.BytesIO()
    writer = WARCWriter(out, gzip=True)
    for url, status, ctype, body, extra in responses:
        headers = StatusAndHeaders(f"{status} X", [("Content-Type", ctype), ("Content-Length", str(len(body))),
                                                   *extra.items()], protocol="HTTP/1.1")
        writer.write_record(writer.create_warc_record(url, "response", payload=io.BytesIO(body), http_headers=headers))
    return out.getvalue()


def wacz(page_url: str, responses: list[tuple[str, int, str, bytes, dict[str, str]]]) -> bytes:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "data.warc.gz"
        path.write_bytes(warc(responses))
        out = Path(tmp) / "x.wacz"
        build_wacz(out, warc=path, cdxj=b"", pages=pages_jsonl(str(uuid.uuid4()), page_url, "2026-09-24T00:00:00Z", None),
                   extra=[], datapackage={"title": "t"})
        return out.read_bytes()


def html_page(url: str, html: str, ctype: str = "text/html; charset=utf-8") -> bytes:
    return wacz(url, [(url, 200, ctype, html.encode("utf-8"), {})])


def pdf_bytes(text: str, title: str = "") -> bytes:
    """A one-page PDF showing ``text`` in Helvetica (a hand-written file, offsets computed)."""
    stream = f"BT /F1 12 Tf 72 720 Td ({text}) Tj ET".encode("latin-1")
    objs = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R /Resources << /Font << /F1 5 0 R >> >> >>",
        b"<< /Length " + str(len(stream)).encode() + b" >>\nstream\n" + stream + b"\nendstream",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
        f"<< /Title ({title}) >>".encode("latin-1"),
    ]
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for n, body in enumerate(objs, 1):
        offsets.append(len(out))
        out += f"{n} 0 obj\n".encode() + body + b"\nendobj\n"
    xref = len(out)
    out += f"xref\n0 {len(objs) + 1}\n0000000000 65535 f \n".encode()
    for off in offsets:
        out += f"{off:010d} 00000 n \n".encode()
    out += f"trailer\n<< /Size {len(objs) + 1} /Root 1 0 R /Info 6 0 R >>\nstartxref\n{xref}\n%%EOF\n".encode()
    return bytes(out)


def insert_crawl(db_url: str, org: str, by: str = "flow") -> str:
    crawl = str(uuid.uuid4())
    with psycopg.connect(db_url) as conn:
        conn.execute(
            "INSERT INTO crawls (id, seeds, scope, max_depth, max_pages, per_host_delay_ms, host_parallelism,"
            " org_id, requested_by, state, stop_reason, finished_at)"
            " VALUES (%s, %s, 'same-host', 1, 10, 0, 1, %s, %s, 'succeeded', 'completed', now())",
            (crawl, ["https://x.example/"], org, by))
    return crawl


async def admit(pool: Any, s3_server: Any, store: Any, *, org: str, crawl: str, url: str, body: bytes,
                timestamp: str = "2026-09-24T00:00:04.210Z", submitted_by: str | None = None) -> str:
    """Upload ``body`` as the WACZ of one capture of ``url`` by ``crawl`` and admit it; its id."""
    task = str(uuid.uuid4())
    key = f"org/{org}/{task}.wacz"
    s3_server.client().put_object(Bucket=s3_server.bucket, Key=key, Body=body, ContentType="application/wacz+zip")
    mkey = f"org/{org}/{task}.result.json"
    put_json(s3_server, mkey, manifest(task, wacz_key=key, url=url, timestamp=timestamp, correlationId=crawl))
    async with pool.connection() as conn, conn.transaction():
        got = await admit_level(conn, store, bucket=s3_server.bucket, org_id=org, submitted_by=submitted_by,
                                results=[{"url": url, "status": "captured", "taskId": task,
                                          "manifestLocation": f"s3://{s3_server.bucket}/{mkey}"}])
    assert got.registered == 1, got
    async with pool.connection() as conn:
        row = await (await conn.execute("SELECT id FROM archives WHERE task_id = %s", (task,))).fetchone()
    return str(row["id"])
