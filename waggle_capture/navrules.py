"""Extension ``navigationRules`` (docs/capture-server.md "redirects", decision 105): a main-frame
navigation the crawl may not make is never requested.

A capture's main document may leave the URL the crawl checked: an HTTP redirect hop, a script's
``location.href = …`` or a meta refresh. The flow checked only the first URL against the host's
robots.txt and the crawl's exclude patterns; the request's ``navigationRules`` carry both, and
:class:`NavigationRules` decides every later main-frame request with the flow's own matchers:

* ``robotsTxt``: the normal form of the page's host's robots.txt (``f.waggle.robots.RobotsRules
  .text``), matched by the same :class:`f.waggle.robots.RobotsRules` (protego 0.7.0, our product
  token's group) — it applies to URLs of the page URL's origin only: another origin's robots.txt
  is not known here and is not fetched inside a capture (the flow checks the final URL's host
  next level, through the ledger's scope and robots cache);
* ``exclude``: the crawl's exclude patterns, RE2 searched in the URL's dedup key exactly as the
  ledger's scope does (``ledger.crawl.scope``; ``ledger.crawl.urls.parse_http_url(url).key``).

The main-frame document requests pause at the CDP ``Fetch`` request stage (every redirect hop is
such a request, before it leaves: :mod:`.files`), where a refused one is failed with
``BlockedByClient``; the capture then fails ``permanent`` with :meth:`NavigationRules.message`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from f.waggle.robots import RobotsRules
from ledger.crawl.scope import InvalidPattern, compile_patterns
from ledger.crawl.urls import InvalidUrl, parse_http_url


def _origin(url: str) -> tuple[str, str, int | None]:
    p = urlsplit(url)
    port = p.port or (443 if p.scheme == "https" else 80 if p.scheme == "http" else None)
    return p.scheme.lower(), (p.hostname or "").lower(), port


@dataclass
class Refusal:
    """A navigation refused: its ``url`` and ``why`` (``robots.txt disallows …`` / ``the crawl
    excludes …``)."""

    url: str
    why: str


class NavigationRules:
    """The rules of one capture: ``page_url`` (its origin scopes ``robots_txt``), ``robots_txt``
    (normal form or None), ``exclude`` (RE2 patterns). Raises :class:`ValueError` for a pattern
    RE2 refuses (validation answers 400 before this)."""

    def __init__(self, page_url: str, robots_txt: str | None, exclude: list[str] | None):
        self.origin = _origin(page_url)
        self.robots = RobotsRules(robots_txt) if robots_txt is not None else None
        self.patterns = list(exclude or [])
        self.exclude = compile_patterns(self.patterns, "navigationRules.exclude")
        self.refused: Refusal | None = None  # the first navigation refused

    @classmethod
    def of(cls, req: dict[str, Any]) -> NavigationRules | None:
        """The rules of request ``req``, or None when it has none."""
        rules = req.get("navigationRules")
        if not isinstance(rules, dict) or (rules.get("robotsTxt") is None and not rules.get("exclude")):
            return None
        return cls(req["url"].strip(), rules.get("robotsTxt"), rules.get("exclude"))

    def check(self, url: str) -> Refusal | None:
        """Why a main-frame navigation to ``url`` may not be made, or None when it may."""
        if self.robots is not None and _origin(url) == self.origin and not self.robots.allowed(url):
            source = self.robots.rule_for(url)
            line = f": {source.describe()}" if source is not None else ""
            return Refusal(url, f"robots.txt disallows it{line}")
        try:
            key = parse_http_url(url).key
        except InvalidUrl:
            return None  # not http(s): Chromium's own rules apply
        for pattern, rx in zip(self.patterns, self.exclude):
            if rx.search(key):
                return Refusal(url, f"the crawl excludes it (pattern {pattern!r})")
        return None

    def refuse(self, url: str) -> bool:
        """:meth:`check` that remembers the first refusal (:attr:`refused`); True when refused."""
        found = self.check(url)
        if found is not None and self.refused is None:
            self.refused = found
        return found is not None

    def message(self) -> str:
        """The capture's failure message for :attr:`refused` (classed ``permanent`` by the flow:
        it names robots.txt, or says ``navigation rules``)."""
        r = self.refused
        assert r is not None
        return (f"the page navigated to {r.url}, which was not requested: {r.why}"
                f" (navigation rules; nothing was archived)")[:500]


def validate_patterns(patterns: list[str]) -> str | None:
    """The reason an exclude list is unusable, or None (for the request's 400)."""
    try:
        compile_patterns(patterns, "navigationRules.exclude")
    except InvalidPattern as e:
        return str(e)
    return None
