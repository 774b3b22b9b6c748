"""``ledger.s3.S3Store`` against the real S3-compatible server (and a port where none listens)."""

from __future__ import annotations

import socket
import urllib.parse
import uuid

import pytest

from ledger.s3 import ObjectTooLarge, S3Store, S3Unavailable, parse_location

pytestmark = pytest.mark.anyio


async def test_bounded_reads(s3store, s3_server) -> None:
    key = f"t/{uuid.uuid4()} a+b ü.json"  # verbatim: space, plus, non-ASCII
    s3_server.client().put_object(Bucket=s3_server.bucket, Key=key, Body=b'{"ok": [1, 2]}')
    assert await s3store.get_bytes(key, 100) == b'{"ok": [1, 2]}'
    assert await s3store.get_json(key, 100) == {"ok": [1, 2]}
    assert await s3store.get_bytes(key.replace("+", " "), 100) is None  # never decoded
    assert await s3store.get_json(f"t/{uuid.uuid4()}", 100) is None
    with pytest.raises(ObjectTooLarge) as info:
        await s3store.get_bytes(key, 10)
    assert info.value.max_bytes == 10
    assert await s3store.get_bytes(key, 14) == b'{"ok": [1, 2]}'  # exactly at the cap is fine
    s3_server.client().put_object(Bucket=s3_server.bucket, Key=key + ".bad", Body=b"\xff\xfe")
    with pytest.raises(ValueError):
        await s3store.get_json(key + ".bad", 100)


async def test_unreachable_store_raises_s3_unavailable() -> None:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    store = S3Store(f"http://127.0.0.1:{port}", "browserhive", "us-east-1", "k", "s", connect_timeout_s=1)
    with pytest.raises(S3Unavailable, match=f"127.0.0.1:{port}"):
        await store.get_bytes("anything", 10)


def test_presign_is_local_path_style_and_300_s() -> None:
    store = S3Store("http://127.0.0.1:1", "browserhive", "us-east-1", "k", "s")
    url = store.presign_get("org/acme/x y+z.wacz", 300, bucket="other", download_name="x y+z.wacz")
    assert url.startswith("http://127.0.0.1:1/other/org/acme/x%20y%2Bz.wacz?")
    assert "X-Amz-Expires=300" in url and "response-content-disposition=attachment" in url


KEYS = ["org/acme/x y+z.wacz", "a b/c+d/é~x%20.wacz", "/lead//dbl/../x?.wacz", "k!*'()[]{};:@&=$,#.wacz",
        "日本/ü\u00a0tab\t.wacz"]


def test_presign_equals_boto3s_generate_presigned_url() -> None:
    """The direct signer returns exactly the URL boto3's ``generate_presigned_url`` returns
    (same SigV4 signature) for awkward keys, with and without a download name."""
    store = S3Store("http://127.0.0.1:8333", "browserhive", "eu-central-1", "AKIDEXAMPLE", "wJalr/K7MDENG+bPxRfiCY")
    assert store._query_auth_credentials is not None  # the direct path is the one under test
    for key in KEYS:
        for name in (None, key.rsplit("/", 1)[-1]):
            for bucket in ("browserhive", "other.bucket-1"):
                for _ in range(10):  # both must be signed within the same second (X-Amz-Date)
                    ours = store.presign_get(key, 300, bucket=bucket, download_name=name)
                    params = {"Bucket": bucket, "Key": key}
                    if name:
                        params["ResponseContentDisposition"] = ours.split("response-content-disposition=")[1].split("&")[0]
                        params["ResponseContentDisposition"] = urllib.parse.unquote(params["ResponseContentDisposition"])
                    theirs = store.client.generate_presigned_url("get_object", Params=params, ExpiresIn=300)
                    if ours.split("X-Amz-Date=")[1][:16] == theirs.split("X-Amz-Date=")[1][:16]:
                        break
                assert ours == theirs, key


async def test_presigned_url_downloads_from_the_real_store(s3_server) -> None:
    """The real S3-compatible server accepts the direct signer's URL for an awkward key."""
    import httpx

    key = f"t/{uuid.uuid4()} a+b ü~.wacz"
    s3_server.client().put_object(Bucket=s3_server.bucket, Key=key, Body=b"wacz bytes")
    store = S3Store(s3_server.endpoint, s3_server.bucket, "us-east-1", s3_server.access_key_id, s3_server.secret_access_key)
    url = store.presign_get(key, 300, download_name="a+b ~.wacz")
    async with httpx.AsyncClient() as client:
        r = await client.get(url)
    assert r.status_code == 200 and r.content == b"wacz bytes"
    assert r.headers["content-disposition"] == 'attachment; filename="a_b__.wacz"'


def test_presign_without_static_keys_uses_boto3() -> None:
    store = S3Store("http://127.0.0.1:8333/prefix", "browserhive", "us-east-1", "k", "s")
    assert store._query_auth_credentials is None  # an endpoint with a path: boto3 builds the URL
    assert store.presign_get("x.wacz", 300).startswith("http://127.0.0.1:8333/prefix/browserhive/x.wacz?")


def test_parse_location() -> None:
    assert parse_location("s3://b/k/with space+plus") == ("b", "k/with space+plus")
    for bad in ("http://b/k", "s3://", "s3://b", "s3://b/", "s3:///k", None):
        with pytest.raises(ValueError):
            parse_location(bad)  # type: ignore[arg-type]
