"""Where artifacts and the ``.result.json`` manifest go (contracts.md §B.1, §B.2).

:class:`S3Sink` writes ``[prefix/]<name>`` into the server's bucket and returns
``s3://bucket/key``; :class:`HttpSink` implements the request's ``artifactSink``: ``PUT
<url>/<name>`` with ``Authorization: Bearer <token>`` and the media type, answering
``{"location"}`` which is used verbatim. Both raise :class:`SinkError` whose message starts with
the destination (→ ``errorDetails.type: artifact_sink`` / ``manifest.error``).
"""

from __future__ import annotations

from urllib.parse import quote

import anyio.to_thread
import httpx

from ledger.s3 import S3Store


class SinkError(RuntimeError):
    """An artifact could not be written; ``str()`` starts with the destination."""


class S3Sink:
    """Own bucket of the server (any path-style S3: SeaweedFS in compose, s3rver in the local stack)."""

    def __init__(self, endpoint: str, bucket: str, access_key_id: str, secret_access_key: str,
                 region: str = "us-east-1", key_prefix: str = "", timeout_s: float = 15.0):
        self.bucket = bucket
        self.key_prefix = key_prefix.strip("/")
        # the ledger's client settings: path-style, SigV4, checksums only when required, 2 attempts
        self.client = S3Store(endpoint, bucket, region, access_key_id, secret_access_key,
                              connect_timeout_s=timeout_s, read_timeout_s=timeout_s).client

    def key(self, name: str) -> str:
        return f"{self.key_prefix}/{name}" if self.key_prefix else name

    def describe(self) -> str:
        return f"s3://{self.bucket}"

    def location(self, name: str) -> str:
        """Where :meth:`put` writes ``name``: ``s3://bucket/key`` (known before the write)."""
        return f"s3://{self.bucket}/{self.key(name)}"

    async def put(self, name: str, data: bytes, content_type: str) -> str:
        key = self.key(name)
        dest = f"s3://{self.bucket}/{key}"
        try:
            await anyio.to_thread.run_sync(lambda: self.client.put_object(
                Bucket=self.bucket, Key=key, Body=data, ContentType=content_type))
        except Exception as e:  # noqa: BLE001 — any store failure is an artifact_sink failure
            raise SinkError(f"{dest}: {e}") from e
        return dest


class HttpSink:
    """The caller's artifact sink (``artifactSink {url, token}``)."""

    def __init__(self, url: str, token: str, timeout_s: float = 15.0, attempts: int = 3):
        self.url = url.rstrip("/")
        self.token = token
        self.timeout_s = timeout_s
        self.attempts = attempts

    def describe(self) -> str:
        return self.url

    async def put(self, name: str, data: bytes, content_type: str) -> str:
        dest = f"{self.url}/{quote(name, safe='')}"
        last = ""
        async with httpx.AsyncClient(timeout=self.timeout_s) as client:
            for _ in range(self.attempts):
                try:
                    r = await client.put(dest, content=data, headers={
                        "authorization": f"Bearer {self.token}", "content-type": content_type})
                except httpx.HTTPError as e:
                    last = f"{type(e).__name__}: {e}"
                    continue
                if r.status_code == 200:
                    try:
                        return str(r.json()["location"])
                    except (ValueError, KeyError, TypeError):
                        raise SinkError(f"{dest}: answer without location") from None
                last = f"HTTP {r.status_code} {r.text[:200]}"
                if r.status_code < 500:
                    break
        raise SinkError(f"{dest}: {last}")
