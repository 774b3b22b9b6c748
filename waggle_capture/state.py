"""What a capture holds: the server-wide :class:`Ctx`, one capture's :class:`Run`, and the two
exceptions that end a capture early (:class:`CaptureFailure`, :class:`BudgetExhausted`)."""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from playwright.async_api import BrowserContext

from waggle_capture.browser import BrowserHolder
from waggle_capture.policies import Policies
from waggle_capture.proxy import GuardedProxy
from waggle_capture.seals import SealBoard
from waggle_capture.settings import ServerSettings
from waggle_capture.sink import HttpSink, S3Sink
from waggle_capture.spare import Spare


class BudgetExhausted(Exception):
    """A wait was cut short because the whole-task budget ran out (→ ``timeout`` with ``step``)."""


class CaptureFailure(Exception):
    """Ends a capture early with ``status`` and ``errorDetails``."""

    def __init__(self, status: str, kind: str, message: str, **details: Any):
        super().__init__(message)
        self.status = status
        self.details = {"type": kind, "message": message, **{k: v for k, v in details.items() if v is not None}}


def iso(dt: datetime) -> str:
    """``dt`` as ISO-8601 UTC with milliseconds and ``Z``."""
    return dt.astimezone(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


@dataclass
class Ctx:
    """What the server holds across captures.

    Background work a capture leaves behind: ``teardowns`` (closing its context and proxy after
    the answer) and ``preparing`` (spare contexts, started after the answer). The next
    capture does not wait for a teardown (each context has its own proxy, sealed) except a
    shared session's, whose context it reuses; it waits for older teardowns only when more than
    one is pending (bounded work in the background)."""

    settings: ServerSettings
    browser: BrowserHolder
    s3: S3Sink | None
    shared_context: BrowserContext | None = None
    shared_proxy: GuardedProxy | None = None
    captures: int = 0
    spare: Spare = field(default_factory=Spare)
    teardowns: list[asyncio.Task] = field(default_factory=list)
    teardown_blocks: bool = False  # the last teardown was a shared session's: wait for it
    preparing: asyncio.Task | None = None
    last_phases_ms: dict[str, int] = field(default_factory=dict)  # of the last capture (observability)
    seals: SealBoard = field(default_factory=SealBoard)  # Waggle-Capture-Key → seal (extension sealWait)

    async def wait_idle(self, timeout_s: float = 30.0) -> None:
        """Before a capture: wait (bounded, seconds) for the teardowns that must end first."""
        self.teardowns = [t for t in self.teardowns if not t.done()]
        must = self.teardowns if self.teardown_blocks else self.teardowns[:-1]
        if must:
            done, pending = await asyncio.wait(must, timeout=timeout_s)
            for t in pending:
                t.cancel()

    async def aclose(self) -> None:
        """Stop background work and close the spare and the shared context (server shutdown)."""
        for t in [*self.teardowns, *([self.preparing] if self.preparing else [])]:
            t.cancel()
        if self.teardowns or self.preparing:
            await asyncio.wait([*self.teardowns, *([self.preparing] if self.preparing else [])], timeout=5)
        self.teardowns, self.preparing = [], None
        await self.spare.discard()
        if self.shared_context is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self.shared_context.close(), 5)
            self.shared_context = None
        if self.shared_proxy is not None:
            await self.shared_proxy.close()
            self.shared_proxy = None


@dataclass
class Run:
    """State of one capture. ``t0`` and ``deadline`` are monotonic seconds."""

    req: dict[str, Any]
    task_id: str
    url: str
    labels: list[str]
    stem: str
    sink: S3Sink | HttpSink
    policies: Policies
    started: datetime
    t0: float
    deadline: float
    step: str = "check-address"
    artifacts: dict[str, str] = field(default_factory=dict)
    formats: dict[str, bool] = field(default_factory=dict)
    uploads: list[asyncio.Task] = field(default_factory=list)  # page formats still being written
    proxy: GuardedProxy | None = None  # this capture's egress proxy, once its context is open
    screenshot: dict[str, Any] | None = None  # full-page screenshot facts (report extension)
    shots: dict[str, bytes] = field(default_factory=dict)  # png/webp kept for the WACZ (screenshotsInWacz)
    marks: list[tuple[str, float]] = field(default_factory=list)  # (phase ended, monotonic s)
    links: list[dict] | None = None  # the .links.json items, answered inline (waggle extension)
    network_sealed: bool = False
    last_request_end: float | None = None  # monotonic seconds; set when the network is sealed
    nav_rules: Any = None  # the request's .navrules.NavigationRules (extension navigationRules), or None
    files: Any = None  # the .files.FileTaker reading a main document that is a file
    conditional: Any = None  # the .conditional.Conditional of extension conditional, or None
    final_url: str | None = None  # where the main document ended, when the capture stopped early
    seal_signal: asyncio.Event | None = None  # set once the network is sealed or the capture ended (sealWait)
    on_sealed: Any = None  # called once then: the browser is free for the next capture (app.py)
    on_egress: Any = None  # called when its proxy opened, before any navigation (app.py, abandon.py)
    signer: Any = None  # the server's signing.SignerSettings
    signature: dict[str, Any] | None = None  # the report's `signature` once the WACZ was signed
    after_seal: Any = None  # an .afterseal.AfterSeal when the formats follow the seal (sealBeforeFormats)
    sealed_at: float | None = None  # monotonic seconds of the first :meth:`signal_sealed`
    doc_status: int | None = None  # the main document's HTTP status when it failed the capture (holdAfter back-off)
    challenge: dict[str, Any] | None = None  # the signature its main document matched (.challenge)
    main_checked: asyncio.Event = field(default_factory=asyncio.Event)  # its main document was matched (.challenge)
    retry_after_s: float | None = None  # the 429/503 main document's Retry-After, capped (.retryafter)
    robots: dict[str, Any] | None = None  # what the page asked of robots (.robotsmeta, extension robotsMeta)
    hold: Any = None  # a .holds.Hold: this capture waits for the previous one's seal + gap (holdAfter)
    landed_url: str | None = None  # the main frame's URL as last committed (seal answer finalUrl, holdAfter)
    landed: asyncio.Event = field(default_factory=asyncio.Event)  # set at its first commit
    document_ms: int | None = None  # the site's time for the main document (answer documentMs, decision 242)

    def retry_after_ms(self) -> int | None:
        """The answer's ``retryAfterMs`` (extension 18): whole ms, rounded up; None without one."""
        return None if self.retry_after_s is None else math.ceil(self.retry_after_s * 1000)

    def signal_sealed(self) -> None:
        """The page's network is sealed (or the capture ended): wake the seal waits of this
        capture's key (extension ``sealWait``) and free the browser for the next capture; idempotent."""
        if self.sealed_at is None:
            self.sealed_at = time.monotonic()
        if self.seal_signal is not None:
            self.seal_signal.set()
        if self.on_sealed is not None:
            callback, self.on_sealed = self.on_sealed, None
            callback()

    def mark(self, phase: str) -> None:
        """Note that ``phase`` just ended (per-phase timers, :meth:`phases_ms`)."""
        self.marks.append((phase, time.monotonic()))

    def phases_ms(self) -> dict[str, int]:
        """Milliseconds each marked phase took, from the previous mark (the first from ``t0``)."""
        out: dict[str, int] = {}
        prev = self.t0
        for phase, t in self.marks:
            out[phase] = out.get(phase, 0) + int((t - prev) * 1000)
            prev = t
        return out

    def turn_wait_ms(self) -> int | None:
        """Whole ms this capture, ready to navigate (its context open), was kept from the site by
        the previous page: until its ``startAfterMs`` (extension 9) and its ``holdAfter`` release
        (extension 12: the previous page sealed and the gap passed; :attr:`.holds.Hold.released_at`),
        whichever is later. None when it asked for neither (issue 24 item 8: a page's capture
        duration excludes this wait); 0 when it was ready only after that moment."""
        if "startAfterMs" not in self.req and "holdAfter" not in self.req:
            return None
        ready = next((t for phase, t in self.marks if phase == "open-session"), None)
        ends = [self.t0 + (self.req.get("startAfterMs") or 0) / 1000]
        if getattr(self.hold, "released_at", None) is not None:
            ends.append(self.hold.released_at)
        if ready is None:  # ended before its context was open: it never waited for its turn
            return 0
        return max(0, int((max(ends) - ready) * 1000))

    def timeline(self) -> dict[str, Any]:
        """The capture's timeline on the machine's monotonic clock (seconds; the same clock in
        every process of the machine, so a benchmark can lay it beside a site's log):
        ``{taskId, url, acceptedAt, marks: [[phase, at]], lastRequestEndAt, sealedAt}``."""
        return {"taskId": self.task_id, "url": self.url, "acceptedAt": self.t0,
                "marks": [[phase, t] for phase, t in self.marks], "lastRequestEndAt": self.last_request_end,
                "sealedAt": self.sealed_at}

    def remaining_s(self) -> float:
        """Seconds left of the whole-task budget (≥ 0)."""
        return max(0.0, self.deadline - time.monotonic())

    def since_last_request_ms(self) -> int | None:
        """Whole milliseconds from the end of the page's last network request to now (rounded
        down), or None when the page made no request (or the network was never sealed)."""
        if self.last_request_end is None:
            return None
        return max(0, int((time.monotonic() - self.last_request_end) * 1000))

    def op_timeout(self, ms: int) -> float:
        """Seconds one operation may take: its own limit ``ms``, cut to the budget left (≥ 0.05)."""
        return max(0.05, min(ms / 1000, self.remaining_s()))


class HeldDuplicate(Exception):
    """The previous capture's page landed at this held capture's URL (a redirect target listed
    next): it ends before anything is sent, answered 409 with ``finalUrl``."""

    def __init__(self, url: str) -> None:
        super().__init__(url)
        self.url = url
