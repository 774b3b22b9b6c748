"""Scope and link acceptance (reference/ledger.md §7.4; issue 29 item 1, docs/decisions/171).

A crawl's scope is fixed when it is submitted: a scope type over its seeds, include and exclude
regular expressions, and ``extra_hops``. A candidate URL is **in scope** when the type says so
for any seed, or an include pattern matches its dedup key (the normalized URL); an exclude
pattern that matches it wins over both, and over extra hops. Types (:data:`SCOPES`):

* ``page``   – the seeds themselves (same dedup key) and nothing else;
* ``prefix`` – under a seed's path: the key starts with the seed's key up to the last ``/`` of
  its path (``https://a.example/docs/intro.html`` → ``https://a.example/docs/``);
* ``host``   – the same host as a seed (hostname plus a non-default port; any scheme);
* ``domain`` – the seed's registered domain and its subdomains (Public Suffix List, the
  ``publicsuffixlist`` package's bundled copy, never fetched); an IP address or a name with no
  registered domain (``localhost``) stands for itself; any scheme and port;
* ``origin`` – the same origin (scheme, host and port) as a seed: the default.

Today's names stay aliases: ``same-origin`` = ``origin``, ``same-host`` = ``host``.

``extra_hops`` N: a page out of scope linked from a page in scope is still taken, at one hop out
of scope; from it, pages out of scope up to N hops; a page whose hops reached N is captured but
its links are not expanded (``extra_hops`` drops). Pages in scope are 0 hops out.

Patterns are compiled with RE2 (``google-re2``: linear time in the URL, no backtracking), at
most :data:`MAX_PATTERNS` per list and :data:`MAX_PATTERN_LENGTH` characters each; matched with
``search`` (anywhere in the key; anchor with ``^``/``$``). A page at the edge (e.g. the target
of a redirect away from the seed's site, field case C5) never becomes a new centre.
"""

from __future__ import annotations

import ipaddress
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import re2

from ledger.crawl.urls import InvalidUrl, ParsedUrl, has_userinfo, parse_http_url

SCOPES = ("page", "prefix", "host", "domain", "origin")
ALIASES = {"same-origin": "origin", "same-host": "host"}
DEFAULT_SCOPE = "origin"
MAX_PATTERNS = 100
MAX_PATTERN_LENGTH = 1000
MAX_EXTRA_HOPS = 10
_WS = re.compile(r"\s+")
_OPTIONS = re2.Options()
_OPTIONS.log_errors = False  # an invalid pattern is the caller's 400, not a line on stderr


class InvalidPattern(ValueError):
    """An include/exclude pattern RE2 refuses (or too long/many); ``.field``, ``.pattern``."""

    def __init__(self, field_name: str, pattern: str, why: str):
        self.field, self.pattern, self.why = field_name, pattern, why
        super().__init__(f"{field_name} {self.reason()}")

    def reason(self) -> str:
        """The refusal without the field name: ``pattern "<pattern>" is not usable: <why>``."""
        shown = self.pattern if len(self.pattern) <= 200 else self.pattern[:200] + "…"
        return f'pattern "{shown}" is not usable: {self.why}'



def canonical(scope: str) -> str:
    """The scope type a name stands for (aliases resolved). Raises ``ValueError`` when unknown."""
    name = ALIASES.get(scope, scope)
    if name not in SCOPES:
        raise ValueError(f"unknown scope {scope!r}; use one of {', '.join(SCOPES)}"
                         f" (or {', '.join(ALIASES)})")
    return name


def compile_patterns(patterns: Sequence[str] | None, field_name: str) -> tuple[Any, ...]:
    """RE2-compiled ``patterns``; raises :class:`InvalidPattern` naming the first bad one (RE2's
    reason: syntax, a backreference or lookaround RE2 does not do, too large a program)."""
    patterns = list(patterns or ())
    if len(patterns) > MAX_PATTERNS:
        raise InvalidPattern(field_name, patterns[MAX_PATTERNS], f"at most {MAX_PATTERNS} patterns")
    return tuple(_compile(p, field_name) for p in patterns)


@lru_cache(maxsize=1024)
def _compiled(pattern: str) -> Any:
    return re2.compile(pattern, _OPTIONS)


def _compile(pattern: str, field_name: str) -> Any:
    if not isinstance(pattern, str) or not pattern:
        raise InvalidPattern(field_name, str(pattern), "a pattern is a non-empty string")
    if len(pattern) > MAX_PATTERN_LENGTH:
        raise InvalidPattern(field_name, pattern, f"longer than {MAX_PATTERN_LENGTH} characters")
    try:
        return _compiled(pattern)
    except UnicodeEncodeError:  # JSON may carry a lone surrogate; RE2 takes UTF-8 only
        raise InvalidPattern(field_name, pattern.encode("utf-8", "backslashreplace").decode(),
                             "not valid Unicode text (a lone surrogate)") from None
    except re2.error as exc:
        why = exc.args[0] if exc.args else "RE2 refused it"
        raise InvalidPattern(field_name, pattern,
                             why.decode("utf-8", "replace") if isinstance(why, bytes) else str(why)) from None


def hostname(host: str) -> str:
    """``host`` without its ``:port`` (``[::1]:8080`` → ``[::1]``)."""
    if host.startswith("["):
        return host[: host.index("]") + 1]
    return host.partition(":")[0]


@lru_cache(maxsize=1)
def _psl() -> Any:
    from publicsuffixlist import PublicSuffixList  # the package's bundled list; no network
    return PublicSuffixList()


def warm_up() -> None:
    """Load the Public Suffix List now (the ledger's start-up, in a worker thread), so no request
    pays for it; safe to call again."""
    _psl()


@lru_cache(maxsize=65536)
def registered_domain(name: str) -> str:
    """The registered domain of a hostname (``www.a.example.co.uk`` → ``example.co.uk``, by the
    Public Suffix List with its private section: ``a.github.io`` stays ``a.github.io``); the
    name itself for an IP address or a name with none (``localhost``, a public suffix)."""
    bare = name.strip("[]")
    try:
        ipaddress.ip_address(bare)
        return name
    except ValueError:
        pass
    return _psl().privatesuffix(name.rstrip(".")) or name


def prefix_of(seed: ParsedUrl) -> str:
    """The ``prefix`` scope of a seed: its dedup key without the query, up to the last ``/``."""
    base = seed.key.partition("?")[0]
    return base[: base.rindex("/") + 1]


@dataclass(frozen=True)
class Scope:
    """What a crawl takes. ``verdict(url)`` → ``"in"``, ``"out"`` or ``"excluded"``."""

    seeds: tuple[ParsedUrl, ...]
    kind: str = DEFAULT_SCOPE
    include: tuple[Any, ...] = ()
    exclude: tuple[Any, ...] = ()
    extra_hops: int = 0

    @classmethod
    def build(cls, seeds: Sequence[ParsedUrl], scope: str, include: Sequence[str] | None = None,
              exclude: Sequence[str] | None = None, extra_hops: int | None = 0) -> "Scope":
        """Raises ``ValueError`` (unknown scope) or :class:`InvalidPattern`."""
        return cls(tuple(seeds), canonical(scope), compile_patterns(include, "include"),
                   compile_patterns(exclude, "exclude"), int(extra_hops or 0))

    @classmethod
    def of_crawl(cls, crawl: Mapping[str, Any], seeds: Sequence[ParsedUrl]) -> "Scope":
        """The scope stored on a crawl row (columns ``scope``, ``scope_include``,
        ``scope_exclude``, ``extra_hops``; migration 240)."""
        return cls.build(seeds, crawl["scope"], crawl.get("scope_include"), crawl.get("scope_exclude"),
                         crawl.get("extra_hops"))

    def __post_init__(self) -> None:
        kind = self.kind
        if kind == "origin":
            centres, part = {s.origin for s in self.seeds}, "origin"
        elif kind == "host":
            centres, part = {s.host for s in self.seeds}, "host"
        elif kind == "page":
            centres, part = {s.key for s in self.seeds}, "key"
        elif kind == "domain":
            centres, part = {registered_domain(hostname(s.host)) for s in self.seeds}, "domain"
        elif kind == "prefix":
            centres, part = tuple(sorted({prefix_of(s) for s in self.seeds})), "prefix"
        else:
            raise ValueError(f"unknown scope {kind!r}")
        object.__setattr__(self, "_centres", centres)
        object.__setattr__(self, "_part", part)

    def by_type(self, p: ParsedUrl) -> bool:
        """True when the scope type alone takes ``p``."""
        part, centres = self._part, self._centres  # type: ignore[attr-defined]
        if part == "domain":
            return registered_domain(hostname(p.host)) in centres
        if part == "prefix":
            return p.key.startswith(centres)
        return getattr(p, part) in centres

    def verdict(self, p: ParsedUrl) -> str:
        key = p.key
        for rx in self.exclude:
            if rx.search(key):
                return "excluded"
        if self.by_type(p):
            return "in"
        for rx in self.include:
            if rx.search(key):
                return "in"
        return "out"


def in_scope(candidate: ParsedUrl, seeds: Sequence[ParsedUrl], scope: str) -> bool:
    """True when the scope type ``scope`` (or an alias) takes ``candidate`` for any seed.

    Raises ``ValueError`` for an unknown ``scope``.
    """
    return Scope.build(seeds, scope).by_type(candidate)


def is_nofollow(rel: object) -> bool:
    """True when ``rel`` holds the whole word ``nofollow`` (case-insensitive; None → False)."""
    if not isinstance(rel, str):
        return False
    return "nofollow" in (word.lower() for word in _WS.split(rel.strip()) if word)


@dataclass
class AcceptedLinks:
    """Links that may enter the next level, first-seen order, plus why the others did not.

    ``drops`` counts by reason: ``invalid_url``, ``nofollow``, ``userinfo`` (``user:password@``
    in the URL: never crawled nor stored), ``out_of_scope``, ``excluded`` (an exclude pattern),
    ``extra_hops`` (links of a page already ``extra_hops`` out of scope: not expanded),
    ``duplicate`` (the same dedup key twice within this call).
    """

    urls: list[ParsedUrl] = field(default_factory=list)
    drops: Counter[str] = field(default_factory=Counter)


class LinkFilter:
    """:func:`accept_links` in pieces: :meth:`accept` takes the links of one chunk and returns its
    accepted URLs, remembering the keys (in-call dedup) and href fates of earlier chunks, so
    chunks fed in order accept exactly what one call over all of them would (the level report
    scopes chunk *n + 1* while Postgres inserts chunk *n*). ``drops`` accumulates over chunks.
    ``scope``: a :class:`Scope`, or a scope name (with ``seeds``' type only).
    ``outside``: ``{key: hops out of scope}`` of the accepted URLs that are out of scope (extra
    hops; the least hops they were found at). Raises ``ValueError`` for an unknown ``scope``."""

    def __init__(self, seeds: Sequence[ParsedUrl], scope: "str | Scope") -> None:
        self.scope = scope if isinstance(scope, Scope) else Scope.build(seeds, scope)
        self.drops: Counter[str] = Counter()
        self.accepted = 0  # URLs accepted so far
        self.outside: dict[str, int] = {}
        self._seen: set[str] = set()
        # a page's navigation repeats on every page: an href string seen before has the same fate
        # (parse + scope are pure), so it is parsed once per report
        self._fate: dict[str, tuple[ParsedUrl, str] | str] = {}

    def accept(self, links: Iterable[dict], hops: int = 0) -> list[ParsedUrl]:
        """The accepted URLs of ``links``, first-seen order (see :func:`accept_links`);
        ``hops``: how far out of scope the page they were found on is (0: in scope)."""
        drops, seen, fate, verdict = self.drops, self._seen, self._fate, self.scope.verdict
        extra = self.scope.extra_hops
        urls: list[ParsedUrl] = []
        if hops and hops >= extra:  # captured at the last extra hop: its links are not expanded
            n = sum(1 for _ in links)
            if n:
                drops["extra_hops"] += n
            return urls
        outside = self.outside
        for link in links:
            href = link.get("href") if isinstance(link, dict) else None
            if not isinstance(href, str):
                drops["invalid_url"] += 1
                continue
            rel = link.get("rel")
            if rel and is_nofollow(rel):
                drops["nofollow"] += 1
                continue
            got = fate.get(href)
            if got is None:
                try:
                    parsed = parse_http_url(href)
                except InvalidUrl:
                    got = "invalid_url"
                else:
                    if has_userinfo(parsed):  # credentials are never crawled nor stored
                        got = "userinfo"
                    else:
                        v = verdict(parsed)
                        got = "excluded" if v == "excluded" else (parsed, v)
                fate[href] = got
            if isinstance(got, str):
                drops[got] += 1
                continue
            parsed, v = got
            if v == "out":
                if hops + 1 > extra:
                    drops["out_of_scope"] += 1
                    continue
                if parsed.key in seen:
                    if parsed.key in outside and outside[parsed.key] > hops + 1:
                        outside[parsed.key] = hops + 1
                    drops["duplicate"] += 1
                    continue
                outside[parsed.key] = hops + 1
            elif parsed.key in seen:
                drops["duplicate"] += 1
                continue
            seen.add(parsed.key)
            urls.append(parsed)
        self.accepted += len(urls)
        return urls

    def take(self, urls: Iterable[ParsedUrl], drops: Mapping[str, int]) -> list[ParsedUrl]:
        """:meth:`accept` for links scoped before: ``urls`` and ``drops`` are what a
        ``LinkFilter`` of the same seeds and scope accepted and dropped over one page's links
        alone (``ledger.crawl.report_early.Scoped``; only for crawls without extra hops). Only
        the in-call dedup is left to do, so the result, ``drops`` and ``accepted`` are those of
        :meth:`accept` over those links."""
        self.drops.update(drops)
        seen = self._seen
        out: list[ParsedUrl] = []
        for p in urls:
            if p.key in seen:
                self.drops["duplicate"] += 1
                continue
            seen.add(p.key)
            out.append(p)
        self.accepted += len(out)
        return out


def accept_links(links: Iterable[dict], seeds: Sequence[ParsedUrl], scope: "str | Scope",
                 hops: int = 0) -> AcceptedLinks:
    """Filter ``links`` (``.links.json`` items ``{href, rel?}``, contracts.md §B.4) found on one
    page ``hops`` out of scope.

    Drops nofollow links, unparseable / non-http(s) hrefs, URLs with userinfo, excluded and
    out-of-scope URLs (beyond extra hops) and in-call duplicates (by dedup key, so fragment
    variants collapse). Items that are not objects with a string ``href`` count as
    ``invalid_url``. Raises ``ValueError`` for an unknown ``scope``.
    """
    screen = LinkFilter(seeds, scope)
    urls = screen.accept(links, hops)
    return AcceptedLinks(urls, screen.drops)
