"""Helpers of the capture tests: requests, S3 reads, WACZ reading."""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import zipfile
from collections.abc import Iterator

import httpx

ALL_FORMATS = {"png": True, "webp": True, "html": True, "links": True, "mhtml": True, "wacz": True}
ONLY_WACZ = {"png": False, "webp": False, "html": False, "links": False, "mhtml": False, "wacz": True}


@contextlib.contextmanager
def capture_server_process(s3_server, tmp_dir, *args: str) -> Iterator[str]:
    """One ``python -m waggle_capture`` writing to ``s3_server`` with ``args``; its URL for the
    block, terminated after."""
    from devstack.serving import start_module

    proc, url = start_module("waggle_capture", "--s3-endpoint", s3_server.endpoint, *args, tmp_dir=tmp_dir)
    try:
        yield url
    finally:
        proc.terminate()
        proc.wait(30)


def script(id_: str, source: str, **extra) -> dict:
    return {"id": id_, "source": source, "sha256": hashlib.sha256(source.encode("utf-8")).hexdigest(), **extra}


def capture(server: str, timeout: float = 150, **body) -> httpx.Response:
    return httpx.post(f"{server}/captures", json=body, timeout=timeout)


@contextlib.contextmanager
def faults(server: str, **knobs) -> Iterator[None]:
    """Set fault knobs for the block, reset them afterwards."""
    r = httpx.put(f"{server}/faults", json=knobs)
    assert r.status_code == 200, r.text
    try:
        yield
    finally:
        httpx.put(f"{server}/faults", json={k: type(v)() if not isinstance(v, str) else None for k, v in knobs.items()})


def s3_get(s3_server, location: str) -> bytes:
    assert location.startswith(f"s3://{s3_server.bucket}/"), location
    key = location[len(f"s3://{s3_server.bucket}/"):]
    return s3_server.client().get_object(Bucket=s3_server.bucket, Key=key)["Body"].read()


def task_keys(s3_server, task_id: str) -> list[str]:
    listed = s3_server.client().list_objects_v2(Bucket=s3_server.bucket, Prefix=task_id)
    return sorted(o["Key"] for o in listed.get("Contents", []))


def wacz_members(data: bytes) -> dict[str, bytes]:
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        return {n: z.read(n) for n in z.namelist()}


def behavior_reports(members: dict[str, bytes]) -> list[dict]:
    """The behaviors' reports of a WACZ (its datapackage's ``browserhive:capture.behaviorReports``;
    until decision 391 the member ``behaviors/reports.jsonl``, which is no longer written)."""
    assert "behaviors/reports.jsonl" not in members
    return json.loads(members["datapackage.json"])["browserhive:capture"]["behaviorReports"]


def cdxj_lines(index: bytes) -> list[tuple[str, str, dict]]:
    out = []
    for line in index.decode().splitlines():
        key, ts, js = line.split(" ", 2)
        out.append((key, ts, json.loads(js)))
    return out


def warc_records(warc: bytes) -> list[tuple[object, bytes]]:
    """Every record of a WARC with its payload read (warcio streams, so read while iterating)."""
    from warcio.archiveiterator import ArchiveIterator

    return [(rec, rec.content_stream().read()) for rec in ArchiveIterator(io.BytesIO(warc))]
