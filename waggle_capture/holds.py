"""Hold after (waggle extension ``holdAfter``, docs/capture-server.md extension 12): a capture
accepted while the host's previous capture on this server is still loading, its egress held at
its own proxy until that capture's page is sealed and ``gapMs`` has passed since the page's
truly last byte.

The request body's ``holdAfter: {key, gapMs, backoffGapMs?}`` names the previous capture by its
``Waggle-Capture-Key`` (extension 8). The held capture opens its context and page at once; its
first navigation starts :data:`NAVIGATION_LEAD_S` before the *estimated* release — the previous
page's last byte so far (its proxy's ``last_traffic``) + the gap, re-estimated whenever that
moves, i.e. whenever the sealing page still sends a request — and the proxy lets no connection
out before the *final* release: the previous capture sealed (or ended), then its
``last_request_end`` + the gap. So the gap is measured from the truly last byte: a request the
previous page makes after the held navigation started moves the release later.
``backoffGapMs`` replaces ``gapMs`` when the previous page's main document answered 429 or 503
(the client's back-off, decided before that answer reaches it), and that answer's own
``Retry-After`` is waited for too (extension 18), whatever the client asked. ``delayFactor``
(extension "serverpolite", decision 242): the gap is also ≥ ``delayFactor × documentMs`` of the
previous page (capped at :data:`ADAPT_CAP_S`) once its main document is in — the client learns that
time only from the previous answer, after this capture was already submitted.
``admission: {url, token}`` (extension ``holdAdmission``, docs/capture-server.md extension "hold",
decision 302): the host's shared delay is read from the ledger :data:`ADMIT_LEAD_S` before the
release (read again whenever the release moved later since), and the gap is at least it — a crawl
with a longer delay that registered on the host while the previous page loaded holds this capture
too. A read that fails keeps the gap as it was.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field
from typing import Any

import httpx

from waggle_capture.seals import Seal
from waggle_capture.challenge import refuse_behind_challenge
from waggle_capture.state import BudgetExhausted, HeldDuplicate, Run  # noqa: F401 — HeldDuplicate: its name here too

def track_landing(run: Run, page: Any) -> None:
    """Keep ``run.landed_url`` = the page's main-frame URL at each commit (HTTP redirects land
    at once, script navigations when they commit)."""
    def on_nav(frame: Any) -> None:
        if frame == page.main_frame:
            run.landed_url = frame.url
            run.landed.set()
    page.on("framenavigated", on_nav)


def same_page(a: str, b: str) -> bool:
    return a.partition("#")[0] == b.partition("#")[0]


NAVIGATION_LEAD_S = 0.15  # as startAfterMs's (load.py): Chromium's navigation → first request
BACKOFF_STATUSES = frozenset({429, 503})
ADAPT_CAP_S = 30.0  # the flow's slowhost.ADAPT_CAP_MS: the adapted part never exceeds it
FIND_S = 2.0  # how long a held capture waits for its previous capture to be accepted (a race of two POSTs)
# holdAdmission: the read starts this long before the release (a loopback/LAN read takes ~10 ms), as
# the flow's f/waggle/host_admission.ADMIT_LEAD_S; a read older than the release − lead − slack is made again.
ADMIT_LEAD_S = 0.2
ADMIT_SLACK_S = 0.05
ADMIT_TIMEOUT_S = 2.0  # a slow ledger lengthens the hold by at most this, then the gap stays as it was
ADMIT_MAX_READS = 4  # each read that lengthens the hold is followed by one more at its new end

log = logging.getLogger("waggle_capture")


async def read_host_delay_ms(spec: dict[str, Any], *, timeout_s: float = ADMIT_TIMEOUT_S) -> int:
    """``GET spec["url"]`` (the ledger's ``/api/crawls/{id}/politeness?host=…``, decision 029) with
    ``Authorization: Bearer spec["token"]`` → the largest ``hosts.*.hostDelayMs`` (ms); raises on
    anything but a 200 whose ``hosts`` carry numbers."""
    async with httpx.AsyncClient(timeout=timeout_s) as client:
        resp = await client.get(spec["url"], headers={"authorization": f"Bearer {spec['token']}"})
    if resp.status_code != 200:
        raise ValueError(f"the ledger answered {resp.status_code}: {resp.text[:160]}")
    hosts = resp.json().get("hosts")
    values = [h.get("hostDelayMs") for h in hosts.values() if isinstance(h, dict)] if isinstance(hosts, dict) else []
    numbers = [int(v) for v in values if isinstance(v, (int, float)) and not isinstance(v, bool) and v >= 0]
    if not numbers:
        raise ValueError(f"no hostDelayMs in the answer: {str(hosts)[:160]}")
    return max(numbers)


@dataclass
class Hold:
    """The held capture's view of the previous one (its :class:`Seal`, whose ``run`` is a
    ``state.Run`` once it started) and the gaps in seconds."""

    prev: Seal
    gap_s: float
    backoff_gap_s: float | None = None
    delay_factor: float = 0.0  # the client's delayFactor (0: no slow-host adaptation)
    # Set when the proxy first lets a connection out: the held page's own deadlines (page load)
    # run from then, not from the request's arrival (round 22: a 28 s hold ate a 30 s page load).
    released: asyncio.Event = field(default_factory=asyncio.Event)
    released_at: float | None = None  # monotonic s the proxy let the first connection out (turnWaitMs)
    admission: dict[str, Any] | None = None  # holdAdmission: {url, token} of the ledger's politeness read
    admitted_s: float = 0.0  # the host's shared delay as last read (s; 0: none read)
    admission_reads: list[dict[str, Any]] = field(default_factory=list)  # {"at", "ms"|"error"} per read
    _admitting: asyncio.Task | None = None

    @classmethod
    def of(cls, prev: Seal, spec: dict[str, Any]) -> "Hold":
        """From the validated ``holdAfter`` member."""
        backoff = spec.get("backoffGapMs")
        return cls(prev, spec["gapMs"] / 1000, None if backoff is None else backoff / 1000,
                   float(spec.get("delayFactor") or 0.0), admission=spec.get("admission"))

    def gap(self) -> float:
        """Seconds from the previous page's last byte: ``gapMs``; after its main document
        answered 429/503, also ≥ ``backoffGapMs`` and ≥ that answer's ``Retry-After`` (capped,
        :mod:`.retryafter`; the last byte comes after the answer, so the site's wait is kept); and
        ≥ ``delayFactor × documentMs`` of the previous page once known (capped at ADAPT_CAP_S); and ≥
        the host's shared delay as the ledger said it last (``admission``, extension holdAdmission)."""
        run = self.prev.run
        gap = max(self.gap_s, self.admitted_s)
        if getattr(run, "doc_status", None) in BACKOFF_STATUSES:
            gap = max(gap, self.backoff_gap_s or 0.0, getattr(run, "retry_after_s", None) or 0.0)
        document_ms = getattr(run, "document_ms", None)
        if self.delay_factor > 0 and isinstance(document_ms, int):
            gap = max(gap, min(ADAPT_CAP_S, self.delay_factor * document_ms / 1000))
        return gap

    def sealed(self) -> bool:
        return self.prev.event.is_set()

    def release_at(self) -> float:
        """Monotonic s the held capture may reach a site: final once the previous capture sealed
        (its last request's end, else its seal, + the gap); before that an estimate that only
        moves later (the last byte so far + the gap; nothing out yet: now + the gap)."""
        run = self.prev.run
        if self.sealed():
            base = getattr(run, "last_request_end", None) or getattr(run, "sealed_at", None) or time.monotonic()
        else:
            last = getattr(getattr(run, "proxy", None), "last_traffic", None)
            base = time.monotonic() if last is None else last  # nothing out yet: at least the gap from now
        return base + self.gap()

    async def until_navigation(self, lead_s: float = NAVIGATION_LEAD_S) -> None:
        """Return when the held navigation should start: ``lead_s`` before the release, the
        estimate re-evaluated while the previous capture is not sealed (it moves later with
        every byte the sealing page still exchanges)."""
        while True:
            left = self.release_at() - lead_s - time.monotonic()
            if self.sealed() or left <= 0:
                if left > 0:
                    await asyncio.sleep(left)
                return
            try:
                await asyncio.wait_for(self.prev.event.wait(), timeout=left)
            except asyncio.TimeoutError:
                pass

    async def landed(self) -> str | None:
        """Where the previous page landed (its main frame's committed URL), once it committed or
        ended; None when it never committed."""
        run = self.prev.run
        landed = getattr(run, "landed", None)
        if landed is not None and not landed.is_set() and not self.sealed():
            waits = [asyncio.ensure_future(landed.wait()), asyncio.ensure_future(self.prev.event.wait())]
            try:
                await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for w in waits:
                    w.cancel()
        return getattr(self.prev.run, "landed_url", None)

    def start_admission(self) -> None:
        """Begin the ledger reads of ``admission`` (once; nothing without it): see :meth:`_admit`."""
        if self.admission is not None and self._admitting is None:
            self._admitting = asyncio.ensure_future(self._admit())

    async def _admit(self) -> None:
        """Read the host's shared delay :data:`ADMIT_LEAD_S` before the (estimated) release and again
        whenever the release has since moved later than that read + lead + :data:`ADMIT_SLACK_S` (the
        previous page's late bytes, or a longer delay just read): so the read the release goes by
        started at most lead + slack before it (:data:`ADMIT_MAX_READS` at most)."""
        read_at: float | None = None
        for _ in range(ADMIT_MAX_READS):
            while True:
                await self.until_navigation(ADMIT_LEAD_S)
                fresh = read_at is not None and read_at >= self.release_at() - ADMIT_LEAD_S - ADMIT_SLACK_S
                if not fresh:
                    break
                if self.sealed():
                    return
                await self.prev.event.wait()  # the estimate may still move: look again at the seal
            read_at = time.monotonic()
            try:
                ms = await read_host_delay_ms(self.admission)
            except Exception as exc:  # noqa: BLE001 - the planned gap still holds
                self.admission_reads.append({"at": read_at, "error": f"{type(exc).__name__}: {str(exc)[:160]}"})
                log.warning("holdAdmission: the host's delay could not be read (%s); the gap stays %.0f ms",
                            self.admission_reads[-1]["error"], self.gap() * 1000)
                continue
            self.admission_reads.append({"at": read_at, "ms": ms})
            if ms / 1000 > self.admitted_s:
                if ms / 1000 > self.gap():
                    log.info("holdAdmission: another crawl on this host uses a longer delay: gap %.0f → %d ms",
                             self.gap() * 1000, ms)
                self.admitted_s = ms / 1000

    async def until_released(self) -> None:
        """The proxy's hold: wait for the previous capture's seal, then (``admission``) for the
        ledger read before the release, then for the final release."""
        await self.prev.event.wait()
        if self.admission is not None:
            self.start_admission()
            await asyncio.shield(self._admitting)
        left = self.release_at() - time.monotonic()
        if left > 0:
            await asyncio.sleep(left)
        self.released_at = time.monotonic()
        self.released.set()


async def wait_turn(run: Run) -> None:
    """Before the first navigation of a held capture (``run.hold`` set): the proxy holds every
    connection until the final release, and this returns at the (re-estimated) navigation
    start. A wait that would leave < 1 s of the task budget ends the capture as ``timeout``
    at step ``hold-after``."""
    hold: Hold = run.hold
    run.step = "hold-after"
    if run.proxy is not None:
        run.proxy.hold_with(hold.until_released)
    hold.start_admission()
    try:
        await asyncio.wait_for(hold.until_navigation(), timeout=max(0.0, run.remaining_s() - 1.0))
        landed = await asyncio.wait_for(hold.landed(), timeout=max(0.0, run.remaining_s() - 1.0))
    except asyncio.TimeoutError as e:
        raise BudgetExhausted() from e
    if landed is not None and same_page(landed, run.url):
        raise HeldDuplicate(landed)
    # the previous page was a challenge: the host is paused, send nothing (extension challengeSignature)
    await refuse_behind_challenge(run, hold, run.remaining_s() - 1.0)
    run.mark("hold-after")
