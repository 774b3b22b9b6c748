"""Bodies of a site's plain-HTTP error answers, kept by the proxy for the recorder.

Why: Blink cancels a script, stylesheet or font load as soon as its response head says
status ≥ 400 (``requestfailed`` ``net::ERR_ABORTED``), so Chromium never has the body and
``Response.body()`` fails — yet a 404 page is what the site served and belongs in the WARC. The
proxy sees plain-HTTP answers (not TLS tunnels), so for a ``GET`` answered ≥ 400 it reads the
body to its end (at most :data:`CAP` bytes, even after the browser hung up) and keeps it here,
decoded (chunked, gzip/deflate) like ``Response.body()``. A body it could not read whole
(cut, too large, unknown encoding) is not kept: the exchange stays counted as missing its body.
"""

from __future__ import annotations

import asyncio
import gzip
import http.client
import io
import zlib

CAP = 2 * 1024 * 1024  # bytes of one raw error answer kept


class _Raw:
    def __init__(self, data: bytes):
        self._f = io.BytesIO(data)

    def makefile(self, *args, **kwargs):
        return self._f


def decode(raw: bytes) -> bytes | None:
    """The decoded body of one raw HTTP/1.x response (head and body bytes), or None when it is
    incomplete or its content coding is not gzip/deflate/identity."""
    try:
        resp = http.client.HTTPResponse(_Raw(raw))  # type: ignore[arg-type]
        resp.begin()
        body = resp.read()
        coding = (resp.getheader("Content-Encoding") or "identity").strip().lower()
        if coding in ("", "identity"):
            return body
        if coding in ("gzip", "x-gzip"):
            return gzip.decompress(body)
        if coding == "deflate":
            try:
                return zlib.decompress(body)
            except zlib.error:
                return zlib.decompress(body, -zlib.MAX_WBITS)
    except (http.client.HTTPException, OSError, EOFError, zlib.error, ValueError):
        return None
    return None


class ErrorBodies:
    """URL → the body of its latest plain-HTTP error answer (bytes), once read to its end."""

    def __init__(self) -> None:
        self._bodies: dict[str, asyncio.Future] = {}

    def expect(self, url: str) -> None:
        """An error answer for ``url`` started passing (the head was seen)."""
        self._bodies[url] = asyncio.get_running_loop().create_future()

    def finish(self, url: str, raw: bytes | None) -> None:
        """The answer for ``url`` ended: ``raw`` head + body when read whole, else None."""
        fut = self._bodies.get(url)
        if fut is not None and not fut.done():
            fut.set_result(decode(raw) if raw is not None else None)

    async def get(self, url: str, timeout_s: float) -> bytes | None:
        """The body of ``url``'s error answer (waiting ≤ ``timeout_s`` for its end), or None."""
        fut = self._bodies.get(url)
        if fut is None:
            return None
        try:
            return await asyncio.wait_for(asyncio.shield(fut), timeout_s)
        except asyncio.TimeoutError:
            return None

    def clear(self) -> None:
        self._bodies.clear()
