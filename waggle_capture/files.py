"""Main-frame navigations that are files, not pages (issue 13 item 4, issue 17 item 2).

Why: a ``text/csv`` or ``application/octet-stream`` navigation makes Chromium start a download
(Playwright: ``Download is starting``), and a PDF opens Chromium's PDF viewer, whose
``Network.getResponseBody`` is the viewer's 601-byte wrapper page, not the PDF. Neither leaves
the file's bytes where the recorder can read them, and a retry fetches the file again.

How: CDP ``Fetch`` interception at the *response* stage (one pause per response of the page's
target). A main-frame 2xx response whose type the browser would not render as a page
(:func:`is_file`) is read here, from the network stream (``Fetch.takeResponseBodyAsStream`` +
``IO.read``), at most ``limit`` bytes (no read asks for more), and the navigation is then
aborted (``net::ERR_ABORTED``): the site sends the file once, the browser never downloads or
renders it. A body over the limit (declared by ``Content-Length`` or found while reading) keeps
its first ``limit`` bytes, marked ``truncated: too-large`` (``WARC-Truncated: length``,
``completeness.truncatedUrls``), never silently (issue 24 item 4).

Every other response with a body is read whole while paused (``Fetch.getResponseBody``: the
entity as the network delivered it, before any charset decoding) into :mod:`.rawbodies` for the
recorder, then continued (issue 24 item 3, decision 111) — except ``text/event-stream`` and a
declared length over the limit. The browser gets such a body once it is whole (as in
Browsertrix's recorder).

Playwright's own routes (the deny gate) use ``Fetch`` at the request stage on its own session;
both interceptions chain in Chromium (tested with a route installed). The pause shows filtered
response headers (no ``Set-Cookie``): the raw ones come from ``Network.*ExtraInfo`` events of
this session, which arrive before the pause (the last :data:`RAW_KEPT` requests are kept).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import logging
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from waggle_capture import rawbodies
from waggle_capture.rawbodies import RawBodies
from waggle_capture.recorder import Exchange

log = logging.getLogger("waggle_capture.files")

# Media types Chromium renders as a page (screenshots, links and text mean something).
PAGE_TYPES = {"", "text/html", "application/xhtml+xml", "image/svg+xml", "text/plain"}
READ_CHUNK = 1 << 20
RAW_KEPT = 64


def is_file(mime: str, disposition: str) -> bool:
    """Whether a main-frame response is a file to archive as-is rather than a page to render:
    ``Content-Disposition: attachment`` (a download whatever the type), or a media type outside
    :data:`PAGE_TYPES` (PDF, CSV, JSON, images, archives, media…)."""
    if disposition.strip().lower().startswith("attachment"):
        return True
    return mime.split(";")[0].strip().lower() not in PAGE_TYPES


@dataclass
class TakenFile:
    """The main document taken as a file: its exchange and what the report says about it."""

    exchange: Exchange
    mime: str
    bytes: int  # bytes read (the whole body unless cut)
    declared: int | None  # Content-Length, when the response gave one
    eof: bool

    def report(self) -> dict[str, Any]:
        """``document.file`` of the report: ``{mimeType, bytes, declaredBytes?, truncated?, reason?}``."""
        out: dict[str, Any] = {"mimeType": self.mime, "bytes": self.bytes}
        if self.declared is not None:
            out["declaredBytes"] = self.declared
        if self.exchange.truncated:
            out["truncated"] = self.exchange.truncated
            out["reason"] = self.exchange.failure or "larger than maxResponseBytes"
        return out


async def prepare(cdp: Any) -> str:
    """Enable what :class:`FileTaker` needs on a page that has not navigated yet (the Network
    domain without buffering, Fetch pauses of main-frame documents at the response); returns the
    main frame id. Nothing can pause before a navigation, so a spare context does this ahead of
    its capture, whose :meth:`FileTaker.enable` then only adds its listeners."""
    tree = await cdp.send("Page.getFrameTree")
    await cdp.send("Network.enable", {"maxTotalBufferSize": 0, "maxResourceBufferSize": 0})
    await cdp.send("Fetch.enable", {"patterns": [{"urlPattern": "*", "requestStage": "Response"}]})
    return tree["frameTree"]["frame"]["id"]


@dataclass
class FileTaker:
    """Attach to a page's CDP session with :meth:`enable` before the first navigation.

    ``limit`` is the per-response cap (``maxResponseBytes``); ``deadline`` (monotonic seconds)
    bounds the reading. :attr:`main` is the last main-frame file taken (None for a page)."""

    cdp: Any
    limit: int
    deadline: float
    main_frame: str | None = None
    main: TakenFile | None = None
    on_take: Any = None  # called with the URL before the navigation is aborted
    raw: RawBodies | None = None  # where every other response's body as sent is kept (.rawbodies)
    # (url, declared bytes) of a main-frame page whose Content-Length is over ``limit``: its
    # navigation was aborted before the body came (load.py fails the capture, round 22).
    huge_document: tuple[str, int] | None = None
    rules: Any = None  # the capture's .navrules.NavigationRules: main-frame requests paused before they leave
    conditional: Any = None  # the capture's .conditional.Conditional: validators added, a 304 fulfilled
    taken_urls: set[str] = field(default_factory=set)
    _tasks: set[asyncio.Task] = field(default_factory=set)
    _raw: dict[tuple[str, str], dict] = field(default_factory=dict)  # (kind, requestId) → raw headers

    async def enable(self, main_frame: str | None = None) -> None:
        """Listen, and intercept main-frame documents. ``main_frame``: the page's main frame id
        from :func:`prepare` (a spare context did it ahead: no round trip now), else found and
        the domains enabled here (three round trips)."""
        self.cdp.on("Fetch.requestPaused", self._on_paused)
        self.cdp.on("Network.requestWillBeSentExtraInfo", lambda ev: self._keep("req", ev))
        self.cdp.on("Network.responseReceivedExtraInfo", lambda ev: self._keep("resp", ev))
        self.main_frame = main_frame if main_frame is not None else await prepare(self.cdp)
        if self.rules is not None or self.conditional is not None:  # documents also pause before they are sent
            await self.cdp.send("Fetch.enable", {"patterns": [
                {"urlPattern": "*", "resourceType": "Document", "requestStage": "Request"},
                {"urlPattern": "*", "requestStage": "Response"}]})

    async def disable(self) -> None:
        """Stop intercepting (bounded); pending reads are cancelled."""
        for t in list(self._tasks):
            t.cancel()
        with contextlib.suppress(Exception):
            self.cdp.remove_listener("Fetch.requestPaused", self._on_paused)
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self.cdp.send("Fetch.disable"), 2)

    async def wait(self, timeout_s: float) -> None:
        """Wait (bounded) until every file being read is read."""
        if self._tasks:
            await asyncio.wait(list(self._tasks), timeout=max(0.01, timeout_s))

    def _keep(self, kind: str, ev: dict) -> None:
        self._raw[(kind, ev.get("requestId", ""))] = ev.get("headers") or {}
        while len(self._raw) > RAW_KEPT:
            self._raw.pop(next(iter(self._raw)))

    def _on_paused(self, ev: dict) -> None:
        t = asyncio.ensure_future(self._handle(ev))
        self._tasks.add(t)
        t.add_done_callback(self._tasks.discard)

    async def _handle(self, ev: dict) -> None:
        rid = ev["requestId"]
        if "responseStatusCode" not in ev and "responseErrorReason" not in ev:  # the request stage
            await self._gate(ev, rid)
            return
        try:
            headers = [(h["name"], h["value"]) for h in ev.get("responseHeaders") or []]
            status = ev.get("responseStatusCode") or 0
            first = {k.lower(): v for k, v in reversed(headers)}
            mime = first.get("content-type", "").split(";")[0].strip().lower()
            if ev.get("responseErrorReason"):
                await self.cdp.send("Fetch.continueResponse", {"requestId": rid})
                return
            main = ev.get("resourceType") == "Document" and ev.get("frameId") == self.main_frame
            if main and self.conditional is not None and self.conditional.answers(ev):  # a 304: the original
                await self.conditional.fulfil(self.cdp, ev, self.raw)
                return
            if main and 200 <= status < 300 and status != 204:
                if is_file(mime, first.get("content-disposition", "")):
                    await self._take(ev, rid, status, headers, mime, first)
                    return
                length = first.get("content-length", "").strip()
                if length.isdigit() and int(length) > self.limit:  # a page over the cap: not loaded at all
                    self.huge_document = (ev["request"]["url"], int(length))
                    await self.cdp.send("Fetch.failRequest", {"requestId": rid, "errorReason": "Aborted"})
                    return
            await self._keep_raw(ev, rid, status, mime, first)
            await self.cdp.send("Fetch.continueResponse", {"requestId": rid})
        except Exception as e:  # noqa: BLE001 — the page must never hang on a paused request
            log.debug("file interception of %s failed: %s", ev.get("request", {}).get("url"), e)
            with contextlib.suppress(Exception):
                await self.cdp.send("Fetch.continueResponse", {"requestId": rid})

    async def _gate(self, ev: dict, rid: str) -> None:
        """A document request before it is sent: a main-frame one the navigation rules refuse
        is failed (``BlockedByClient``: the site never sees it); everything else continues."""
        try:
            main = ev.get("frameId") == self.main_frame
            if main and self.rules is not None and self.rules.refuse(ev["request"]["url"]):
                await self.cdp.send("Fetch.failRequest", {"requestId": rid, "errorReason": "BlockedByClient"})
                return
            if main and self.conditional is not None and (headers := self.conditional.request_headers(ev)):
                await self.cdp.send("Fetch.continueRequest", {"requestId": rid, "headers": headers})  # validators
                return
            await self.cdp.send("Fetch.continueRequest", {"requestId": rid})
        except Exception as e:  # noqa: BLE001 — the page must never hang on a paused request
            log.debug("navigation gate of %s failed: %s", ev.get("request", {}).get("url"), e)
            with contextlib.suppress(Exception):
                await self.cdp.send("Fetch.continueRequest", {"requestId": rid})

    async def _keep_raw(self, ev: dict, rid: str, status: int, mime: str, first: dict[str, str]) -> None:
        """Keep the body of a response that has one, as the network delivered it (.rawbodies),
        unless it is a stream that never ends (``text/event-stream``) or declares more than the
        per-response cap (the recorder records it as too large without reading it)."""
        req = ev["request"]
        method = req.get("method", "GET").upper()
        length = first.get("content-length", "").strip()
        if (self.raw is None or method == "HEAD" or status < 200 or status in (204, 304)
                or (300 <= status < 400 and "location" in first) or mime == "text/event-stream"
                or (length.isdigit() and int(length) > self.limit)):
            return
        left = self.deadline - time.monotonic()
        if left <= 0:
            return
        got = await asyncio.wait_for(self.cdp.send("Fetch.getResponseBody", {"requestId": rid}), left)
        data = got.get("body") or ""
        body = base64.b64decode(data) if got.get("base64Encoded") else data.encode("utf-8")
        self.raw.put(rawbodies.key(method, req["url"], req.get("headers") or {}), body)

    async def _take(self, ev: dict, rid: str, status: int, headers: list[tuple[str, str]], mime: str,
                    first: dict[str, str]) -> None:
        req = ev["request"]
        url = req["url"]
        nid = ev.get("networkId", "")
        raw_resp = self._raw.get(("resp", nid))
        if raw_resp:  # raw headers keep Set-Cookie; a repeated header arrives joined by "\n"
            headers = [(k, part) for k, v in raw_resp.items() for part in str(v).split("\n")]
        raw_req = self._raw.get(("req", nid)) or req.get("headers") or {}
        ex = Exchange(url=url, method=req.get("method", "GET"), started=datetime.now(timezone.utc),
                      resource_type="document", status=status, status_text=ev.get("responseStatusText") or "",
                      resp_headers=headers, req_headers=[(k, str(v)) for k, v in raw_req.items()])
        declared = int(first["content-length"]) if first.get("content-length", "").strip().isdigit() else None
        body, eof, over = await self._read(rid, probe=declared is None or declared <= self.limit)
        over = over or (declared is not None and declared > self.limit)
        if eof:
            ex.body = bytes(body)
        else:  # cut: the prefix read is kept (WARC-Truncated: length), never silently
            ex.truncated, ex.encoded_length = "too-large", declared or len(body)
            ex.body = bytes(body)
            if declared is not None and declared > self.limit:
                ex.failure = (f"Content-Length {declared} exceeds maxResponseBytes {self.limit}; "
                              f"first {len(body)} bytes kept")
            elif over:
                ex.failure = f"body cut after {len(body)} bytes: larger than maxResponseBytes {self.limit}"
            else:
                ex.failure = f"body cut after {len(body)} bytes: capture budget ran out"
        self.taken_urls.add(url)
        if self.on_take is not None:
            self.on_take(url)
        self.main = TakenFile(exchange=ex, mime=mime, bytes=min(len(body), self.limit), declared=declared, eof=eof)
        # The browser must not render or download what was read here: abort the navigation.
        await self.cdp.send("Fetch.failRequest", {"requestId": rid, "errorReason": "Aborted"})

    async def _read(self, rid: str, probe: bool) -> tuple[bytearray, bool, bool]:
        """Read the paused body stream, at most :attr:`limit` bytes, until the deadline:
        ``(body, eof, over)``. No read asks for more than the limit leaves; with ``probe`` a
        body that reached the limit is asked for one more byte, so one of exactly ``limit``
        bytes is whole (``eof``) and a longer one is ``over`` (that byte is not kept)."""
        stream = (await self.cdp.send("Fetch.takeResponseBodyAsStream", {"requestId": rid}))["stream"]
        body = bytearray()
        eof = over = False

        async def read(size: int) -> tuple[bytes, bool]:
            left = self.deadline - time.monotonic()
            chunk = await asyncio.wait_for(self.cdp.send("IO.read", {"handle": stream, "size": size}), max(0.05, left))
            data = chunk.get("data") or ""
            raw = base64.b64decode(data) if chunk.get("base64Encoded") else data.encode("utf-8")
            return raw, bool(chunk.get("eof"))

        try:
            while len(body) < self.limit and time.monotonic() < self.deadline:
                data, eof = await read(min(READ_CHUNK, self.limit - len(body)))
                body += data[:self.limit - len(body)]
                if eof:
                    break
            if not eof and probe and len(body) >= self.limit:
                data, eof = await read(1)
                over = bool(data)
                eof = eof and not over
        except asyncio.TimeoutError:
            pass
        finally:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self.cdp.send("IO.close", {"handle": stream}), 2)
        return body, eof, over
