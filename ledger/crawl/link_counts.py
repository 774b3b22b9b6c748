"""Per page: how many links it gave, how many the crawl took, and why the rest were not taken
(issue 24 item 8, last part; decision 232).

"discovered 1000" on a page whose links were mostly cut by traps says nothing of what could be
taken. The level report (:mod:`ledger.crawl.levels`) decides each link's fate for the whole
report at once; this module gives each page its share:

* ``discovered``: the links the page gave (inline or ``.links.json``) + ``linksOverflow`` (beyond
  the per-page cap, never sent);
* ``kept``: its links that are pages of the next level now — each new URL counted for the first
  page of the report that named it;
* ``dropped``: ``{reason: n}`` for the others: the scope filter's reasons (``out_of_scope``,
  ``excluded``, ``nofollow``, ``extra_hops``, ``invalid_url``, ``userinfo``), ``private_host``,
  ``links_overflow``, ``duplicate`` (named twice on the page, by an earlier page of the report,
  or already known to the crawl), and the plan's reasons (the trap rules' ``max_pages_per_host``,
  ``query_variants``, ``path_walk``…, the budget's ``max_pages`` and ``max_depth`` — at the last
  level every in-scope link, known or not: nothing is looked up when no level follows).

So ``discovered = kept + Σ dropped`` for every page. The plan's per-URL verdicts are collected
while the report runs (:func:`collecting`, fed by :func:`note` from ``ledger.crawl.traps`` and
``ledger.crawl.budget``); the scope verdicts are the report's own (its href cache is reused), so
nothing is parsed twice. robots.txt is not a link's fate here: a disallowed link is a page of
the next level, ``skipped`` when that level is planned.
"""

from __future__ import annotations

import contextlib
import json
from collections import Counter
from collections.abc import Iterator, Sequence
from contextvars import ContextVar
from typing import Any

from ledger.crawl.guard import refusal
from ledger.crawl.scope import LinkFilter

KEPT = ""  # a fate: the plan took the URL
_FATES: ContextVar[dict[str, str] | None] = ContextVar("link_fates", default=None)


@contextlib.contextmanager
def collecting() -> Iterator[dict[str, str]]:
    """Collect the plan's verdict per URL key (``KEPT`` or a drop reason) while the block runs."""
    fates: dict[str, str] = {}
    token = _FATES.set(fates)
    try:
        yield fates
    finally:
        _FATES.reset(token)


def current() -> dict[str, str]:
    """The verdicts collected so far (empty when not collecting)."""
    return _FATES.get() or {}


def note(key: str, reason: str) -> None:
    """Record the plan's verdict on ``key`` (first verdict wins) when collecting; else nothing."""
    fates = _FATES.get()
    if fates is not None:
        fates.setdefault(key, reason)


def note_all(candidates: Sequence[Any], cut: str, taken: Sequence[Any]) -> None:
    """:func:`note` ``KEPT`` for each of ``taken`` and ``cut`` for the other ``candidates``
    (``.key``-bearing URLs or strings) when collecting."""
    fates = _FATES.get()
    if fates is None:
        return
    took = {getattr(t, "key", t) for t in taken}
    for c in candidates:
        key = getattr(c, "key", c)
        fates.setdefault(key, KEPT if key in took else cut)


def tally(pages: Sequence[tuple], seeds: Sequence[Any], scope: Any, fates: dict[str, str],
          allow_private: bool, href_cache: dict | None = None) -> list[dict]:
    """One ``{discovered, kept, dropped}`` per ``(result, links, hops[, scoped])`` in report order
    (``links``: the result's links as the report read them; ``hops``: how far out of scope its
    page is; ``scoped``: what the scope said of exactly these links, a
    ``ledger.crawl.report_early.Scoped`` stored when they landed from progress, or None).
    ``href_cache``: the report's LinkFilter href verdicts, reused. A page with ``scoped`` (and
    hops 0, as it is scoped) is not scoped again: its accepted URLs and drops are those a
    LinkFilter over its links alone gives (the verdicts are pure), so the counts are the same."""
    claimed: set[str] = set()
    verdicts: dict[str, str | None] = {}
    out: list[dict] = []
    for result, links, hops, *rest in pages:
        scoped = rest[0] if rest else None
        if scoped is not None and not hops:
            accepted, dropped = scoped.urls, Counter(scoped.drops)
        else:
            screen = LinkFilter(seeds, scope)
            if href_cache is not None:
                screen._fate = href_cache  # noqa: SLF001 - pure verdicts by href, shared with the report
            accepted = screen.accept(links, hops)
            dropped = Counter(screen.drops)
        overflow = int(result.get("linksOverflow") or 0) if result.get("links") is not None else 0
        if overflow:
            dropped["links_overflow"] += overflow
        kept = 0
        for p in accepted:
            if p.host not in verdicts:
                verdicts[p.host] = refusal(p.url, allow_private)
            if verdicts[p.host]:
                dropped["private_host"] += 1
            elif p.key in claimed:
                dropped["duplicate"] += 1
            else:
                claimed.add(p.key)
                fate = fates.get(p.key)
                if fate == KEPT:
                    kept += 1
                else:
                    dropped[fate or "duplicate"] += 1  # no verdict: the crawl knew it before this report
        out.append({"discovered": len(links) + overflow, "kept": kept,
                    "dropped": {k: v for k, v in sorted(dropped.items()) if v}})
    return out


def answer_items(results: Sequence[dict], counts: Sequence[dict]) -> list[dict]:
    """The level report answer's ``pageLinks``: ``[{url, discovered, kept, dropped}]`` of the pages
    that gave links, in report order."""
    return [{"url": r["url"], **c} for r, c in zip(results, counts) if c["discovered"]]


async def store(conn: Any, crawl_id: Any, depth: int, hashes: Sequence[bytes | None],
                counts: Sequence[dict | None]) -> None:
    """``crawl_pages.links`` (migration 281) of the reported pages of level ``depth`` that gave links;
    two results for one page: the later one's (as the level report applies them)."""
    last = {h: c for h, c in zip(hashes, counts) if h is not None and c and c["discovered"]}
    rows = [(h, json.dumps(c)) for h, c in last.items()]
    if not rows:
        return
    await conn.execute(
        "UPDATE crawl_pages p SET links = v.links FROM unnest(%s::bytea[], %s::jsonb[]) AS v(url_hash, links)"
        " WHERE p.crawl_id = %s AND coalesce(p.level, p.depth) = %s AND p.url_hash = v.url_hash",
        ([h for h, _ in rows], [c for _, c in rows], crawl_id, depth))
