"""A zip over HTTP ranges: :class:`_RangeFile`, the seekable view the WACZ readers
(``ledger.archive.wacz_check``, ``main_document``, ``facts``) open with ``zipfile``; moved here
from ``wacz_check`` so that those modules import it without importing each other."""

from __future__ import annotations

import io
from collections.abc import Callable
from typing import Any

TAIL_BYTES = 64 * 1024  # end of central directory + the central directory of a page's WACZ
BLOCK_BYTES = 1024 * 1024  # one ranged GET while reading past what was fetched


class _RangeFile(io.RawIOBase):
    """A read-only, seekable view of ``size`` bytes fetched through ``fetch(start, length)``;
    keeps the segments it fetched, so zipfile's small reads cost no extra GET."""

    def __init__(self, size: int, fetch: Callable[[int, int], bytes]):
        self.size, self._fetch, self._pos = size, fetch, 0
        self._segments: list[tuple[int, bytes]] = []
        self.requests = self.bytes_read = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = 0) -> int:
        base = {0: 0, 1: self._pos, 2: self.size}[whence]
        self._pos = max(0, base + offset)
        return self._pos

    def prefetch(self, start: int, length: int) -> None:
        length = min(length, self.size - start)
        if length > 0:
            data = self._fetch(start, length)
            self.requests += 1
            self.bytes_read += len(data)
            self._segments = [s for s in self._segments if len(s[1]) <= TAIL_BYTES][-4:] + [(start, data)]

    def readinto(self, buffer: Any) -> int:
        """Fill ``buffer`` completely unless the end comes first (zipfile relies on full reads)."""
        want = min(len(buffer), self.size - self._pos)
        done = 0
        while done < want:
            chunk = self._cached(self._pos, want - done)
            if chunk is None:
                self.prefetch(self._pos, max(want - done, BLOCK_BYTES))
                chunk = self._cached(self._pos, want - done)
            if not chunk:
                break
            buffer[done: done + len(chunk)] = chunk
            done += len(chunk)
            self._pos += len(chunk)
        return done

    def _cached(self, pos: int, want: int) -> bytes | None:
        for start, data in reversed(self._segments):
            if start <= pos < start + len(data):
                return data[pos - start: pos - start + want]
        return None


def open_object(client: Any, bucket: str, key: str) -> _RangeFile | None:
    """A :class:`_RangeFile` over ``s3://bucket/key`` (ranged GETs through boto3 ``client``) with
    its zip tail already fetched; None when the object is missing. Other S3 errors are raised."""
    from botocore.exceptions import ClientError

    from ledger.s3 import is_missing_object

    try:
        size = int(client.head_object(Bucket=bucket, Key=key)["ContentLength"])
    except ClientError as exc:
        if is_missing_object(exc):
            return None
        raise

    def fetch(start: int, length: int) -> bytes:
        resp = client.get_object(Bucket=bucket, Key=key, Range=f"bytes={start}-{start + length - 1}")
        with resp["Body"] as body:
            return body.read()

    f = _RangeFile(size, fetch)
    f.prefetch(max(0, size - TAIL_BYTES), TAIL_BYTES)
    return f
