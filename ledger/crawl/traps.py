"""Crawler-trap defences applied while planning the next level (issue #7, cases C6 and C7).

Pure functions, no I/O. A candidate is dropped, and counted under one reason, when:

* ``url_too_long`` — its URL (as discovered or WHATWG-serialized) is over
  :data:`MAX_URL_LENGTH` (2,048) characters;
* ``repeated_segment`` — one non-empty path segment occurs more than
  :data:`MAX_REPEATS` (2) times (``/a/b/a/b/a/b/`` — case C7's relative-link loop);
* ``repeated_hostname`` — one host name embedded in the path or query occurs more than
  :data:`MAX_REPEATS` times (``/a/www.example.net/policies/www.example.net/…``);
* ``session_id``, ``parameter_walk``, ``query_variants`` — query-parameter traps (calendars,
  ``?month=N+1`` chains, facet explosions, session ids): ``ledger.crawl.param_traps``, with the
  crawl's counts per URL shape passed in as ``counts``;
* ``max_pages_per_host`` — its host already holds ``WAGGLE_MAX_PAGES_PER_HOST`` pages
  (earlier levels plus the candidates kept before it), so one calendar (case C6) cannot eat the
  budget of other hosts.

The level planner (``ledger.crawl.budget.plan_next_level``) calls :func:`screen` before the page
budget, so dropped URLs never use budget; the counts are stored with the crawl and shown as
``drops`` in ``GET /api/crawls/{id}``.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import TypeVar
from urllib.parse import unquote

import ada_url

from ledger.crawl.link_counts import note as note_fate
from ledger.crawl.param_traps import REASONS as PARAM_REASONS, ShapeCounts, shapes_of

T = TypeVar("T")

MAX_URL_LENGTH = 2048
MAX_REPEATS = 2

URL_TOO_LONG = "url_too_long"
REPEATED_SEGMENT = "repeated_segment"
REPEATED_HOSTNAME = "repeated_hostname"
MAX_PAGES_PER_HOST = "max_pages_per_host"
REASONS = (URL_TOO_LONG, REPEATED_SEGMENT, REPEATED_HOSTNAME, *PARAM_REASONS, MAX_PAGES_PER_HOST)

# A host name inside a path or query: two or more dot-separated labels ending in an
# alphabetic label (``www.example.net``, ``example.co.uk``), case-insensitive.
_HOSTNAME = re.compile(
    r"(?<![a-z0-9.-])(?:[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z][a-z0-9-]{0,61}[a-z0-9](?![a-z0-9-])",
    re.IGNORECASE,
)


def _parts(candidate: object) -> tuple[str, str, str]:
    """(url, key, host) of a ``ParsedUrl``-like object (``.url``, ``.key``, ``.host``) or a string."""
    if isinstance(candidate, str):
        try:
            parsed = ada_url.URL(candidate)
            return candidate, parsed.href, parsed.host
        except ValueError:
            return candidate, candidate, ""
    url = getattr(candidate, "url")
    return url, getattr(candidate, "key", url), getattr(candidate, "host", "")


def _path_and_query(key: str) -> tuple[str, str]:
    """Path and query (with its ``?``) of a key. A WHATWG-serialized http(s) URL is cut as a
    string (exact: its authority ends at the first ``/``, the query starts at the first ``?``,
    the fragment at the first ``#``); anything else goes through ada-url."""
    scheme, sep, rest = key.partition("://")
    if sep and scheme in ("http", "https") and "/" in rest:
        path = "/" + rest.split("/", 1)[1].split("#", 1)[0]
        path, mark, query = path.partition("?")
        return path, mark + query if query else ""
    try:
        parsed = ada_url.URL(key)
        return parsed.pathname, parsed.search
    except ValueError:
        rest = key.split("://", 1)[-1]
        path = "/" + rest.split("/", 1)[1] if "/" in rest else "/"
        path, _, query = path.partition("?")
        return path, query


def too_long(url: str, key: str) -> bool:
    """Whether ``url`` (as given) or ``key`` (its WHATWG serialization) exceeds
    :data:`MAX_URL_LENGTH` characters: such a URL is never crawled, neither as a discovered
    link nor as a seed or saved target (those are refused up front)."""
    return len(url) > MAX_URL_LENGTH or len(key) > MAX_URL_LENGTH


def shown(url: str, keep: int = 80) -> str:
    """``url`` for an error message: its first ``keep`` characters, then ``…`` and its length."""
    return url if len(url) <= keep else f"{url[:keep]}… ({len(url):,} characters)"


def trap_reason(url: str, key: str | None = None) -> str | None:
    """The trap reason for one URL (``url_too_long``, ``repeated_segment``,
    ``repeated_hostname``) or ``None``. ``key`` is the WHATWG-serialized form (default: parsed
    from ``url``). The per-host cap needs counts, see :func:`screen`."""
    if key is None:
        key = _parts(url)[1]
    if too_long(url, key):
        return URL_TOO_LONG
    path, query = _path_and_query(key)
    # unquote only what has escapes (100,000 links per level report); lower-casing the whole
    # path before splitting is the same as per segment (no character lower-cases to "/")
    if "%" in path:
        segments = [unquote(s).lower() for s in path.split("/") if s]
    else:
        segments = [s for s in path.lower().split("/") if s]
    # fast exits (most URLs): no segment twice; fewer dots than repeated host names need
    if len(set(segments)) < len(segments) and max(Counter(segments).values()) > MAX_REPEATS:
        return REPEATED_SEGMENT
    text = path + query
    if "%" in text:
        text = unquote(text)
    if text.count(".") <= MAX_REPEATS:
        return None
    hostnames = Counter(h.lower().rstrip(".") for h in _HOSTNAME.findall(text))
    if hostnames and max(hostnames.values()) > MAX_REPEATS:
        return REPEATED_HOSTNAME
    return None


def screen(
    candidates: Sequence[T],
    *,
    known_per_host: Mapping[str, int],
    max_pages_per_host: int | None,
    counts: ShapeCounts | None = None,
    reasons: Mapping[str, str | None] | None = None,
) -> tuple[list[T], dict[str, int]]:
    """Split next-level candidates into ``(kept, drops)``.

    ``reasons``: :func:`trap_reason` already computed per key (the level report computes it
    while Postgres inserts, ``ledger.crawl.levels``); a key not in it is computed here.

    ``counts``: the crawl's counts per URL shape for the query-parameter rules
    (``ledger.crawl.shape_store.load``; None = those rules are off); updated as candidates are kept.

    ``candidates``: new in-scope URLs in first-seen order (``ParsedUrl``-like or strings);
    ``known_per_host``: pages the crawl already holds per host (same ``host`` form as the
    candidates, ``hostname[:port]``); ``max_pages_per_host``: the cap (None or ≤ 0 = no cap).
    ``kept`` keeps the input order; ``drops`` maps each reason that fired to its count (reasons
    with no drop are absent).
    """
    kept: list[T] = []
    drops: Counter[str] = Counter()
    per_host: Counter[str] = Counter()
    cap = max_pages_per_host if max_pages_per_host and max_pages_per_host > 0 else None
    for candidate in candidates:
        url, key, host = _parts(candidate)
        reason = reasons[key] if reasons is not None and key in reasons else trap_reason(url, key)
        shapes = shapes_of(key) if counts is not None else None
        if reason is None and shapes is not None:
            reason = counts.reason(key, shapes)  # type: ignore[union-attr]
        if reason is None and cap is not None:
            if known_per_host.get(host, 0) + per_host[host] >= cap:
                reason = MAX_PAGES_PER_HOST
        if reason is not None:
            drops[reason] += 1
            note_fate(key, reason)  # the page's own link counts (decision 232)
            continue
        per_host[host] += 1
        if shapes is not None:
            counts.keep(key, shapes)  # type: ignore[union-attr]
        kept.append(candidate)
    return kept, dict(drops)


def filter_traps(
    candidates: Sequence[T], per_host_counts: Mapping[str, int], max_per_host: int | None
) -> tuple[list[T], dict[str, int]]:
    """Positional alias of :func:`screen`: ``(kept, drops)``."""
    return screen(candidates, known_per_host=per_host_counts, max_pages_per_host=max_per_host)


def merge_drops(*counts: Mapping[str, int] | None) -> dict[str, int]:
    """Sum drop counters (``{reason: n}``), e.g. the crawl's stored drops plus this level's."""
    total: Counter[str] = Counter()
    for c in counts:
        if c:
            total.update({k: int(v) for k, v in c.items()})
    return dict(total)
