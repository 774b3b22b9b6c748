"""URL parsing for crawls: WHATWG (ada-url), http(s) only (reference/ledger.md §7.4).

Three forms of one URL:
* ``url``  – what is stored and requested: the text as discovered (trimmed) minus the fragment;
* ``key``  – the dedup key: the WHATWG-serialized URL without the fragment (so ``#a`` / ``#b``
  variants, ``HTTP://Example.COM:80/`` and ``http://example.com/`` are one page), its path and
  query then normalized per RFC 3986 §6.2.2 (:func:`normalize_percent`): percent-encoded
  unreserved characters decoded (``%7euser`` = ``%7Euser`` = ``~user``), the hex of every other
  percent-encoding upper-cased (``%2f`` = ``%2F``; reserved ones such as ``%2F %3F %26`` stay
  encoded: decoding them would change what the server sees), a stray ``%`` written ``%25``;
* ``host`` – hostname plus ``:port`` when the port is not the scheme's default;
  ``origin`` – scheme, host and port.

A URL with userinfo (``user:password@``) parses, but is never crawled or archived
(:func:`has_userinfo`): seeds and saved targets with it are refused, discovered links with it
dropped (``userinfo``). An empty query (``page?``) stays distinct from none (``page``): WHATWG
keeps it, and a server may answer the two differently.
"""

from __future__ import annotations

import re
from typing import NamedTuple

from ada_url.ada_adapter import ffi as _ffi, lib as _ada


class InvalidUrl(ValueError):
    """Raised for anything that is not an absolute http(s) URL; ``.raw`` is the input."""

    def __init__(self, raw: object, why: str = "not an http(s) URL"):
        self.raw = raw
        super().__init__(f"{why}: {raw!r}")


class ParsedUrl(NamedTuple):
    """One parsed URL (immutable; a tuple because one is built per discovered link)."""

    url: str
    key: str
    host: str
    origin: str


def _href(text: str) -> str | None:
    """ada-url's WHATWG serialization of ``text`` (None when it does not parse). The same as
    ``ada_url.normalize_url`` through the package's C binding directly: one link costs ~2.5×
    less, which matters at 100,000 links per level report."""
    try:
        data = text.encode()
    except UnicodeEncodeError:  # lone surrogates
        return None
    url = _ada.ada_parse(data, len(data))
    try:
        if not _ada.ada_is_valid(url):
            return None
        href = _ada.ada_get_href(url)
        return _ffi.unpack(href.data, href.length).decode() if href.length else ""
    finally:
        _ada.ada_free(url)


UNRESERVED = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")  # RFC 3986 §2.3
_PERCENT = re.compile(r"%(?:([0-9A-Fa-f]{2})|)")


def _percent(match: re.Match) -> str:
    hexes = match.group(1)
    if hexes is None:
        return "%25"  # a '%' not followed by two hex digits stands for itself
    char = chr(int(hexes, 16))
    return char if char in UNRESERVED else "%" + hexes.upper()


def normalize_percent(text: str) -> str:
    """``text`` with RFC 3986 §6.2.2.1–2 percent-encoding normalization: ``%XX`` of an unreserved
    character (ALPHA / DIGIT / ``-._~``) decoded, every other ``%XX`` upper-cased, a stray ``%``
    encoded as ``%25``. Idempotent; never decodes a reserved or non-ASCII octet. The same rule
    in SQL is ``waggle_url_key_060`` (migration 060, which recomputed the stored keys)."""
    return _PERCENT.sub(_percent, text) if "%" in text else text


USERINFO_REFUSED = "credentials in a URL are not crawled or archived; remove user:password@"


def has_userinfo(parsed: ParsedUrl) -> bool:
    """True when ``parsed`` carries a username or password (``http://user:pw@host/``). WHATWG
    percent-encodes ``@`` inside userinfo, so an ``@`` in the serialized authority is the
    separator."""
    return "@" in parsed.key[len(parsed.origin.partition("://")[0]) + 3:].partition("/")[0]


_HTTP = frozenset(("http", "https"))
_parsed = ParsedUrl._make  # positional: a NamedTuple built from keywords costs more


def parse_http_url(raw: object) -> ParsedUrl:
    """Parse ``raw`` as an absolute http(s) URL.

    Raises :class:`InvalidUrl` for non-strings, empty, relative, or other schemes
    (``mailto:``, ``javascript:``, ``tel:``, ``data:``, ``ftp:`` …).

    One ada-url parse yields the WHATWG serialization (``href``); key, host and origin are cut
    from it. For http(s) that is exact: the serializer always writes ``scheme://[userinfo@]host
    [:port]/path[?query][#fragment]``, and ``/``, ``@`` and ``#`` occur elsewhere only
    percent-encoded (a test compares every part with ada-url's own getters).
    """
    if not isinstance(raw, str):
        raise InvalidUrl(raw)
    text = raw.strip()
    if not text:
        raise InvalidUrl(raw, "empty URL")
    href = _href(text)
    if href is None:
        raise InvalidUrl(raw)
    # plain string operations, each skipped when it cannot change anything: at 100,000 links
    # per level report this part cost twice the parse itself (issue 14)
    scheme, sep, rest = href.partition("://")
    if not sep or scheme not in _HTTP:
        raise InvalidUrl(raw)
    authority = rest.partition("/")[0]
    host = authority.rpartition("@")[2] if "@" in authority else authority
    if not host or host[0] == ":":
        raise InvalidUrl(raw)
    requested = text.partition("#")[0] if "#" in text else text
    key = href.partition("#")[0] if "#" in href else href
    if "%" in key:  # authority is WHATWG-normalized already; path and query start at its end
        cut = len(scheme) + 3 + len(authority)
        key = key[:cut] + normalize_percent(key[cut:])
    return _parsed((requested, key, host, scheme + "://" + host))
