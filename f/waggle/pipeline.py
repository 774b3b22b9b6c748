# /// script
# requires-python = ">=3.11"
# dependencies = ["httpx==0.28.1", "wmill==1.850.0"]
# ///
"""Pipelined captures of one host (issue 11; docs/internals.md "Pipelined captures"). A library
script: ``crawl_host`` supplies the pages (:class:`Pages`), this module the schedule.

Where every endpoint is a plain BrowserHive v12, a host's next capture can start only after the
previous answer, which comes long after the page's last request (settle, formats, WACZ,
uploads, manifest). Our capture server advertises extensions in ``GET /status``
(``extensions``, read once per endpoint per job by :func:`read_extensions`):

* ``sealWait``: a capture submitted with ``Waggle-Capture-Key: K`` can be waited for with
  ``GET /captures/seal?key=K&timeoutMs=N``, answered once its page's network is sealed (no request
  to the site after that) with ``sinceLastRequestMs`` — while the capture is still packaging;
* ``startAfterMs``: the server prepares the capture but navigates no earlier than that many ms
  after it received the request;
* ``sealBeforeFormats``: the server seals the page's network before it takes the page formats
  (requests of the sealed page are refused and listed in the report's ``afterSeal``); sent
  with the short-gap ``loadWait`` of :func:`settle_for_gap` only, where the formats would
  otherwise hold the seal past the gap.

:class:`Chain` then runs the host so: submit A (a worker thread) → wait for A's seal →
``gapFrom(A)`` = seal received − ``sinceLastRequestMs`` (clamped by crawl_host to [A's submission,
seal received]) → wait until :data:`START_LEAD_MS` before the gap ends, concluding A meanwhile if
it answers (its 429/503 back-off or retry then applies first) → submit B to any free endpoint with
``startAfterMs`` = what is left of the gap (an endpoint without it: after sleeping that) → wait for
B's seal → A must have answered (at most two captures in flight: one loading, one finishing) → …
Every capture's navigation starts ≥ the gap after the previous capture's ``gapFrom``; a retry is
one more link of the same chain. When the seal wait fails (a 404, an error, the answer first)
the capture's ``gapFrom`` comes from its answer, exactly as without the extension.

* ``holdAfter`` (extension 12, hosts with a gap under 1.2 s): B is submitted to A's endpoint
  while A still loads (:meth:`Chain._hold_next`), naming A's key and the gap; the server opens B
  at once and lets nothing of it reach the site before A sealed and the gap passed since A's
  truly last byte. Not taken (409, 429, unreachable): B goes the way above. With admission
  (decision 301) B carries ``holdAfter.admission`` (extension ``holdAdmission``, decision 302): the
  server reads the host's shared delay right before the release and holds B the longer delay if
  one registered meanwhile; an endpoint without ``holdAdmission`` gets no held capture then.
"""

from __future__ import annotations

import math
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Any, Optional, Protocol

import httpx

EXT_SINCE = "sinceLastRequestMs"
EXT_SEAL = "sealWait"
EXT_START = "startAfterMs"
EXT_SEAL_FIRST = "sealBeforeFormats"
EXT_HOLD = "holdAfter"
EXT_HOLD_ADMISSION = "holdAdmission"  # the server reads the host's shared delay before the release (decision 302)
KEY_HEADER = "Waggle-Capture-Key"
STATUS_TIMEOUT_S = 5.0
SEAL_POLL_MS = 10_000  # one long-poll; polled again while the capture runs
# A seal wait starts this long after its POST went out: a 429 (answered at once) has moved the
# submission on by then, and no page seals this fast (it loads and settles ≥ 300 ms first).
POLL_AFTER_S = 0.1
MAX_START_AFTER_MS = 60_000
# Submit this long before the gap ends: the capture server opens the context and page meanwhile
# (startAfterMs), and a browser held waiting is lost to other hosts only this long.
START_LEAD_MS = 300
# Each submission is admitted (the host's shared delay read again, decision 301) this long before
# its lead: the read overlaps the wait (f/waggle/host_admission.py ADMIT_LEAD_S).
ADMIT_LEAD_S = 0.2
# Settle follows the delay (BRIEF contract 4): quietMs = minMs = clamp(gap − margin, floor, 1000).
SETTLE_MARGIN_MS = 200  # the page formats and the seal's hand-over after the quiet window
SETTLE_FLOOR_MS = 300
SETTLE_DEFAULT_MS = 1000  # the capture server's default quiet window (and minMs)


def settle_for_gap(gap_ms: int) -> dict | None:
    """The v12 ``loadWait`` for a host with ``gap_ms``: ``{"quietMs": q, "minMs": q}``,
    ``q = clamp(gap_ms − SETTLE_MARGIN_MS, SETTLE_FLOOR_MS, SETTLE_DEFAULT_MS)``, so the network
    is sealed about the gap after the page's last request; None (the server's default settle)
    when the gap leaves room for it (``q`` would be the default). ``maxMs`` is never sent."""
    quiet = min(SETTLE_DEFAULT_MS, max(SETTLE_FLOOR_MS, int(gap_ms) - SETTLE_MARGIN_MS))
    if quiet >= SETTLE_DEFAULT_MS:
        return None
    return {"quietMs": quiet, "minMs": quiet}


def extensions_of(endpoint: object) -> frozenset[str]:
    """The extensions an endpoint advertised (none for one that was never asked: a test fake)."""
    value = getattr(endpoint, "extensions", None)
    return value if isinstance(value, frozenset) else frozenset()


def read_extensions(client: httpx.Client, target: str) -> frozenset[str]:
    """``GET {target}/status`` → its ``extensions`` (strings); empty when absent or on any error
    (a real BrowserHive v12, or an endpoint down now: it is then used as a plain v12)."""
    try:
        r = client.get(f"{target}/status", timeout=STATUS_TIMEOUT_S)
        listed = r.json().get("extensions") if r.status_code == 200 else None
    except (httpx.HTTPError, ValueError, AttributeError):
        return frozenset()
    return frozenset(x for x in listed if isinstance(x, str)) if isinstance(listed, list) else frozenset()


def poll_seal(client: httpx.Client, target: str, key: str, timeout_ms: int,
              now: Callable[[], float]) -> tuple[dict, float] | None:
    """One ``GET {target}/captures/seal?key=&timeoutMs=`` → (its body, ``now()`` when it came);
    None when it failed (not 200, not the contract's body, a transport error or timeout)."""
    try:
        r = client.get(f"{target}/captures/seal", params={"key": key, "timeoutMs": timeout_ms},
                       timeout=httpx.Timeout(timeout_ms / 1000 + 10, connect=10))
        received = now()
        body = r.json() if r.status_code == 200 else None
    except (httpx.HTTPError, ValueError):
        return None
    if not isinstance(body, dict) or not isinstance(body.get("sealed"), bool) or body.get("key") != key:
        return None
    return body, received


class Endpoint(Protocol):
    target: str

    def capture(self, request: dict, headers: dict | None = None) -> Any: ...

    def seal(self, key: str, timeout_ms: int) -> tuple[dict, float] | None: ...


@dataclass
class Tracker:
    """One submission's key and where it is being sent (set by the worker before each POST);
    ``wake`` is set on every change that the host's loop may be waiting for."""

    key: str = field(default_factory=lambda: uuid.uuid4().hex)
    endpoint: Any = None
    sent_at: float | None = None
    posted_mono: float = 0.0  # time.monotonic() of the last POST
    wake: threading.Event = field(default_factory=threading.Event)

    def posting(self, endpoint: Any, at: float) -> None:
        self.endpoint, self.sent_at, self.posted_mono = endpoint, at, time.monotonic()
        self.wake.set()


class Keyed:
    """An endpoint as one submission uses it: the key header where ``sealWait`` is advertised;
    ``startAfterMs`` = the rest of the gap where ``startAfterMs`` is, else the rest slept first."""

    def __init__(self, endpoint: Any, tracker: Tracker, start_at: Callable[[], float | None],
                 now: Callable[[], float], sleep: Callable[[float], None]) -> None:
        self.endpoint, self.target = endpoint, endpoint.target
        self._tracker, self._start_at, self._now, self._sleep = tracker, start_at, now, sleep

    def _left_s(self) -> float:
        at = self._start_at()
        return 0.0 if at is None else at - self._now()

    def capture(self, request: dict) -> Any:
        ext = extensions_of(self.endpoint)
        body = dict(request)
        if EXT_SEAL_FIRST in ext and "loadWait" in body:
            body[EXT_SEAL_FIRST] = True  # a short gap (settle_for_gap): the formats after the seal
        if EXT_START in ext:
            if self._left_s() > MAX_START_AFTER_MS / 1000:
                self._sleep(self._left_s() - MAX_START_AFTER_MS / 1000)
            if (left := self._left_s()) > 0:
                body["startAfterMs"] = min(MAX_START_AFTER_MS, math.ceil(left * 1000))
        else:
            while (left := self._left_s()) > 0:
                self._sleep(left)
        self._tracker.posting(self.endpoint, self._now())
        if EXT_SEAL in ext:
            return self.endpoint.capture(body, headers={KEY_HEADER: self._tracker.key})
        return self.endpoint.capture(body)


class Held:
    """The endpoint of the capture now loading, as the host's next submission uses it there
    (extension ``holdAfter``): the request names the loading capture's key and the host's gap
    (and the gap after a 429/503 back-off); the server holds its egress until that capture sealed
    and the gap passed since its last byte."""

    def __init__(self, endpoint: Any, tracker: Tracker, prev_key: str, gaps: tuple[int, ...],
                 now: Callable[[], float], admission: dict | None = None) -> None:
        self.endpoint, self.target = endpoint, endpoint.target
        self._tracker, self._prev_key, self._gaps, self._now = tracker, prev_key, gaps, now
        self._admission = admission  # holdAfter.admission (extension holdAdmission), or None

    def capture(self, request: dict) -> Any:
        ext = extensions_of(self.endpoint)
        body = dict(request)
        if EXT_SEAL_FIRST in ext and "loadWait" in body:
            body[EXT_SEAL_FIRST] = True
        body[EXT_HOLD] = {"key": self._prev_key, "gapMs": self._gaps[0], "backoffGapMs": self._gaps[1]}
        if len(self._gaps) > 2 and self._gaps[2] > 0:  # a slow previous page's longer gap (decision 242)
            body[EXT_HOLD]["delayFactor"] = self._gaps[2]
        if self._admission is not None and EXT_HOLD_ADMISSION in ext:
            body[EXT_HOLD]["admission"] = self._admission
        self._tracker.posting(self.endpoint, self._now())
        return self.endpoint.capture(body, headers={KEY_HEADER: self._tracker.key})


def _spawn(fn: Callable[..., Any], *args: Any) -> Future:
    """``fn(*args)`` in a daemon thread (a seal poll left behind must never hold the job open)."""
    future: Future = Future()

    def run() -> None:
        try:
            future.set_result(fn(*args))
        except BaseException as exc:  # noqa: BLE001 - handed to the waiter
            future.set_exception(exc)

    threading.Thread(target=run, daemon=True, name="seal-poll").start()
    return future


def await_seal(tracker: Tracker, answer: Future) -> tuple[dict, float] | None:
    """Wait until the submission's capture sealed: (seal body, received) with ``sealed: true``;
    None when its answer came first or a seal wait failed (the caller then uses the answer).

    The worker may move to another endpoint (429 Busy): the seal is polled where the POST went
    last (a poll left on the previous endpoint just times out). ``sealed: false`` = timed out:
    polled again while the capture runs."""
    polls: dict[int, Future] = {}
    while True:
        tracker.wake.clear()
        if answer.done():
            return None
        endpoint = tracker.endpoint
        if endpoint is not None and EXT_SEAL in extensions_of(endpoint):
            young = POLL_AFTER_S - (time.monotonic() - tracker.posted_mono)
            if young > 0 and id(endpoint) not in polls:  # a 429 comes back at once: not polled in vain
                tracker.wake.wait(young)
                continue
            polled = polls.get(id(endpoint))
            if polled is None:
                polled = polls[id(endpoint)] = _spawn(endpoint.seal, tracker.key, SEAL_POLL_MS)
                polled.add_done_callback(lambda _f: tracker.wake.set())
            if polled.done():
                got = polled.result()
                if got is None:
                    return None
                if got[0].get("sealed") is True:
                    return got
                del polls[id(endpoint)]
                continue
        tracker.wake.wait(1.0)


class Nap:
    """The busy-round sleep of a submission made while the host's previous capture finishes:
    the first nap ends early when that capture answers (its browser is free then)."""

    def __init__(self, finishing: Future | None, sleep: Callable[[float], None]) -> None:
        self._finishing, self._sleep = finishing, sleep

    def __call__(self, seconds: float) -> None:
        finishing, self._finishing = self._finishing, None
        if finishing is None:
            self._sleep(seconds)
        else:
            wait([finishing], timeout=seconds)


@dataclass
class Flight:
    """One submitted capture of the host: page ``index``, ``attempt`` (1, 2…), its key and
    worker, and ``gap_from`` (epoch s) once the seal gave it."""

    index: int
    attempt: int
    tracker: Tracker
    future: Future
    gap_from: float | None = None
    concluded: bool = False
    held: bool = False  # submitted behind the previous flight (holdAfter): its Raw is None if not taken


class Pages(Protocol):
    """crawl_host's side: what a capture of page ``index`` is and what its outcome means."""

    def started(self, index: int) -> None: ...

    # optional: def queued(self, index: int) -> None  (submitted held: not started yet; decision 401)

    def skip(self, index: int) -> bool: ...  # True: page ``index`` is not captured (recorded by Pages)

    def maybe_duplicate(self, index: int) -> bool: ...  # a sealed capture landed at its URL (not answered yet)

    def attempt(self, index: int, attempt: int, endpoints: Sequence[Keyed], nap: Nap) -> Any: ...

    def attempt_held(self, index: int, attempt: int, endpoint: Held) -> Any: ...  # None: not taken

    def hold_gaps_ms(self) -> tuple[int, ...]: ...  # (the gap, the gap after a 429/503 back-off[, delayFactor])

    # optional: def hold_admission(self) -> dict | None  (holdAfter.admission, extension holdAdmission)

    def seal_gap_from(self, index: int, body: dict, submitted: float, received: float) -> float: ...

    def conclude(self, flight: Flight) -> tuple[float, bool]: ...

    def gap_ms(self) -> int: ...

    # optional: ``admit()`` reads the host's shared delay now into the gap (decision 301)


class Chain:
    """The schedule of one host's captures (module doc). ``now``: epoch seconds off the
    monotonic clock (crawl_host's ``clock``); ``sleep`` for waits with nothing to watch."""

    def __init__(self, endpoints: Sequence[Any], pages: Pages, *, now: Callable[[], float],
                 sleep: Callable[[float], None] = time.sleep, lead_ms: int = START_LEAD_MS) -> None:
        self.endpoints, self.pages, self.now, self.sleep, self.lead_s = endpoints, pages, now, sleep, lead_ms / 1000
        self._begun: set[int] = set()
        self._queued: set[int] = set()  # held submissions reported queued, not yet started

    def run(self, count: int, gap_from: Optional[float] = None) -> None:
        """Capture pages ``0..count-1`` (and their retries); outcomes go to ``pages.conclude``.
        ``gap_from``: when the host's gap runs from before the first capture (None: no wait).
        A page ``pages.skip`` declines (asked before its first submission, and again once the
        wait before it ended: the previous capture may have answered meanwhile) is not submitted
        and takes no gap; a capture still in flight cannot tell, so its duplicate goes ahead.
        Where the loading capture's endpoint advertises ``holdAfter``, the next page is submitted
        there at once, held by the server (:meth:`_hold_next`); not taken, it goes the usual way."""
        todo: deque[tuple[int, int]] = deque((i, 1) for i in range(count))
        finishing: Flight | None = None
        held: Flight | None = None
        with ThreadPoolExecutor(max_workers=3, thread_name_prefix="capture") as pool:
            while todo or finishing is not None or held is not None:
                if held is not None:  # the page it was held behind sealed (or answered): its turn now
                    flight, held = held, None
                    self._started(flight.index, flight.attempt)
                else:
                    if not todo:
                        self._conclude(finishing, todo)
                        finishing = None
                        continue
                    if todo[0][1] == 1 and self.pages.skip(todo[0][0]):  # known before any wait
                        todo.popleft()
                        continue
                    if gap_from is not None:
                        finishing = self._until_lead(gap_from, finishing, todo)
                    index, attempt = todo.popleft()
                    if attempt == 1 and finishing is not None and self.pages.maybe_duplicate(index):
                        self._conclude(finishing, todo)  # its seal said it landed here: its answer decides
                        finishing = None
                    if attempt == 1 and self.pages.skip(index):  # known once ``finishing`` answered
                        continue
                    flight = self._submit(pool, index, attempt, gap_from, finishing)
                held = self._hold_next(pool, flight, todo)
                sealed_from = self._gap_from(flight, todo)
                if sealed_from is not None:
                    gap_from = sealed_from
                elif held is not None and held.future.result() is None:  # behind one never accepted
                    held.concluded = True
                    todo.insert(1, (held.index, held.attempt))
                    held = None
                if finishing is not None:  # the older one must be done (answered soon after its seal)
                    self._conclude(finishing, todo)
                finishing = None if flight.concluded else flight

    def _hold_next(self, pool: ThreadPoolExecutor, flight: Flight, todo: deque) -> Flight | None:
        """Submit the next page now to the endpoint that accepted ``flight``, held there until
        ``flight`` sealed and the gap passed since its last byte (extension ``holdAfter``), so
        its navigation is ready when the gap ends; None (nothing submitted) when that endpoint
        does not advertise it, ``flight`` was not accepted or already answered, no page is next,
        or the host's gap is long (≥ 1.2 s, no short-gap ``loadWait``): a held capture keeps its
        browser from other hosts for the gap, and a long gap hides the next navigation anyway."""
        if settle_for_gap(self.pages.gap_ms()) is None:  # a long gap: the browser is not held idle for it
            return None
        if not any(EXT_HOLD in extensions_of(e) for e in self.endpoints):
            return None
        if self._hold_admission() is not None and not any(EXT_HOLD_ADMISSION in extensions_of(e) for e in self.endpoints):
            return None  # no server would read the host's delay before the release (decision 302)
        self._admit()  # its admission: a longer delay registered meanwhile may make the gap long
        if settle_for_gap(self.pages.gap_ms()) is None:
            return None
        while todo and todo[0][1] == 1 and self.pages.skip(todo[0][0]):
            todo.popleft()
        if not todo or (todo[0][1] == 1 and self.pages.maybe_duplicate(todo[0][0])):
            return None  # a sealed capture landed at its URL: its answer decides at its turn
        tracker = flight.tracker
        while not flight.future.done():  # accepted = posted and no 429 back for POLL_AFTER_S
            tracker.wake.clear()
            young = POLL_AFTER_S - (time.monotonic() - tracker.posted_mono)
            if tracker.endpoint is not None and young <= 0:
                break
            tracker.wake.wait(young if tracker.endpoint is not None else 1.0)
        endpoint = tracker.endpoint
        if flight.future.done() or endpoint is None or not {EXT_HOLD, EXT_SEAL} <= extensions_of(endpoint):
            return None
        admission = self._hold_admission()
        if admission is not None and EXT_HOLD_ADMISSION not in extensions_of(endpoint):
            return None  # it would release at the gap read now, not at the release (decision 302): not held
        index, attempt = todo.popleft()
        nxt = Tracker()
        view = Held(endpoint, nxt, tracker.key, self.pages.hold_gaps_ms(), self.now, admission)
        self._started(index, attempt, held=True)  # queued behind ``flight``: started at its release
        future = pool.submit(self.pages.attempt_held, index, attempt, view)
        future.add_done_callback(lambda _f: nxt.wake.set())
        return Flight(index, attempt, nxt, future, held=True)

    def _started(self, index: int, attempt: int, held: bool = False) -> None:
        """``pages.started`` once per page (a held submission not taken is submitted again). A
        held submission (``held``) is ``pages.queued`` first (optional member; decision 401): the
        server keeps it from the site until the previous page sealed and the gap passed, so it is
        started only when :meth:`run` takes it up, once that page no longer loads."""
        if attempt != 1 or index in self._begun:
            return
        queued = getattr(self.pages, "queued", None)
        if held and queued is not None:
            if index not in self._queued:
                self._queued.add(index)
                queued(index)
            return
        self._begun.add(index)
        self.pages.started(index)

    def _hold_admission(self) -> dict | None:
        member = getattr(self.pages, "hold_admission", None)
        return None if member is None else member()

    def _admit(self) -> None:
        admit = getattr(self.pages, "admit", None)
        if admit is not None:
            admit()

    def _until_lead(self, gap_from: float, finishing: Flight | None, todo: deque) -> Flight | None:
        """Wait until the lead before the gap (``gap_from`` + the host's current gap) ends,
        concluding ``finishing`` if it answers meanwhile (a back-off then lengthens the wait);
        the submission is admitted :data:`ADMIT_LEAD_S` before that (``pages.admit()``: a longer
        shared delay read then lengthens the wait too)."""
        admitted = False
        while True:
            if finishing is not None and finishing.future.done():
                self._conclude(finishing, todo)
                finishing = None
            left = gap_from + self.pages.gap_ms() / 1000 - self.lead_s - self.now()
            if not admitted and left <= ADMIT_LEAD_S:
                self._admit()
                admitted = True
                continue
            if not admitted:
                left -= ADMIT_LEAD_S
            if left <= 0:
                return finishing
            if finishing is None:
                self.sleep(left)
            else:
                wait([finishing.future], timeout=left)

    def _submit(self, pool: ThreadPoolExecutor, index: int, attempt: int, gap_from: float | None,
                finishing: Flight | None) -> Flight:
        tracker = Tracker()

        def start_at() -> float | None:  # read at each POST: a back-off meanwhile counts
            return None if gap_from is None else gap_from + self.pages.gap_ms() / 1000

        view = [Keyed(e, tracker, start_at, self.now, self.sleep) for e in self.endpoints]
        self._started(index, attempt)
        nap = Nap(finishing.future if finishing is not None else None, self.sleep)
        future = pool.submit(self.pages.attempt, index, attempt, view, nap)
        future.add_done_callback(lambda _f: tracker.wake.set())
        return Flight(index, attempt, tracker, future)

    def _gap_from(self, flight: Flight, todo: deque) -> float | None:
        """The flight's ``gapFrom``: from its seal, or (no seal) from its answer, concluded here."""
        sealed = await_seal(flight.tracker, flight.future)
        if sealed is None:
            return self._conclude(flight, todo)
        body, received = sealed
        submitted = flight.tracker.sent_at if flight.tracker.sent_at is not None else received
        flight.gap_from = self.pages.seal_gap_from(flight.index, body, submitted, received)
        return flight.gap_from

    def _conclude(self, flight: Flight, todo: deque) -> float | None:
        """The flight's outcome to ``pages``; returns its gapFrom (None: a held submission the
        server did not take, back at the front of ``todo``, nothing reached the site)."""
        if flight.held and flight.future.result() is None:
            flight.concluded = True
            todo.appendleft((flight.index, flight.attempt))
            return None
        gap_from, retry = self.pages.conclude(flight)
        flight.concluded = True
        if retry:
            todo.appendleft((flight.index, flight.attempt + 1))
        return gap_from
