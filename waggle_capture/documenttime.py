"""How long the site took to send the main document (answer member ``documentMs``; capture-server
extension "serverpolite", decision 242): the flow's slow-host gap is ``k × documentMs``.

Chromium's resource timing of the main document (Playwright ``Request.timing``: ``startTime``
epoch ms, the others ms after it, -1 when unknown): from the later of the request's start and
the moment this capture's egress was let out to the site (``startAfterMs`` / ``holdAfter``: a
held request waits at the proxy, which the site never feels) to its response's end (else its
first byte). None without a usable timing.
"""

from __future__ import annotations

import math
import time
from typing import Any


def released_epoch_s(run: Any) -> float | None:
    """Epoch s this capture's connections were let out (None: not held)."""
    req = getattr(run, "req", {}) or {}
    if "startAfterMs" not in req and "holdAfter" not in req:
        return None
    ends = [run.t0 + (req.get("startAfterMs") or 0) / 1000]
    released = getattr(getattr(run, "hold", None), "released_at", None)
    if released is not None:
        ends.append(released)
    return time.time() - time.monotonic() + max(ends)


def document_ms(timing: Any, released_s: float | None = None) -> int | None:
    """Whole ms (rounded up) the site took for the document (see the module docstring)."""
    if not isinstance(timing, dict):
        return None
    start = timing.get("startTime")
    end = timing.get("responseEnd")
    if not isinstance(end, (int, float)) or end < 0:
        end = timing.get("responseStart")
    if not isinstance(start, (int, float)) or not isinstance(end, (int, float)) or end < 0 or start <= 0:
        return None
    sent = timing.get("requestStart")
    began = start + (sent if isinstance(sent, (int, float)) and sent >= 0 else 0)
    if released_s is not None:
        began = max(began, released_s * 1000.0)
    return max(0, math.ceil(start + end - began))


def of(response: Any, run: Any) -> int | None:
    """:func:`document_ms` of a Playwright main-document ``response`` for ``run``; None on any error."""
    try:
        return document_ms(response.request.timing, released_epoch_s(run))
    except Exception:  # noqa: BLE001 - a fact for the gap, never a capture failure
        return None
