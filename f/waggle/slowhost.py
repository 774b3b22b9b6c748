# /// script
# requires-python = ">=3.11"
# dependencies = []
# ///
"""slowhost: a host whose answers take long gets a longer gap (issue 29 item 7, decision 242).

Heritrix's ``delayFactor`` idea: after a page whose main document took ``documentMs`` to arrive
(capture answer or seal answer member ``documentMs``, docs/capture-server.md extension
"serverpolite"), the host's next gap is ``max(floor, min(ADAPT_CAP_MS, ⌈k × documentMs⌉))``,
where ``floor`` is the gap the level planned — the crawl's delay, the robots.txt Crawl-delay,
other crawls' delays, a 429/503 back-off — so it is **never shorter than the delay**. ``k`` is
the crawl's ``delayFactor`` (default :data:`DEFAULT_DELAY_FACTOR`, Heritrix's; 0 = off). The
last page decides (a slow page followed by a fast one returns to the floor), as in Heritrix.
An answer without ``documentMs`` (a real BrowserHive v12, a failed navigation) changes nothing.
"""

from __future__ import annotations

import math
from typing import Any

DEFAULT_DELAY_FACTOR = 5.0  # Heritrix DispositionProcessor.delayFactor
MAX_DELAY_FACTOR = 60.0  # the ledger refuses more (a typo like 500 would stall a crawl)
ADAPT_CAP_MS = 30_000  # Heritrix maxDelayMs: the adapted part never exceeds it (the floor may)


def document_ms(body: Any) -> int | None:
    """The answer's ``documentMs`` (whole ms ≥ 0), else None (absent, null, not a number)."""
    if not isinstance(body, dict):
        return None
    value = body.get("documentMs")
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0 or value != value:
        return None
    return int(math.ceil(value))


def factor_of(value: Any) -> float:
    """The crawl's delay factor as the flow received it: None or not a number → the default;
    clamped to ``[0, MAX_DELAY_FACTOR]``."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value:
        return DEFAULT_DELAY_FACTOR
    return min(MAX_DELAY_FACTOR, max(0.0, float(value)))


def adapted_gap_ms(floor_ms: int, fetch_ms: int | None, factor: float, cap_ms: int = ADAPT_CAP_MS) -> int:
    """The gap after a page whose document took ``fetch_ms``: ``max(floor_ms, min(cap_ms,
    ⌈factor × fetch_ms⌉))`` ms; ``floor_ms`` when ``fetch_ms`` is None or ``factor`` ≤ 0."""
    floor_ms = max(0, int(floor_ms))
    if fetch_ms is None or factor <= 0:
        return floor_ms
    return max(floor_ms, min(int(cap_ms), int(math.ceil(factor * max(0, fetch_ms)))))
