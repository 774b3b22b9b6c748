"""The S3 stand-in speaks what the stack uses: put/get/head/list, presigned GET, persistence."""

from __future__ import annotations

import uuid

import httpx
import pytest
from botocore.exceptions import ClientError

from devstack.s3 import make_client, start


def test_put_get_head_list_and_presigned_get(s3_server):
    c = s3_server.client()
    key = f"{uuid.uuid4()}_corr%20id_lab%5Fel.result.json"
    body = b'{"status": "success"}'
    c.put_object(Bucket=s3_server.bucket, Key=key, Body=body, ContentType="application/json")
    head = c.head_object(Bucket=s3_server.bucket, Key=key)
    assert head["ContentLength"] == len(body)
    assert c.get_object(Bucket=s3_server.bucket, Key=key)["Body"].read() == body
    listed = c.list_objects_v2(Bucket=s3_server.bucket, Prefix=key[:36])
    assert [o["Key"] for o in listed["Contents"]] == [key]
    url = c.generate_presigned_url(
        "get_object", Params={"Bucket": s3_server.bucket, "Key": key}, ExpiresIn=60
    )
    r = httpx.get(url)
    assert r.status_code == 200 and r.content == body
    ranged = httpx.get(url, headers={"Range": "bytes=2-7"})
    assert ranged.status_code == 206 and ranged.content == body[2:8]


@pytest.mark.parametrize("suffix", [1, 70_000, 200_000])
def test_suffix_range_reads_the_tail(s3_server, suffix):
    """RFC 9110 §14.1.2 `bytes=-N` is the last N bytes (all of them when N ≥ size): how
    ReplayWeb.page reads a WACZ's zip directory (s3rver alone answered the head)."""
    c = s3_server.client()
    key = f"{uuid.uuid4()}.wacz"
    body = bytes(range(256)) * 600  # 153,600 bytes, like a small page's WACZ
    c.put_object(Bucket=s3_server.bucket, Key=key, Body=body)
    url = c.generate_presigned_url("get_object", Params={"Bucket": s3_server.bucket, "Key": key}, ExpiresIn=60)
    r = httpx.get(url, headers={"Range": f"bytes=-{suffix}"})
    first = max(0, len(body) - suffix)
    assert r.status_code == 206 and r.content == body[first:]
    assert r.headers["content-range"] == f"bytes {first}-{len(body) - 1}/{len(body)}"


def test_missing_key_and_bad_credentials_are_errors(s3_server):
    c = s3_server.client()
    with pytest.raises(ClientError) as e:
        c.head_object(Bucket=s3_server.bucket, Key=f"nope-{uuid.uuid4()}")
    assert e.value.response["Error"]["Code"] in ("404", "NoSuchKey")
    # s3rver checks the access key id (it does not verify SigV4 signatures, see devstack/s3.py).
    bad = make_client(s3_server.endpoint, "not-a-key", s3_server.secret_access_key)
    with pytest.raises(ClientError) as e:
        bad.put_object(Bucket=s3_server.bucket, Key="x", Body=b"x")
    assert e.value.response["ResponseMetadata"]["HTTPStatusCode"] == 403
    assert e.value.response["Error"]["Code"] == "InvalidAccessKeyId"


def test_objects_survive_a_restart(tmp_path):
    first = start(tmp_path / "data", bucket="keepme")
    try:
        first.client().put_object(Bucket="keepme", Key="k.bin", Body=b"\x00\x01" * 5000)
    finally:
        first.stop()
    second = start(tmp_path / "data", bucket="keepme")
    try:
        got = second.client().get_object(Bucket="keepme", Key="k.bin")["Body"].read()
        assert got == b"\x00\x01" * 5000
    finally:
        second.stop()


def test_cli_launcher_prints_endpoint_and_stops_on_sigterm(tmp_path):
    import json
    import subprocess
    import sys

    proc = subprocess.Popen([sys.executable, "-m", "devstack.s3", "--host", "127.0.0.1", "--port", "0",
                             "--data", str(tmp_path / "d"), "--bucket", "clibucket"], stdout=subprocess.PIPE, text=True)
    try:
        info = json.loads(proc.stdout.readline())
        assert info["bucket"] == "clibucket"
        c = make_client(info["endpoint"], "browserhive", "browserhive")
        c.put_object(Bucket="clibucket", Key="k", Body=b"v")
        assert c.get_object(Bucket="clibucket", Key="k")["Body"].read() == b"v"
        proc.terminate()
        assert proc.wait(15) == 0
        with pytest.raises(httpx.HTTPError):
            httpx.get(info["endpoint"], timeout=2)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
