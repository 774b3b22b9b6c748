"""The cyclic garbage collector paused while a level report is applied (issue 14, third round).

A report of 100,000 links makes ~1,000,000 container objects (the body, one ``ParsedUrl`` per
link, the rows), none of them garbage until the report ends: the collector's ~900 passes
(2–3 of them over the whole heap) found nothing and cost 0.3–0.5 s of the ledger's CPU per
report (tests/bench/README.md "Level report, third round"). Reference counting still frees
everything that is not in a cycle; the collector resumes when the last report in flight ends.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

_depth = 0  # reports in flight in this process (the ledger's event loop: one thread)
_paused = False  # whether the collector was on when the first of them began


@contextmanager
def paused_gc() -> Iterator[None]:
    """Disable ``gc`` for the block; nested or concurrent blocks (two reports interleaving on
    the event loop) keep it off until the last one exits; re-enabled only if it was enabled."""
    global _depth, _paused
    if _depth == 0:
        _paused = gc.isenabled()
        gc.disable()
    _depth += 1
    try:
        yield
    finally:
        _depth -= 1
        if _depth == 0 and _paused:
            gc.enable()
