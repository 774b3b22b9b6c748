"""Test data for the archive tests: manifests and S3 uploads."""

from __future__ import annotations

import json
import uuid
from typing import Any


def manifest(task_id: str | None = None, *, status: str = "success", bucket: str = "browserhive",
             wacz_key: str | None = None, url: str = "https://example.org/", complete: bool | None = True,
             timestamp: str = "2026-09-24T00:00:04.210Z", **extra: Any) -> dict:
    """A v12 ``CaptureResultReport`` as BrowserHive writes it."""
    task_id = task_id or str(uuid.uuid4())
    m: dict[str, Any] = {
        "taskId": task_id, "correlationId": "crawl-1", "url": url, "labels": ["smoke"], "status": status,
        "timestamp": timestamp, "captureProcessingTimeMs": 1234, "artifacts": {},
    }
    if status == "success":
        m["httpStatusCode"] = 200
        m["artifacts"] = {"wacz": f"s3://{bucket}/{wacz_key or task_id + '_crawl-1_smoke.wacz'}"}
        if complete is not None:
            m["completeness"] = {"bodylessUrls": [], "truncatedUrls": [], "complete": complete}
    else:
        m["errorDetails"] = {"type": "timeout" if status == "timeout" else "http", "message": "boom"}
    m.update(extra)
    return m


def put_json(s3_server, key: str, data: Any) -> None:
    s3_server.client().put_object(Bucket=s3_server.bucket, Key=key, Body=json.dumps(data).encode(),
                                  ContentType="application/json")


def warc_gz(url: str = "https://example.org/", body: bytes = b"<html><title>x</title>hello</html>") -> bytes:
    """A one-response WARC (gzip members) written by warcio."""
    import io

    from warcio.statusandheaders import StatusAndHeaders
    from warcio.warcwriter import WARCWriter

    out = io.BytesIO()
    writer = WARCWriter(out, gzip=True)
    headers = StatusAndHeaders("200 OK", [("Content-Type", "text/html"), ("Content-Length", str(len(body)))],
                               protocol="HTTP/1.1")
    writer.write_record(writer.create_warc_record(url, "response", payload=io.BytesIO(body), http_headers=headers))
    return out.getvalue()


def wacz_bytes(url: str = "https://example.org/", *, drop: tuple[str, ...] = (),
               tamper: str | None = None, pad_bytes: int = 0) -> bytes:
    """A WACZ as the capture server packages it (``waggle_capture.wacz.build_wacz``), then
    broken on request: ``drop`` members, ``tamper`` one member's bytes after hashing (the
    datapackage hash no longer matches). ``pad_bytes`` adds a stored member of that size."""
    import io
    import tempfile
    import zipfile
    from pathlib import Path

    from waggle_capture.wacz import Member, build_wacz, pages_jsonl

    with tempfile.TemporaryDirectory() as tmp:
        warc = Path(tmp) / "data.warc.gz"
        warc.write_bytes(warc_gz(url))
        cdxj = f'org,example)/ 20260924000000 {{"url": "{url}", "mime": "text/html", "status": "200"}}\n'.encode()
        extra = [Member("archive/pad.bin", b"\0" * pad_bytes, stored=True)] if pad_bytes else []
        out = Path(tmp) / "x.wacz"
        build_wacz(out, warc=warc, cdxj=cdxj, pages=pages_jsonl(str(uuid.uuid4()), url, "2026-09-24T00:00:00Z", "x"),
                   extra=extra, datapackage={"title": "test"})
        data = out.read_bytes()
    if not drop and tamper is None:
        return data
    src = zipfile.ZipFile(io.BytesIO(data))
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as dst:
        for info in src.infolist():
            if info.filename in drop:
                continue
            member = src.read(info.filename)
            if info.filename == tamper:
                member = member[:-1] + bytes([member[-1] ^ 0x01])
            dst.writestr(info, member)
    return buf.getvalue()


def put_wacz(s3_server, location: str, data: bytes | None = None) -> None:
    """Upload a WACZ at ``s3://bucket/key`` (creating the bucket when needed)."""
    bucket, _, key = location[len("s3://"):].partition("/")
    client = s3_server.client()
    try:
        client.head_bucket(Bucket=bucket)
    except Exception:  # noqa: BLE001 - the stand-in answers 404 for a bucket it does not have
        client.create_bucket(Bucket=bucket)
    client.put_object(Bucket=bucket, Key=key, Body=data if data is not None else wacz_bytes(),
                      ContentType="application/wacz+zip")
