"""The settle wait after a navigation (contracts.md §A.4 ``loadWait``)."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from playwright.async_api import Page

from waggle_capture.recorder import Recorder
from waggle_capture.state import Run


# Milliseconds since the page's load event ended, on the page's own clock (null: not loaded).
LOAD_AGE_JS = """() => {
  const nav = performance.getEntriesByType("navigation")[0];
  return nav && nav.loadEventEnd > 0 ? performance.now() - nav.loadEventEnd : null;
}"""


async def settle(run: Run, recorder: Recorder, limits: dict[str, int], dpr: int, page: Page | None = None) -> dict[str, Any]:
    """Wait until the network is quiet (≤ ``networkConcurrency`` in flight for ``quietMs`` since
    :func:`quiet_since`), between ``minMs`` and ``maxMs`` (milliseconds) after navigation
    returned — with ``page``, after its load event as the page itself dated it (:func:`loaded_at`:
    the navigation returns 10–120 ms after the event, and that delay is no reason to wait);
    bounded by the task budget. Returns the report's ``settle`` object (signals not reached are absent)."""
    begin = time.monotonic()
    dating = asyncio.ensure_future(loaded_at(page)) if page is not None else None
    quiet_at: int | None = None
    ended = "deadline"
    while True:
        if dating is not None and dating.done():
            at, dating = dating.result(), None
            if at is not None:  # dated on the way back: never earlier than the event itself
                begin = min(begin, at)
        waited = (time.monotonic() - begin) * 1000
        idle_ms = (time.monotonic() - quiet_since(run, recorder)) * 1000
        quiet = len(recorder.inflight) <= limits["networkConcurrency"] and idle_ms >= limits["quietMs"]
        if quiet and quiet_at is None:
            quiet_at = int(waited)
        if not quiet:
            quiet_at = None
        if quiet and waited >= limits["minMs"]:
            ended = "quiet"
            break
        if waited >= limits["maxMs"] or run.remaining_s() < 0.5:
            break
        pause = _pause_s(run, recorder, limits, begin, quiet)
        if dating is not None:  # wake when the load is dated: minMs may have passed already
            await asyncio.wait([dating], timeout=pause)
        else:
            await asyncio.sleep(pause)
    if dating is not None:
        dating.cancel()
    out: dict[str, Any] = {
        "strategy": "fully-loaded", "endedBy": ended, "waitedMs": int((time.monotonic() - begin) * 1000),
        "devicePixelRatio": dpr, "limits": dict(limits), "load": {"atMs": 0}, "network": {}, "cpu": {}, "dom": {},
    }
    if quiet_at is not None:
        out["network"]["quietAtMs"] = quiet_at
    return out


async def loaded_at(page: Page) -> float | None:
    """Monotonic seconds of the page's load event as the page dated it, taken when the answer is
    back (so never before the event: the way back only adds); None when the page cannot say
    (not loaded, navigating away, no navigation entry)."""
    try:
        age_ms = await asyncio.wait_for(page.evaluate(LOAD_AGE_JS), 2)
    except Exception:  # noqa: BLE001 — then the navigation's return dates the load, as before
        return None
    if not isinstance(age_ms, (int, float)) or age_ms < 0:
        return None
    return time.monotonic() - age_ms / 1000


def quiet_since(run: Run, recorder: Recorder) -> float:
    """Monotonic seconds since which the network has been quiet: the browser's last request
    event (start or end), except that an end event is dated by the last byte that passed the
    context's proxy when that came earlier — end events arrive 10–80 ms after the bytes (more on
    a loaded machine), and a quiet window should not count that delay. Never earlier than the
    last request start; a connection still streaming (allowed by ``networkConcurrency``) keeps
    its old events' time, as before."""
    wire = run.proxy.last_traffic if run.proxy is not None else None
    if wire is None or recorder.last_start is None:
        return recorder.last_activity
    return max(recorder.last_start, min(recorder.last_activity, wire))


def _pause_s(run: Run, recorder: Recorder, limits: dict[str, int], begin: float, quiet: bool) -> float:
    # Quiet, waiting for minMs: sleep until it ends. Few enough in flight but not quiet yet: sleep
    # until the quiet window would end (then re-check) instead of polling, so the wait ends when
    # the window does; else poll (50 ms).
    now = time.monotonic()
    until = min(begin + limits["maxMs"] / 1000, now + 0.05)
    if quiet:  # only minMs is left: sleep until it ends (a request meanwhile is seen then)
        until = min(begin + limits["maxMs"] / 1000, begin + limits["minMs"] / 1000)
    elif len(recorder.inflight) <= limits["networkConcurrency"]:
        until = min(begin + limits["maxMs"] / 1000, quiet_since(run, recorder) + limits["quietMs"] / 1000)
    return min(max(until - now, 0.002), 0.25, max(run.remaining_s() - 0.5, 0.002))
