# /// script
# requires-python = ">=3.11"
# dependencies = ["httpx==0.28.1", "wmill==1.850.0", "protego==0.7.0", "google-re2==1.1.20251105"]
# ///
"""The host's gap: the clock crawl_host sleeps by, where a gap starts, how long is left, busy rounds,
back-off after 429/503, and the rest before a failing job's retry (crawl_host's politeness core).

Split out of f/waggle/crawl_host.py (issue 30 item 5), no change of behaviour.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from f.waggle import slowhost



BUSY_JITTER_MS = (500.0, 1500.0)
# A host whose gap is longer than this goes round proportionally faster while every browser is
# busy (down to BUSY_MIN_FACTOR of the window): it is the level's critical path — nothing but
# a browser the moment its gap ends shortens its chain — while a short-gap host loses little
# by waiting. See busy_window.
BUSY_REF_GAP_MS = 4000
BUSY_MIN_FACTOR = 0.2
BACKOFF_STATUSES = frozenset({429, 503})
BACKOFF_MIN_MS = 1000  # what a zero gap becomes (doubling zero would stay zero)
BACKOFF_CAP_MS = 120_000


_EPOCH_MINUS_MONOTONIC = time.time() - time.monotonic()


def clock() -> float:
    """Epoch seconds read off the monotonic clock (anchored once per process at import), so
    the differences crawl_host sleeps by never jump with a wall-clock step."""
    return _EPOCH_MINUS_MONOTONIC + time.monotonic()


def gap_start(body: Any, submitted: float, received: float) -> float:
    """Epoch s the host's gap runs from (BRIEF contract 1–2, issue 11).

    ``received − sinceLastRequestMs / 1000`` clamped to ``[submitted, received]`` when the
    answer carries a non-negative integer ``sinceLastRequestMs`` (ms on the capture server's
    monotonic clock from the end of the page's last request to the answer); ``received``
    (the answer's arrival, today's rule) when the field is absent or not such an integer.
    """
    since = body.get("sinceLastRequestMs") if isinstance(body, dict) else None
    if not isinstance(since, int) or isinstance(since, bool) or since < 0:
        return received
    return min(received, max(submitted, received - since / 1000.0))


def remaining_gap_s(gap_ms: int, gap_from: float, now: float) -> float:
    """Seconds still to wait so that ``gap_ms`` has passed since ``gap_from`` (epoch s); ≥ 0."""
    return max(0.0, gap_ms / 1000.0 - (now - gap_from))


def busy_window(busy_jitter_ms: tuple[float, float], gap_ms: int,
                ref_gap_ms: float = BUSY_REF_GAP_MS) -> tuple[float, float]:
    """The wait (ms, uniform between the two) between busy rounds for a host with ``gap_ms``.

    ``busy_jitter_ms × clamp(ref_gap_ms / gap_ms, BUSY_MIN_FACTOR, 1)``: 0.5–1.5 s up to a 4 s
    gap, 0.1–0.3 s from a 20 s gap on. Only hosts sleeping long gaps go round faster, and a
    round probes each endpoint once, so the probe rate stays bounded (≤ 10 per endpoint per
    second per waiting long-gap host, ≤ 2 for the others).
    """
    factor = 1.0 if gap_ms <= 0 else min(1.0, max(BUSY_MIN_FACTOR, ref_gap_ms / gap_ms))
    return busy_jitter_ms[0] * factor, busy_jitter_ms[1] * factor


@dataclass
class HostGap:
    """The host's current gap (ms) for this level; :meth:`back_off` after a 429/503 document,
    :meth:`adapt` after each page (a slow host's longer gap, :mod:`f.waggle.slowhost`),
    :meth:`share` at each request's admission (the host's shared delay read again,
    :mod:`f.waggle.host_admission`, decision 301).
    ``floor``: the gap without that adaptation (delay, Crawl-delay, other crawls' delays,
    back-offs); ``ms`` ≥ it. ``own`` (ms, -1: ``ms``): the crawl's own part of the planned gap
    (its delay and the Crawl-delay, without other crawls' delays): the floor never drops below it,
    while the shared part follows what the ledger says now (a crawl that ended stops slowing the host)."""

    ms: int
    say: Callable[[str], None]
    factor: float = 0.0  # the crawl's delayFactor (0: no adaptation)
    floor: int = -1  # -1: ms
    own: int = -1  # -1: the floor (nothing of the planned gap is another crawl's)

    def __post_init__(self) -> None:
        if self.floor < 0:
            self.floor = self.ms
        self.own = self.floor if self.own < 0 else min(max(0, self.own), self.floor)
        self.shared = self.floor  # the other crawls' delay as planned (≥ own)
        self._slow = self.ms if self.ms > self.floor else 0  # the slow-host gap of the last page (0: none)

    def _settle(self) -> None:
        self.floor = max(self.own, self.shared)
        self.ms = max(self.floor, self._slow)

    def share(self, shared_ms: int) -> None:
        """The host's shared delay as the ledger says it now (``hostDelayMs``: the longest delay of
        the crawls active on the host): raises the gap, or lowers it back towards ``own`` when a
        crawl that slowed the host has ended. Logged when it changes the gap."""
        before = self.ms
        self.shared = max(0, int(shared_ms))
        self._settle()
        if self.ms != before:
            why = "another crawl on this host uses a longer delay" if self.ms > before else "a crawl that slowed this host has ended"
            self.say(f"{why}: gap {before} → {self.ms} ms")

    def back_off(self, status: int | str, retry_after_ms: int | None = None) -> None:
        """Double the gap (:func:`backed_off_gap`), and make it ≥ the answer's ``Retry-After``
        (ms, capped at BACKOFF_CAP_MS; RFC 9110 §10.2.3): the next capture waits it from gapFrom."""
        new = backed_off_gap(self.floor)
        asked = ""
        if retry_after_ms is not None:
            new = max(new, min(retry_after_ms, BACKOFF_CAP_MS))
            asked = f" (Retry-After {retry_after_ms} ms)"
        self.say(f"main document answered {status}{asked}: gap for the rest of this level {self.ms} → {max(new, self.ms)} ms")
        self.own = new  # a back-off is the host's own answer: it stays whatever other crawls do
        self._settle()

    def adapt(self, document_ms: int | None) -> None:
        """The gap after a page whose main document took ``document_ms`` (None: unknown, no
        change): :func:`f.waggle.slowhost.adapted_gap_ms`, never below ``floor``."""
        if document_ms is None:
            return
        new = slowhost.adapted_gap_ms(self.floor, document_ms, self.factor)
        if new != self.ms:
            self.say(f"main document took {document_ms} ms: gap {self.ms} → {new} ms (delay factor {self.factor:g})")
        self._slow = slowhost.adapted_gap_ms(0, document_ms, self.factor)
        self._settle()


def backed_off_gap(gap_ms: int) -> int:
    """The host's gap after a 429/503 main document: doubled (0 → 1 s), capped at BACKOFF_CAP_MS,
    never shorter than before (a longer Crawl-delay stays)."""
    doubled = gap_ms * 2 if gap_ms > 0 else BACKOFF_MIN_MS
    return max(gap_ms, min(doubled, BACKOFF_CAP_MS))


# The flow's retry of this step (crawl_level.flow: retry.constant.seconds; a test keeps them equal).
FLOW_RETRY_S = 30


def rest_before_retry_s(gap_ms: int, contacted: bool) -> float:
    """Seconds to wait before a failing job raises: Windmill retries the step ``FLOW_RETRY_S``
    later from its first page, which must still keep the host's gap (ms) from this attempt's
    last request. Unknown when exactly that was, so it counts from now: ``gap − retry delay``,
    ≥ 0; 0 when this attempt never submitted a page (``contacted`` False)."""
    return max(0.0, gap_ms / 1000.0 - FLOW_RETRY_S) if contacted else 0.0


def first_wait_s(initial_delay_ms: int | None, not_before: float | None, now: float) -> float:
    """Seconds the first capture still waits: ``initial_delay_ms`` (ms, planned), cut to what is
    left until ``not_before`` (epoch s) — a for-each slot that opened late has already waited part
    of it. Never longer than planned, never negative; ``not_before`` None keeps the planned wait.
    The plan and this job compare one clock (Windmill workers of one installation), as the
    ledger's ``lastFinishedAt`` already does."""
    planned = max(0.0, (initial_delay_ms or 0) / 1000.0)
    if not isinstance(not_before, (int, float)) or isinstance(not_before, bool):
        return planned
    return max(0.0, min(planned, float(not_before) - now))
