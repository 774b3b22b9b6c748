"""URL parsing for crawls: WHATWG (ada-url), http(s) only (reference/ledger.md §7.4).

Three forms of one URL:
* ``url``  – what is stored and requested: the text as discovered (trimmed) minus the fragment;
* ``key``  – the dedup key: the WHATWG-serialized URL without the fragment (so ``#a`` / ``#b``
  variants, ``HTTP://Example.COM:80/`` and ``http://example.com/`` are one page);
* ``host`` – hostname plus ``:port`` when the port is not the scheme's default;
  ``origin`` – scheme, host and port.
"""

from __future__ import annotations

from dataclasses import dataclass

import ada_url


class InvalidUrl(ValueError):
    """Raised for anything that is not an absolute http(s) URL; ``.raw`` is the input."""

    def __init__(self, raw: object, why: str = "not an http(s) URL"):
        self.raw = raw
        super().__init__(f"{why}: {raw!r}")


@dataclass(frozen=True)
class ParsedUrl:
    url: str
    key: str
    host: str
    origin: str


def parse_http_url(raw: object) -> ParsedUrl:
    """Parse ``raw`` as an absolute http(s) URL.

    Raises :class:`InvalidUrl` for non-strings, empty, relative, or other schemes
    (``mailto:``, ``javascript:``, ``tel:``, ``data:``, ``ftp:`` …).
    """
    if not isinstance(raw, str):
        raise InvalidUrl(raw)
    text = raw.strip()
    if not text:
        raise InvalidUrl(raw, "empty URL")
    try:
        parsed = ada_url.URL(text)
    except ValueError:
        raise InvalidUrl(raw) from None
    if parsed.protocol not in ("http:", "https:") or not parsed.hostname:
        raise InvalidUrl(raw)
    requested = text.split("#", 1)[0]
    key = parsed.href
    if parsed.hash or key.endswith("#"):
        key = key.split("#", 1)[0]
    return ParsedUrl(url=requested, key=key, host=parsed.host, origin=parsed.origin)
