"""Planning the next level: depth limit, trap screening, page budget (reference/ledger.md §7.5).

Pure functions, no I/O. ``plan_next_level`` is the one place the level report asks "what may
enter the next level?"; trap defences (issue #7, ``ledger.crawl.traps``) plug in here.
"""

from __future__ import annotations


from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

T = TypeVar("T")

STOP_REASONS = ("completed", "max_depth", "max_pages", "failed", "stopped", "time_limit", "size_limit")


def plan_budget(
    candidates: Sequence[T], *, next_depth: int, max_depth: int, max_pages: int, known: int
) -> tuple[list[T], str | None]:
    """Cut ``candidates`` (new URLs, first-seen order) to the crawl's limits.

    ``known`` = pages the crawl already holds (seeds count). Returns ``(to_insert, stop_reason)``:
    1. ``next_depth > max_depth`` → ``([], "max_depth")`` (checked first, wins over pages);
    2. no room left (``max_pages - known <= 0``) → ``([], "max_pages")``;
    3. more candidates than room → ``room`` of them chosen by :func:`interleave_hosts` (hosts
       take turns, so one host's long link list cannot starve another) and ``"max_pages"``;
    4. otherwise a copy of all candidates and ``None``.
    """
    if next_depth > max_depth:
        return [], "max_depth"
    room = max_pages - known
    if room <= 0:
        return [], "max_pages"
    if len(candidates) > room:
        return interleave_hosts(candidates, room), "max_pages"
    return list(candidates), None


def interleave_hosts(candidates: Sequence[T], room: int) -> list[T]:
    """The ``room`` candidates a round-robin over hosts picks: each host (``.host``; a candidate
    without one is its own host group ``""``) in order of its first candidate gives its next
    candidate in discovery order, turn by turn, until ``room`` are chosen. Returned in discovery
    order. Room 28 over hosts A (22 links) and B (22): 14 each; A (22) and B (8): A 20, B all 8
    (a host with fewer links than its share leaves its turns to the others)."""
    queues: dict[str, list[int]] = {}
    for i, candidate in enumerate(candidates):
        queues.setdefault(getattr(candidate, "host", "") or "", []).append(i)
    chosen: list[int] = []
    turn = 0
    lanes = list(queues.values())
    while len(chosen) < room and lanes:
        lanes = [lane for lane in lanes if turn < len(lane)]
        for lane in lanes:
            if len(chosen) == room:
                break
            chosen.append(lane[turn])
        turn += 1
    return [candidates[i] for i in sorted(chosen)]


@dataclass(frozen=True)
class LevelPlan:
    """What enters the next level: ``urls`` (in order), the ``stop_reason`` that applied at this
    level (None = none), and ``drops`` {reason: count} of candidates screened out as traps."""

    urls: list
    stop_reason: str | None
    drops: dict[str, int] = field(default_factory=dict)


def plan_next_level(
    candidates: Sequence[T],
    *,
    next_depth: int,
    max_depth: int,
    max_pages: int,
    known: int,
    known_per_host: Mapping[str, int] | None = None,
    max_pages_per_host: int | None = None,
    shape_counts: object | None = None,
    trap_reasons: Mapping[str, str | None] | None = None,
) -> LevelPlan:
    """Plan the next level from in-scope, not-yet-known candidates (``ParsedUrl``-like: ``.url``,
    ``.key``, ``.host``).

    Order: the depth limit first (nothing is screened when no level follows), then trap
    screening (``ledger.crawl.traps.screen``: dropped URLs do not use the page budget), then
    :func:`plan_budget`. ``known_per_host`` = pages the crawl already holds per host; ``max_pages_per_host`` = ``WAGGLE_MAX_PAGES_PER_HOST`` (None = no cap);
    ``shape_counts`` = ``ledger.crawl.param_traps.ShapeCounts`` for the query-parameter rules (None = off);
    ``trap_reasons`` = ``traps.trap_reason`` per key, when computed beforehand (``traps.screen``).
    """
    from ledger.crawl import link_counts, traps

    if next_depth > max_depth:
        link_counts.note_all(candidates, "max_depth", [])
        return LevelPlan([], "max_depth", {})
    kept, drops = traps.screen(candidates, known_per_host=known_per_host or {},
                               max_pages_per_host=max_pages_per_host, counts=shape_counts,  # type: ignore[arg-type]
                               reasons=trap_reasons)
    urls, reason = plan_budget(kept, next_depth=next_depth, max_depth=max_depth, max_pages=max_pages, known=known)
    link_counts.note_all(kept, reason or "max_pages", urls)  # each page's link counts (decision 232)
    return LevelPlan(urls, reason, drops)


def screen_traps(
    candidates: Sequence[T], *, known_per_host: Mapping[str, int], max_pages_per_host: int | None
) -> tuple[list[T], dict[str, int]]:
    """Trap screening: ``(kept, drops)`` from ``ledger.crawl.traps.screen`` (issue #7)."""
    from ledger.crawl import traps

    return traps.screen(candidates, known_per_host=known_per_host, max_pages_per_host=max_pages_per_host)
