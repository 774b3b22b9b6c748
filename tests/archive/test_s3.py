"""``ledger.s3.S3Store`` against the real S3-compatible server (and a port where none listens)."""

from __future__ import annotations

import socket
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


def test_parse_location() -> None:
    assert parse_location("s3://b/k/with space+plus") == ("b", "k/with space+plus")
    for bad in ("http://b/k", "s3://", "s3://b", "s3://b/", "s3:///k", None):
        with pytest.raises(ValueError):
            parse_location(bad)  # type: ignore[arg-type]
