"""Records the browser's own network traffic of one capture for the WACZ.

Why browser-level (Playwright context events) and not the proxy: the proxy only sees ``CONNECT``
tunnels for HTTPS, whereas Playwright reports every request of every frame (iframes incl.
out-of-process ones, workers) with the raw request/response headers Chromium used, for http and
https alike. The body is the one the network delivered, kept at the Fetch pause by :mod:`.files`
(:mod:`.rawbodies`); only a response that pause did not see falls back to ``Response.body()``
(CDP ``Network.getResponseBody``, which charset-decodes textual bodies to UTF-8).
Redirect hops arrive as their own finished requests (3xx, no body). The proxy stays the single
egress point and enforces the private-host guard; the recorder only observes.

Per exchange the recorder applies, in order: URL policies (``no-archive`` → metadata only,
``no-body`` → no body), content-type policies (no body), the per-response cap
``max_response_bytes`` (``truncated: too-large``) and the task cap ``max_task_bytes``
(``truncated: task-cap``), contracts.md §A.5, §B.6.

A main document read as a file by :mod:`.files` arrives through :meth:`Recorder.record_file`;
its navigation, aborted on purpose, is not recorded as a failure.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone

from playwright.async_api import BrowserContext, Request

from waggle_capture import proxystatus, rawbodies
from waggle_capture.errorbodies import ErrorBodies
from waggle_capture.policies import Policies
from waggle_capture.rawbodies import RawBodies


@dataclass
class Exchange:
    """One request and what became of it. Times are UTC datetimes; sizes in bytes."""

    url: str
    method: str
    started: datetime
    resource_type: str = ""
    target: str = "page"
    req_headers: list[tuple[str, str]] = field(default_factory=list)
    req_body: bytes | None = None
    status: int | None = None
    status_text: str = ""
    resp_headers: list[tuple[str, str]] = field(default_factory=list)
    body: bytes | None = None
    encoded_length: int | None = None
    truncated: str | None = None  # "too-large" | "task-cap"
    withheld: str | None = None  # "no-body" | "content-type" | "no-archive" | "deny"
    pattern: str | None = None
    incomplete: str | None = None  # loadingFailed | stop-while-pending | loadingFinished-without-response
    failure: str | None = None
    not_modified: dict | None = None  # extension conditional: a 304 answered with the original (.conditional)

    @property
    def mime(self) -> str:
        for k, v in self.resp_headers:
            if k.lower() == "content-type":
                return v.split(";")[0].strip().lower()
        return ""


def _target(request: Request) -> str:
    with contextlib.suppress(Exception):
        if request.service_worker is not None:
            return "service_worker"
        frame = request.frame
        return "page" if frame.parent_frame is None else "iframe"
    return "worker"


MISSING_CAP = 20  # missingBodyUrls listed in a report; missingBodyCount counts all


class Recorder:
    """Attach with :meth:`attach` before the first navigation; :meth:`stop` before closing.

    ``exchanges`` (completion order), ``denied`` (requests never sent) and the counters feed
    the WARC, ``waczStats`` and ``completeness``. ``inflight`` and ``last_activity`` (monotonic
    seconds) drive the settle wait. ``last_end`` (monotonic seconds, None before any) is when the
    last request finished or failed as the browser reported it; ``cut`` counts requests still in
    flight at :meth:`stop` (they end when the proxy is sealed).
    """

    def __init__(self, policies: Policies, max_response_bytes: int, max_task_bytes: int,
                 body_timeout_s: float = 10.0, max_pending: int = 5000):
        self.policies = policies
        self.max_response_bytes = max_response_bytes
        self.max_task_bytes = max_task_bytes
        self.body_timeout_s = body_timeout_s
        self.exchanges: list[Exchange] = []
        self.denied: list[Exchange] = []
        self.body_bytes = 0
        self.inflight: dict[Request, datetime] = {}
        self.last_activity = time.monotonic()
        self.last_end: float | None = None
        self.last_start: float | None = None  # monotonic seconds of the last request event
        self.cut = 0
        self.max_pending = max_pending
        self._tasks: set[asyncio.Task] = set()
        self._handling: collections.Counter[str] = collections.Counter()  # URL → end handlers running
        self._stopped = False
        self._context: BrowserContext | None = None
        self._handlers: list[tuple[str, object]] = []
        self.files: set[str] = set()  # URLs of main documents read as files (their abort is ours)
        self._file_headers: dict[str, tuple[list, list]] = {}
        self.error_bodies: ErrorBodies | None = None  # the proxy's (plain HTTP), for cancelled error loads
        self.raw_bodies: RawBodies | None = None  # bodies as the network delivered them (.files fills it)

    # -- wiring ---------------------------------------------------------------------------------

    def attach(self, context: BrowserContext) -> None:
        self._context = context
        self._handlers = [
            ("request", self._on_request),
            ("requestfinished", lambda r: self._ended(r, self._on_finished(r))),
            ("requestfailed", lambda r: self._ended(r, self._on_failed(r))),
        ]
        for event, handler in self._handlers:
            context.on(event, handler)

    def detach(self) -> None:
        """Stop listening (a shared context outlives the capture)."""
        if self._context is not None:
            for event, handler in self._handlers:
                with contextlib.suppress(Exception):
                    self._context.remove_listener(event, handler)
            self._context = None

    def _spawn(self, coro) -> None:
        if self._stopped:
            coro.close()
            return
        t = asyncio.ensure_future(coro)
        self._tasks.add(t)
        t.add_done_callback(self._tasks.discard)

    def _ended(self, request: Request, coro) -> None:
        # The end is taken when the event arrives, not when its body fetch is done.
        if not self._stopped and request.url.startswith(("http:", "https:")):
            self.last_end = time.monotonic()
        if self._stopped:
            coro.close()
            return
        url = request.url
        self._handling[url] += 1

        async def handled() -> None:
            try:
                await coro
            finally:
                self._handling[url] -= 1
                if not self._handling[url]:
                    del self._handling[url]
        self._spawn(handled())

    async def handled(self, url: str, timeout_s: float) -> None:
        """Wait (at most ``timeout_s``) until the end events of ``url`` that have arrived are
        recorded in :attr:`exchanges` — their handlers await the browser, so on a loaded machine
        the main document's exchange can still be on its way when the formats start."""
        deadline = time.monotonic() + timeout_s
        while self._handling.get(url) and time.monotonic() < deadline:
            await asyncio.sleep(0.005)

    def _on_request(self, request: Request) -> None:
        if not request.url.startswith(("http:", "https:")):
            return
        self.inflight[request] = datetime.now(timezone.utc)
        self.last_activity = self.last_start = time.monotonic()
        if len(self.inflight) > self.max_pending:  # bound the tracking map: forget the oldest
            oldest = next(iter(self.inflight))
            started = self.inflight.pop(oldest)
            self.exchanges.append(Exchange(url=oldest.url, method=oldest.method, started=started,
                                           resource_type=oldest.resource_type, incomplete="stop-while-pending",
                                           failure="evicted: more than maxPendingRequests in flight"))

    def record_denied(self, url: str, method: str, pattern: str, resource_type: str = "", target: str = "page") -> None:
        """A request the deny gate held back (never sent): a metadata record only."""
        if any(d.url == url and d.method == method for d in self.denied):
            return
        self.denied.append(Exchange(url=url, method=method, started=datetime.now(timezone.utc),
                                    resource_type=resource_type, target=target, withheld="deny", pattern=pattern))

    # -- events ---------------------------------------------------------------------------------

    async def _base(self, request: Request) -> Exchange:
        started = self.inflight.pop(request, None) or datetime.now(timezone.utc)
        self.last_activity = time.monotonic()
        ex = Exchange(url=request.url, method=request.method, started=started,
                      resource_type=request.resource_type, target=_target(request))
        with contextlib.suppress(Exception):
            ex.req_headers = [(h["name"], h["value"]) for h in await request.headers_array()]
        with contextlib.suppress(Exception):
            ex.req_body = request.post_data_buffer
        return ex

    async def _on_finished(self, request: Request) -> None:
        if not request.url.startswith(("http:", "https:")):
            return
        ex = await self._base(request)
        response = await request.response()
        if response is None:
            ex.incomplete = "loadingFinished-without-response"
            self.exchanges.append(ex)
            return
        await self._answered(ex, request, response)

    def _freshen_revalidated(self, ex: Exchange) -> None:
        """Chromium's own revalidation of a URL it holds (its request carries ``If-None-Match`` /
        ``If-Modified-Since`` that no extension set) is reported as the cached ``200`` with the
        304's raw headers — no ``Content-Type``: replayed like that, an image or style sheet
        breaks. The recorded headers become the earlier answer's, updated by the 304's (RFC 9111
        §4.3.4), as Chromium used them. The site's own 200 (it carries its type) is left as sent."""
        if ex.status != 200 or ex.not_modified is not None or _header(ex.resp_headers, "content-type"):
            return
        if not (_header(ex.req_headers, "if-none-match") or _header(ex.req_headers, "if-modified-since")):
            return
        prior = next((e for e in reversed(self.exchanges) if e.url == ex.url and e.status == 200
                      and _header(e.resp_headers, "content-type")), None)
        if prior is None:
            return
        updated = {k.lower() for k, _ in ex.resp_headers}
        ex.resp_headers = [(k, v) for k, v in prior.resp_headers if k.lower() not in updated] + ex.resp_headers

    async def _answered(self, ex: Exchange, request: Request, response, cancelled: str | None = None) -> None:
        """Record a response the site gave; ``cancelled`` (Chromium's failure text) when Blink
        dropped the load after an error status's head: the body then comes from the proxy
        (:mod:`.errorbodies`), and without it the exchange stays counted as missing its body."""
        match = self.policies.match_url(request.url)
        ex.status = response.status
        ex.status_text = response.status_text
        with contextlib.suppress(Exception):
            ex.resp_headers = [(h["name"], h["value"]) for h in await response.headers_array()]
        if self._unreached(ex):
            return
        self._freshen_revalidated(ex)
        if match is not None and match.action in ("no-archive", "deny"):
            ex.withheld, ex.pattern = match.action, match.pattern
            self.exchanges.append(ex)
            return
        if match is not None and match.action == "no-body":
            ex.withheld, ex.pattern = "no-body", match.pattern
        elif self.policies.body_withheld_by_type(ex.mime) is not None:
            ex.withheld = "content-type"
        is_redirect = 300 <= ex.status < 400 and any(k.lower() == "location" for k, _ in ex.resp_headers)
        if ex.withheld is None and not is_redirect and ex.status not in (204, 304) and request.method != "HEAD":
            if cancelled is None:
                await self._fetch_body(ex, response)
            else:
                body = self._raw(ex)
                if body is None and self.error_bodies is not None:
                    body = await self.error_bodies.get(ex.url, self.body_timeout_s)
                if body is None:
                    ex.incomplete, ex.failure = "loadingFailed", f"{cancelled}: body not kept (HTTP {ex.status})"
                else:
                    self._keep(ex, body)
        self.exchanges.append(ex)

    def _unreached(self, ex: Exchange) -> bool:
        """The answer is the proxy's own (the site was never reached): record the network error
        Chromium would have reported, not a response the site never sent (:mod:`.proxystatus`)."""
        error = proxystatus.net_error(ex.resp_headers)
        if error is None:
            return False
        ex.status, ex.status_text, ex.resp_headers = None, "", []
        ex.incomplete, ex.failure = "loadingFailed", error
        self.exchanges.append(ex)
        return True

    async def _fetch_body(self, ex: Exchange, response) -> None:
        declared = None
        for k, v in ex.resp_headers:
            if k.lower() == "content-length" and v.strip().isdigit():
                declared = int(v)
        if declared is not None and declared > self.max_response_bytes:
            ex.truncated, ex.encoded_length = "too-large", declared
            return
        raw = self._raw(ex)
        if raw is not None:
            self._keep(ex, raw)
            return
        try:  # not paused by .files (a worker's request, or over the store's bound): possibly decoded
            body = await asyncio.wait_for(response.body(), self.body_timeout_s)
        except Exception as e:  # body evicted / target closed: keep the record, say so
            ex.incomplete, ex.failure = "loadingFailed", f"body unavailable: {e}"[:300]
            return
        self._keep(ex, body)

    def _raw(self, ex: Exchange) -> bytes | None:
        """The body as sent (:mod:`.rawbodies`), when the Fetch pause kept it."""
        if self.raw_bodies is None:
            return None
        return self.raw_bodies.take(rawbodies.key(ex.method, ex.url, ex.req_headers))

    def _keep(self, ex: Exchange, body: bytes) -> None:
        """Apply the per-response and task caps to a body read whole: over the per-response cap
        its first ``max_response_bytes`` are kept (``truncated: too-large``, issue 24 item 4)."""
        if len(body) > self.max_response_bytes:
            ex.truncated, ex.encoded_length = "too-large", len(body)
            prefix = body[:self.max_response_bytes]
            if self.body_bytes + len(prefix) <= self.max_task_bytes:
                ex.body = prefix
                self.body_bytes += len(prefix)
        elif self.body_bytes + len(body) > self.max_task_bytes:
            ex.truncated, ex.encoded_length = "task-cap", len(body)
        else:
            ex.body = body
            self.body_bytes += len(body)

    async def _on_failed(self, request: Request) -> None:
        if not request.url.startswith(("http:", "https:")):
            return
        ex = await self._base(request)
        ex.incomplete = "loadingFailed"
        ex.failure = request.failure
        if ex.url in self.files and ex.resource_type == "document" and "ABORTED" in (ex.failure or "").upper():
            # A file read by .files: its navigation was aborted on purpose. Keep the raw headers
            # Chromium used (Set-Cookie, Cookie: the Fetch pause shows filtered ones).
            resp_headers: list[tuple[str, str]] = []
            with contextlib.suppress(Exception):
                response = await request.response()
                if response is not None:
                    resp_headers = [(h["name"], h["value"]) for h in await response.headers_array()]
            self._file_headers[ex.url] = (ex.req_headers, resp_headers)
            return
        if any(d.url == ex.url for d in self.denied) and ex.failure and "BLOCKED" in ex.failure.upper():
            return  # the denied request itself; already a metadata record
        response = None
        with contextlib.suppress(Exception):
            response = await request.response()
        if response is not None and response.status >= 400:  # the site answered; Blink dropped it
            ex.incomplete, ex.failure = None, None
            await self._answered(ex, request, response, cancelled=request.failure or "net::ERR_ABORTED")
            return
        self.exchanges.append(ex)

    def expect_file(self, url: str) -> None:
        """The main document at ``url`` is being read as a file (call before its abort)."""
        self.files.add(url)

    def record_file(self, ex: Exchange) -> None:
        """A main document read as a file (:mod:`.files`), after :meth:`stop`: the raw headers
        of the aborted navigation replace the Fetch pause's when Chromium gave them; URL
        policies and the task cap apply like to any response (the per-response cap was applied
        while reading)."""
        req_headers, resp_headers = self._file_headers.get(ex.url, ([], []))
        ex.req_headers = req_headers or ex.req_headers
        ex.resp_headers = resp_headers or ex.resp_headers
        match = self.policies.match_url(ex.url)
        if match is not None and match.action in ("no-archive", "deny", "no-body"):
            ex.withheld, ex.pattern, ex.body = match.action, match.pattern, None
        elif self.policies.body_withheld_by_type(ex.mime) is not None:
            ex.withheld, ex.body = "content-type", None
        elif ex.body is not None and self.body_bytes + len(ex.body) > self.max_task_bytes:
            ex.truncated, ex.encoded_length, ex.body = "task-cap", len(ex.body), None
        elif ex.body is not None:
            self.body_bytes += len(ex.body)
        self.last_activity = time.monotonic()
        self.exchanges.append(ex)

    # -- end ------------------------------------------------------------------------------------

    async def stop(self, timeout_s: float = 10.0) -> None:
        """Wait (bounded) for body fetches, then mark everything still in flight as incomplete."""
        if self._tasks:
            await asyncio.wait(list(self._tasks), timeout=timeout_s)
        for t in list(self._tasks):
            t.cancel()
        self._stopped = True
        self.detach()
        self.cut += len(self.inflight)
        for request, started in list(self.inflight.items()):
            self.exchanges.append(Exchange(url=request.url, method=request.method, started=started,
                                           resource_type=request.resource_type, incomplete="stop-while-pending"))
        self.inflight.clear()

    # -- results --------------------------------------------------------------------------------

    def stats(self) -> dict[str, int]:
        """``waczStats`` (contracts.md §B.3)."""
        ex = self.exchanges
        recorded = [e for e in ex if e.status is not None and e.withheld not in ("no-archive", "deny")
                    and e.truncated is None and e.withheld not in ("no-body", "content-type")]
        return {
            "totalRecorded": len(recorded),
            "totalBlocked": sum(1 for e in ex if e.withheld in ("no-archive", "deny")) + len(self.denied),
            "totalDenied": len(self.denied),
            "totalSkippedContentType": sum(1 for e in ex if e.withheld == "content-type"),
            "totalSkippedUrlPolicy": sum(1 for e in ex if e.withheld == "no-body"),
            "totalTruncatedTooLarge": sum(1 for e in ex if e.truncated == "too-large"),
            "totalTruncatedTaskCap": sum(1 for e in ex if e.truncated == "task-cap"),
            "totalFailed": sum(1 for e in ex if e.incomplete in ("loadingFailed", "loadingFinished-without-response")),
            "totalIncomplete": sum(1 for e in ex if e.incomplete == "stop-while-pending"),
            "totalBodyBytes": self.body_bytes,
        }

    def completeness(self) -> dict:
        """``{bodylessUrls, truncatedUrls, missingBodyUrls, missingBodyCount, complete}`` — a
        pure function of the recorded exchanges (contracts.md §B.6 plus waggle's extension,
        docs/internals.md "Capture completeness"): ``missingBodyUrls`` = URLs the page requested
        that never got a response body into the archive (failed, or still pending when the
        capture stopped — a long-poll), sorted, at most :data:`MISSING_CAP`; ``missingBodyCount``
        counts them all. ``complete`` ⇔ all three lists are empty."""
        statuses: dict[str, set[int]] = {}
        answered: set[str] = set()
        for e in self.exchanges:
            if e.status is not None and e.withheld is None:
                statuses.setdefault(e.url, set()).add(e.status)
            if e.status is not None and e.incomplete is None:
                answered.add(e.url)
        bodyless = sorted(u for u, s in statuses.items() if 304 in s and 200 not in s)
        truncated = sorted({e.url for e in self.exchanges if e.truncated})
        missing = sorted({e.url for e in self.exchanges if e.incomplete and e.url not in answered})
        return {"bodylessUrls": bodyless, "truncatedUrls": truncated, "missingBodyUrls": missing[:MISSING_CAP],
                "missingBodyCount": len(missing), "complete": not bodyless and not truncated and not missing}


def _header(headers: list[tuple[str, str]], name: str) -> str | None:
    """The first value of header ``name`` (lower case), or None."""
    return next((v for k, v in headers if k.lower() == name), None)
