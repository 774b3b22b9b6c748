"""The ledger's S3 access: bounded reads of manifests/links and presigned GET URLs.

boto3 is synchronous, so reads run in a worker thread (``anyio.to_thread``); presigning is a
local computation (no request is sent). Addressing is path-style and checksums are computed /
validated only when an operation requires them, so SeaweedFS, s3rver and other non-AWS servers
accept our requests.

Keys are always used verbatim (spaces, ``+``, ``/``, non-ASCII): never URL-decoded and never
rebuilt from task ids (reference/contracts.md §B.1).
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlsplit

import anyio
import boto3
from botocore.auth import S3SigV4QueryAuth
from botocore.awsrequest import AWSRequest
from botocore.config import Config
from botocore.credentials import Credentials
from botocore.utils import percent_encode
from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    ConnectionClosedError,
    EndpointConnectionError,
    ReadTimeoutError,
    ConnectTimeoutError,
)

__all__ = ["S3Store", "S3Unavailable", "ObjectTooLarge", "parse_location"]

_NOT_FOUND_CODES = {"NoSuchKey", "404", "NotFound", "NoSuchBucket"}


def is_missing_object(exc: ClientError) -> bool:
    """True when S3 said the object does not exist (404 / NoSuchKey / NotFound); a missing
    bucket (NoSuchBucket, a 404 too) counts, as a HEAD cannot tell them apart."""
    status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
    return status == 404 or str(exc.response.get("Error", {}).get("Code")) in ("404", "NoSuchKey", "NotFound")


class S3Unavailable(RuntimeError):
    """The object store did not answer (connection refused/reset, timeout, 5xx)."""


class ObjectTooLarge(ValueError):
    """The object is larger than the caller's byte cap; ``.size`` is its size when known."""

    def __init__(self, key: str, max_bytes: int, size: int | None = None):
        self.key, self.max_bytes, self.size = key, max_bytes, size
        super().__init__(f"s3 object {key!r} is larger than {max_bytes} bytes" + (f" ({size})" if size else ""))


def parse_location(location: str) -> tuple[str, str]:
    """Split ``s3://bucket/key`` into ``(bucket, key)``; the key is taken verbatim.

    Raises ``ValueError`` when the string does not start with ``s3://`` or the bucket or key
    is empty (reference/ledger.md §9.1 ``parseS3Uri``).
    """
    if not isinstance(location, str) or not location.startswith("s3://"):
        raise ValueError(f"not an s3:// location: {location!r}")
    bucket, sep, key = location[len("s3://") :].partition("/")
    if not bucket or not sep or not key:
        raise ValueError(f"s3 location needs a bucket and a key: {location!r}")
    return bucket, key


class S3Store:
    """One bucket on one S3-compatible endpoint.

    ``endpoint`` e.g. ``http://127.0.0.1:8333``; ``bucket`` is the configured bucket that
    manifests and links are read from. Methods that take ``bucket=`` can address another
    bucket on the same endpoint (archives record the bucket of their WACZ location).
    """

    def __init__(
        self,
        endpoint: str,
        bucket: str,
        region: str = "us-east-1",
        access_key_id: str | None = None,
        secret_access_key: str | None = None,
        *,
        connect_timeout_s: float = 5.0,
        read_timeout_s: float = 30.0,
    ):
        self.endpoint = endpoint
        self.bucket = bucket
        self.region = region
        config = Config(
            s3={"addressing_style": "path"},
            signature_version="s3v4",
            request_checksum_calculation="when_required",
            response_checksum_validation="when_required",
            connect_timeout=connect_timeout_s,
            read_timeout=read_timeout_s,
            retries={"max_attempts": 2, "mode": "standard"},
        )
        self.client = boto3.session.Session().client(
            "s3",
            endpoint_url=endpoint,
            region_name=region,
            aws_access_key_id=access_key_id,
            aws_secret_access_key=secret_access_key,
            config=config,
        )

        # the direct presigner needs static keys and a bare endpoint; else boto3's own path
        base = urlsplit(endpoint)
        direct = bool(access_key_id and secret_access_key and base.scheme in ("http", "https") and base.netloc
                      and base.path in ("", "/") and not base.query)
        self._endpoint_base = f"{base.scheme}://{base.netloc}"
        self._query_auth_credentials = Credentials(access_key_id, secret_access_key) if direct else None

    @classmethod
    def from_settings(cls, settings: Any) -> "S3Store":
        """Build from :class:`ledger.settings.Settings` (raises ``MissingSettings``)."""
        settings.require("s3_endpoint", "s3_bucket", "s3_access_key_id", "s3_secret_access_key")
        return cls(
            settings.s3_endpoint,
            settings.s3_bucket,
            settings.s3_region,
            settings.s3_access_key_id,
            settings.s3_secret_access_key,
        )

    # -- reads ---------------------------------------------------------------------------
    def _get_bytes_sync(self, key: str, max_bytes: int, bucket: str | None) -> bytes | None:
        try:
            resp = self.client.get_object(Bucket=bucket or self.bucket, Key=key)
        except ClientError as exc:
            err = exc.response.get("Error", {})
            status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
            if str(err.get("Code")) in _NOT_FOUND_CODES or status == 404:
                return None
            if status and status >= 500:
                raise S3Unavailable(f"s3 answered {status} for {key!r}: {err.get('Message') or err.get('Code')}") from exc
            raise
        except (EndpointConnectionError, ConnectTimeoutError, ReadTimeoutError, ConnectionClosedError) as exc:
            raise S3Unavailable(f"s3 at {self.endpoint} did not answer: {exc}") from exc
        body = resp["Body"]
        try:
            size = resp.get("ContentLength")
            if size is not None and size > max_bytes:
                raise ObjectTooLarge(key, max_bytes, size)
            data = body.read(max_bytes + 1)  # one byte more tells "too large" without a length
            if len(data) > max_bytes:
                raise ObjectTooLarge(key, max_bytes, size)
            return data
        except (ReadTimeoutError, ConnectionClosedError, BotoCoreError) as exc:
            raise S3Unavailable(f"s3 read of {key!r} broke off: {exc}") from exc
        finally:
            body.close()

    async def get_bytes(self, key: str, max_bytes: int, *, bucket: str | None = None) -> bytes | None:
        """The object's bytes, or ``None`` when there is no such key.

        Raises :class:`ObjectTooLarge` above ``max_bytes`` (bytes), :class:`S3Unavailable` when
        the store does not answer; other S3 errors (e.g. AccessDenied) propagate as botocore
        ``ClientError``.
        """
        return await anyio.to_thread.run_sync(self._get_bytes_sync, key, max_bytes, bucket)

    def _size_sync(self, key: str, bucket: str | None) -> int | None:
        try:
            return int(self.client.head_object(Bucket=bucket or self.bucket, Key=key)["ContentLength"])
        except ClientError as exc:
            status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
            if str(exc.response.get("Error", {}).get("Code")) in _NOT_FOUND_CODES or status == 404:
                return None
            if status and status >= 500:
                raise S3Unavailable(f"s3 answered {status} for HEAD {key!r}") from exc
            raise
        except (EndpointConnectionError, ConnectTimeoutError, ReadTimeoutError, ConnectionClosedError) as exc:
            raise S3Unavailable(f"s3 at {self.endpoint} did not answer: {exc}") from exc

    async def size(self, key: str, *, bucket: str | None = None) -> int | None:
        """The object's size in bytes (HEAD), or ``None`` when there is no such key. Raises
        :class:`S3Unavailable` when the store does not answer."""
        return await anyio.to_thread.run_sync(self._size_sync, key, bucket)

    async def get_json(self, key: str, max_bytes: int, *, bucket: str | None = None) -> Any | None:
        """The object parsed as JSON (UTF-8), or ``None`` when there is no such key.

        Raises ``ValueError`` (``json.JSONDecodeError``/``UnicodeDecodeError``) for bytes that
        are not JSON, plus everything :meth:`get_bytes` raises.
        """
        data = await self.get_bytes(key, max_bytes, bucket=bucket)
        if data is None:
            return None
        return json.loads(data.decode("utf-8"))

    # -- URLs ----------------------------------------------------------------------------
    def presign_get(self, key: str, expires_s: int = 300, *, bucket: str | None = None,
                    download_name: str | None = None) -> str:
        """A presigned ``GetObject`` URL valid ``expires_s`` seconds (SigV4, local computation;
        existence of the object is not verified). ``download_name`` asks S3 to answer with
        ``Content-Disposition: attachment; filename=...`` so browsers save instead of render."""
        params = {"Bucket": bucket or self.bucket, "Key": key}
        if download_name:
            safe = "".join(c if c.isalnum() or c in "._-" else "_" for c in download_name)[:200] or "archive.wacz"
            params["ResponseContentDisposition"] = f'attachment; filename="{safe}"'
        if self._query_auth_credentials is None:
            return self.client.generate_presigned_url("get_object", Params=params, ExpiresIn=int(expires_s))
        return self._presign_direct(params, int(expires_s))

    def _presign_direct(self, params: dict[str, str], expires_s: int) -> str:
        """The URL ``generate_presigned_url("get_object", ...)`` returns, signed by the same
        botocore SigV4 query signer (``S3SigV4QueryAuth``) without the client's per-call
        parameter validation, endpoint-ruleset resolution and event hooks (about half of its
        cost). Path-style: ``/<bucket>/<key>`` percent-encoded as botocore renders ``{Key+}``
        (``/`` and ``~`` kept); tests compare both URLs byte for byte."""
        path = f"/{percent_encode(params['Bucket'], safe='~')}/{percent_encode(params['Key'], safe='/~')}"
        query = ""
        if "ResponseContentDisposition" in params:
            query = "?response-content-disposition=" + percent_encode(params["ResponseContentDisposition"])
        request = AWSRequest(method="GET", url=self._endpoint_base + path + query)
        S3SigV4QueryAuth(self._query_auth_credentials, "s3", self.region, expires=expires_s).add_auth(request)
        return request.prepare().url
