"""Query-parameter traps: calendars, endless ``?page=N+1`` walks, facet explosions, session ids
(issue 13; cases C6). Pure functions over *shapes* of a URL's dedup key; the crawl's counts per
shape live in ``crawl_url_shapes`` (migration 062, ``ledger.crawl.shape_store``).

Three rules, checked in this order for a candidate whose key has a query:

* ``session_id`` — the key with its session-id parameters removed (:data:`SESSION_PARAMS`,
  ``;jsessionid=`` too) names a page the crawl already holds or keeps this level, or the key
  itself is the session-less form of a session page held: the same page under another
  session, not a new one.
* ``parameter_walk`` — its *walk shape* (path, parameter names, values with every digit run
  masked: ``/cal?m=#&y=#``) already has pages at ``walk_levels`` (setting
  ``WAGGLE_TRAP_WALK_LEVELS``, default 5) earlier levels: a numeric or date-valued parameter that
  moves level after level (``?month=N+1`` linked from ``?month=N``, next/previous months,
  ``?page=N+1`` chains). Siblings found on one level (``?page=2..40`` on one index) do not count.
* ``path_walk`` — its *path-walk shape* (the key with every numeric path segment masked:
  ``https://h/cal/#/#/#/``; a segment is numeric when it is digit runs joined by ``-_.,``, with
  an optional file extension: ``2026``, ``2026-01-01``, ``7.html``) already has pages at
  ``path_walk_levels`` (setting ``WAGGLE_TRAP_PATH_WALK_LEVELS``, default 5) earlier levels: a
  date-path calendar (``/cal/2026/01/01/`` linking ``/cal/2026/01/02/`` forever), ``/page/N+1/``
  chains. The same level-counting as ``parameter_walk``: siblings on one level do not count.
* ``query_variants`` — its path (key without query) already holds ``query_variants`` distinct
  queries (setting ``WAGGLE_TRAP_QUERY_VARIANTS``, default 50): facet and sort combinations.

Seeds are not counted (they enter before any level report).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from urllib.parse import parse_qsl

SESSION_ID = "session_id"
PARAMETER_WALK = "parameter_walk"
QUERY_VARIANTS = "query_variants"
PATH_WALK = "path_walk"
REASONS = (SESSION_ID, PARAMETER_WALK, QUERY_VARIANTS, PATH_WALK)

WALK_LEVELS_DEFAULT = 5
PATH_WALK_LEVELS_DEFAULT = 5
QUERY_VARIANTS_DEFAULT = 50

#: Parameter names (lower-cased) that always carry a session, not a page (Heritrix's
#: canonicalization strips the same families; ``aspsessionid…`` by prefix).
SESSION_PARAMS = frozenset({"jsessionid", "phpsessid", "aspsessionid", "cfid", "cftoken", "zenid", "oscsid", "xtcsid"})
#: Generic names that are a session only with a token-like value (``?sid=`` is a story id on
#: some sites): at least 16 letters, digits, ``-`` or ``_``.
GENERIC_SESSION_PARAMS = frozenset({"sid", "sessionid", "session_id", "sessid", "s_id", "sess"})
_TOKEN = re.compile(r"[0-9A-Za-z_-]{16,}")
_PATH_SESSION = re.compile(r";jsessionid=[^/?;]*", re.IGNORECASE)
_DIGITS = re.compile(r"\d+")
#: A numeric path segment: digit runs joined by ``-_.,`` and an optional extension (``01.html``).
_NUMERIC_SEGMENT = re.compile(r"(?<=/)\d+(?:[-_.,]\d+)*(?:\.[A-Za-z][A-Za-z0-9]{0,4})?(?=/|$)")
_HAS_NUMERIC_SEGMENT = re.compile(r"/\d")  # cheap pre-check: some path segment starts with a digit


@dataclass(frozen=True)
class Shapes:
    """The shapes of one key (None where the rule does not apply): ``path`` (key without query,
    for a key with one), ``walk`` (digit-masked query, when a value holds a digit),
    ``sessionless`` (the key without session parameters, when it has some), ``path_walk`` (the
    key with its numeric path segments masked, when it has one)."""

    path: str | None
    walk: str | None
    sessionless: str | None
    path_walk: str | None = None


def path_walk_of(key: str) -> str | None:
    """The key (``scheme://authority/path[?query]``) with every numeric path segment's digit
    runs masked as ``#`` (``https://h/cal/2026/01/02/`` → ``https://h/cal/#/#/#/``), or None
    when no segment is numeric. The authority and query are kept as they are."""
    if _HAS_NUMERIC_SEGMENT.search(key) is None:  # no "/<digit>" anywhere: none in the path either
        return None
    head, sep, rest = key.partition("://")
    slash = rest.find("/")
    if slash < 0:
        return None
    cut = len(head) + len(sep) + slash  # where the path starts
    end = key.find("?", cut)
    path = key[cut:] if end < 0 else key[cut:end]
    if _HAS_NUMERIC_SEGMENT.search(path) is None:  # most keys: no segment starts with a digit
        return None
    masked = _NUMERIC_SEGMENT.sub(_mask, path)
    if masked == path:
        return None
    return key[:cut] + masked + ("" if end < 0 else key[end:])


def _mask(found: re.Match) -> str:
    return _DIGITS.sub("#", found.group(0))


def _is_session(pair: str) -> bool:
    """True when one raw ``name=value`` query pair carries a session id."""
    name, _, value = pair.partition("=")
    name = name.lower()
    if name in SESSION_PARAMS or name.startswith("aspsessionid"):
        return True
    return name in GENERIC_SESSION_PARAMS and _TOKEN.fullmatch(value) is not None


def shapes_of(key: str) -> Shapes:
    """:class:`Shapes` of a dedup key (``ledger.crawl.urls`` form, no fragment)."""
    base, mark, query = key.partition("?")
    stripped_base = _PATH_SESSION.sub("", base)
    path_walk = path_walk_of(stripped_base)
    if not mark:
        return Shapes(None, None, stripped_base if stripped_base != base else None, path_walk)
    raw = query.split("&")
    kept = [p for p in raw if not _is_session(p)]
    sessionless = None
    if stripped_base != base or len(kept) != len(raw):
        sessionless = stripped_base + ("?" + "&".join(kept) if kept else "")
    walk = None
    values = parse_qsl("&".join(kept), keep_blank_values=True)
    if any(_DIGITS.search(v) for _, v in values):
        walk = stripped_base + "?" + "&".join(sorted(f"{n}={_DIGITS.sub('#', v)}" for n, v in values))
    if path_walk is not None:  # the query as the key has it (a walk in both counts in both)
        path_walk += "?" + query
    return Shapes(stripped_base, walk, sessionless, path_walk)


@dataclass
class ShapeCounts:
    """What the crawl holds per shape (loaded before a level is planned, updated as candidates
    are kept): ``variants`` {path: distinct queries}, ``walk_depths`` {walk shape: levels},
    ``sessionless`` keys the crawl holds (pages without session ids, and session pages'
    sessionless form), ``path_walk_depths`` {path-walk shape: levels}."""

    next_depth: int
    walk_levels: int = WALK_LEVELS_DEFAULT
    query_variants: int = QUERY_VARIANTS_DEFAULT
    variants: dict[str, int] = field(default_factory=dict)
    walk_depths: dict[str, set[int]] = field(default_factory=dict)
    sessionless: set[str] = field(default_factory=set)
    path_walk_levels: int = PATH_WALK_LEVELS_DEFAULT
    path_walk_depths: dict[str, set[int]] = field(default_factory=dict)

    def reason(self, key: str, shapes: Shapes) -> str | None:
        """The rule that drops candidate ``key`` (of these shapes), or None. A key without a
        session id is dropped too when a session variant of it is held (same page)."""
        if (shapes.sessionless or key) in self.sessionless:
            return SESSION_ID
        if shapes.walk is not None and self.walk_levels > 0:
            earlier = self.walk_depths.get(shapes.walk, set()) - {self.next_depth}
            if len(earlier) >= self.walk_levels:
                return PARAMETER_WALK
        if shapes.path_walk is not None and self.path_walk_levels > 0:
            earlier = self.path_walk_depths.get(shapes.path_walk, set()) - {self.next_depth}
            if len(earlier) >= self.path_walk_levels:
                return PATH_WALK
        if shapes.path is not None and self.query_variants > 0:
            if self.variants.get(shapes.path, 0) >= self.query_variants:
                return QUERY_VARIANTS
        return None

    def keep(self, key: str, shapes: Shapes) -> None:
        """Count a kept candidate (``key``) at ``next_depth``."""
        self.sessionless.add(shapes.sessionless or key)
        if shapes.walk is not None:
            self.walk_depths.setdefault(shapes.walk, set()).add(self.next_depth)
        if shapes.path_walk is not None:
            self.path_walk_depths.setdefault(shapes.path_walk, set()).add(self.next_depth)
        if shapes.path is not None:
            self.variants[shapes.path] = self.variants.get(shapes.path, 0) + 1


def needs_counts(keys: Iterable[str]) -> bool:
    """True when any key has a query, a ``;jsessionid=`` or a numeric path segment (only those
    can meet a rule)."""
    return any("?" in k or ";" in k or path_walk_of(k) is not None for k in keys)


def counted(key: str) -> bool:
    """True when ``key`` can have a shape beyond itself (query, ``;``, numeric path segment)."""
    return "?" in key or ";" in key or path_walk_of(key) is not None
