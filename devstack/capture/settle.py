"""The settle wait after a navigation (contracts.md §A.4 ``loadWait``)."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from devstack.capture.recorder import Recorder
from devstack.capture.state import Run


async def settle(run: Run, recorder: Recorder, limits: dict[str, int], dpr: int) -> dict[str, Any]:
    """Wait until the network is quiet (≤ ``networkConcurrency`` in flight for ``quietMs``),
    between ``minMs`` and ``maxMs`` (milliseconds) after navigation returned; bounded by the task
    budget. Returns the report's ``settle`` object (signals not reached are absent)."""
    begin = time.monotonic()
    quiet_at: int | None = None
    ended = "deadline"
    while True:
        waited = (time.monotonic() - begin) * 1000
        idle_ms = (time.monotonic() - recorder.last_activity) * 1000
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
        await asyncio.sleep(_pause_s(run, recorder, limits, begin, quiet))
    out: dict[str, Any] = {
        "strategy": "fully-loaded", "endedBy": ended, "waitedMs": int((time.monotonic() - begin) * 1000),
        "devicePixelRatio": dpr, "limits": dict(limits), "load": {"atMs": 0}, "network": {}, "cpu": {}, "dom": {},
    }
    if quiet_at is not None:
        out["network"]["quietAtMs"] = quiet_at
    return out


def _pause_s(run: Run, recorder: Recorder, limits: dict[str, int], begin: float, quiet: bool) -> float:
    # Few enough in flight but not quiet yet: sleep until the quiet window would end (then
    # re-check) instead of polling, so the wait ends when the window does; else poll (50 ms).
    now = time.monotonic()
    until = min(begin + limits["maxMs"] / 1000, now + 0.05)
    if not quiet and len(recorder.inflight) <= limits["networkConcurrency"]:
        until = min(begin + limits["maxMs"] / 1000, recorder.last_activity + limits["quietMs"] / 1000)
    return min(max(until - now, 0.002), 0.25, max(run.remaining_s() - 0.5, 0.002))
