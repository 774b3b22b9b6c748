"""Response bodies as the site sent them, taken at the browser's Fetch pause, for the recorder.

Why: ``Response.body()`` is CDP ``Network.getResponseBody``, which returns a textual resource
(documents, scripts, stylesheets, ``text/*``…) *charset-decoded* and re-encoded as UTF-8: a
``windows-1252`` page's 0x93/0x94 became ``E2 80 9C``/``E2 80 9D`` under its original
``charset=windows-1252`` header (issue 24 item 3: mojibake on replay), a UTF-16 body lost its
byte order mark, and so on. ``Fetch.getResponseBody`` at the response stage gives the bytes the
network delivered: the entity after content decoding (gzip/br, chunked framing removed) and
before any charset decoding — the ones the WARC must hold (decision 111).

:class:`.files.FileTaker` reads them while the response is paused and :meth:`put` s them here
before it lets the response continue, so they are here before the browser reports the request
finished; :meth:`take` hands each to the recorder once. Keyed by ``(method, url, Range)``: a
media element's range requests of one URL are told apart by their ``Range`` header; repeats of
one key are kept in arrival order. Bounded by :attr:`max_bytes` (the oldest dropped first — the
recorder then falls back to ``Response.body()``).
"""

from __future__ import annotations

import collections


def key(method: str, url: str, headers) -> tuple[str, str, str]:
    """The store key of a request: ``headers`` is a mapping or a list of (name, value) pairs."""
    pairs = headers.items() if hasattr(headers, "items") else headers
    rng = next((str(v) for k, v in pairs if str(k).lower() == "range"), "")
    return method.upper(), url, rng


class RawBodies:
    """At most ``max_bytes`` bytes of bodies waiting for the recorder."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.size = 0
        self._bodies: collections.OrderedDict[tuple, collections.deque[bytes]] = collections.OrderedDict()

    def put(self, k: tuple[str, str, str], body: bytes) -> None:
        self._bodies.setdefault(k, collections.deque()).append(body)
        self.size += len(body)
        while self.size > self.max_bytes and self._bodies:
            old_key, queue = next(iter(self._bodies.items()))
            self.size -= len(queue.popleft())
            if not queue:
                del self._bodies[old_key]

    def take(self, k: tuple[str, str, str]) -> bytes | None:
        """The oldest body kept under ``k`` (removed), or None."""
        queue = self._bodies.get(k)
        if not queue:
            return None
        body = queue.popleft()
        self.size -= len(body)
        if not queue:
            del self._bodies[k]
        return body

    def clear(self) -> None:
        self._bodies.clear()
        self.size = 0
