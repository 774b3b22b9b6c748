"""Scope and link acceptance (reference/ledger.md §7.4).

Scope is fixed by the seeds: a candidate is in scope when it matches **any** seed —
``same-origin`` compares origins (scheme, host, port), ``same-host`` compares hosts (with a
non-default port). Subdomains are never in scope; a page at the edge (e.g. the target of a
redirect away from the seed's site, field case C5) never becomes a new centre.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from ledger.crawl.urls import InvalidUrl, ParsedUrl, has_userinfo, parse_http_url

SCOPES = ("same-origin", "same-host")
_WS = re.compile(r"\s+")


def in_scope(candidate: ParsedUrl, seeds: Sequence[ParsedUrl], scope: str) -> bool:
    """True when ``candidate`` shares the origin (same-origin) or host (same-host) of any seed.

    Raises ``ValueError`` for an unknown ``scope``.
    """
    if scope == "same-origin":
        return any(candidate.origin == s.origin for s in seeds)
    if scope == "same-host":
        return any(candidate.host == s.host for s in seeds)
    raise ValueError(f"unknown scope {scope!r}; use one of {', '.join(SCOPES)}")


def is_nofollow(rel: object) -> bool:
    """True when ``rel`` holds the whole word ``nofollow`` (case-insensitive; None → False)."""
    if not isinstance(rel, str):
        return False
    return "nofollow" in (word.lower() for word in _WS.split(rel.strip()) if word)


@dataclass
class AcceptedLinks:
    """Links that may enter the next level, first-seen order, plus why the others did not.

    ``drops`` counts by reason: ``invalid_url``, ``nofollow``, ``userinfo`` (``user:password@``
    in the URL: never crawled nor stored), ``out_of_scope``, ``duplicate``
    (the same dedup key twice within this call).
    """

    urls: list[ParsedUrl] = field(default_factory=list)
    drops: Counter[str] = field(default_factory=Counter)


class LinkFilter:
    """:func:`accept_links` in pieces: :meth:`accept` takes the links of one chunk and returns its
    accepted URLs, remembering the keys (in-call dedup) and href fates of earlier chunks, so
    chunks fed in order accept exactly what one call over all of them would (the level report
    scopes chunk *n + 1* while Postgres inserts chunk *n*). ``drops`` accumulates over chunks.
    Raises ``ValueError`` for an unknown ``scope``."""

    def __init__(self, seeds: Sequence[ParsedUrl], scope: str) -> None:
        if scope == "same-origin":
            self._centres, self._part = {s.origin for s in seeds}, "origin"
        elif scope == "same-host":
            self._centres, self._part = {s.host for s in seeds}, "host"
        else:
            raise ValueError(f"unknown scope {scope!r}; use one of {', '.join(SCOPES)}")
        self.drops: Counter[str] = Counter()
        self.accepted = 0  # URLs accepted so far
        self._seen: set[str] = set()
        # a page's navigation repeats on every page: an href string seen before has the same fate
        # (parse + scope are pure), so it is parsed once per report
        self._fate: dict[str, ParsedUrl | str] = {}

    def accept(self, links: Iterable[dict]) -> list[ParsedUrl]:
        """The accepted URLs of ``links``, first-seen order (see :func:`accept_links`)."""
        drops, seen, fate, centres, part = self.drops, self._seen, self._fate, self._centres, self._part
        urls: list[ParsedUrl] = []
        for link in links:
            href = link.get("href") if isinstance(link, dict) else None
            if not isinstance(href, str):
                drops["invalid_url"] += 1
                continue
            rel = link.get("rel")
            if rel and is_nofollow(rel):
                drops["nofollow"] += 1
                continue
            parsed = fate.get(href)
            if parsed is None:
                try:
                    parsed = parse_http_url(href)
                except InvalidUrl:
                    parsed = "invalid_url"
                else:
                    if has_userinfo(parsed):  # credentials are never crawled nor stored
                        parsed = "userinfo"
                    elif getattr(parsed, part) not in centres:
                        parsed = "out_of_scope"
                fate[href] = parsed
            if isinstance(parsed, str):
                drops[parsed] += 1
                continue
            if parsed.key in seen:
                drops["duplicate"] += 1
                continue
            seen.add(parsed.key)
            urls.append(parsed)
        self.accepted += len(urls)
        return urls

    def take(self, urls: Iterable[ParsedUrl], drops: Mapping[str, int]) -> list[ParsedUrl]:
        """:meth:`accept` for links scoped before: ``urls`` and ``drops`` are what a
        ``LinkFilter`` of the same seeds and scope accepted and dropped over one page's links
        alone (``ledger.crawl.report_early.Scoped``). Only the in-call dedup is left to do, so
        the result, ``drops`` and ``accepted`` are those of :meth:`accept` over those links."""
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


def accept_links(links: Iterable[dict], seeds: Sequence[ParsedUrl], scope: str) -> AcceptedLinks:
    """Filter ``links`` (``.links.json`` items ``{href, rel?}``, contracts.md §B.4).

    Drops nofollow links, unparseable / non-http(s) hrefs, URLs with userinfo, out-of-scope URLs and in-call
    duplicates (by dedup key, so fragment variants collapse). Items that are not objects with
    a string ``href`` count as ``invalid_url``. Raises ``ValueError`` for an unknown ``scope``.
    """
    screen = LinkFilter(seeds, scope)
    urls = screen.accept(links)
    return AcceptedLinks(urls, screen.drops)
