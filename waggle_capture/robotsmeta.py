"""What the page asked of robots: ``noarchive`` and ``nofollow`` (issue 24 item 7; extension
``robotsMeta``, docs/capture-server.md section "wishes").

Two sources, as search engines read them:

* ``<meta name="robots" content="…">`` and the agent-specific ``<meta name="waggle" …>`` (the
  product token of :mod:`ledger.useragent`); other agents' names (``googlebot``) do not apply;
* the main document's ``X-Robots-Tag`` response header(s), each either for every agent
  (``X-Robots-Tag: noarchive, nofollow``) or for one (``X-Robots-Tag: waggle: noarchive``;
  ``googlebot: noarchive`` does not apply to us).

Directives are comma-separated and case-insensitive; ``none`` means ``noindex, nofollow``.
:func:`wishes` returns the answer's ``robots`` object ``{noarchive, nofollow, meta?, header?}``
(``meta``/``header``: the applying texts, each ≤ 200 characters) or None when neither source
says anything to us.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterable
from typing import Any

from playwright.async_api import Page

from waggle_capture.recorder import Recorder
from ledger.useragent import PRODUCT_TOKEN

# The message of a capture that honoured noarchive (errorDetails.type "policy"; the flow shows it).
NOARCHIVE_MESSAGE = "the site asked not to archive it (noarchive)"

# Directives whose own syntax has a colon: not an agent prefix (Google's list).
_COLON_DIRECTIVES = frozenset({"unavailable_after", "max-snippet", "max-image-preview", "max-video-preview"})
_AGENT_PREFIX = re.compile(r"^\s*([A-Za-z0-9_.-]+)\s*:\s*(.*)$", re.S)
_TEXT_MAX = 200

# The main frame's <meta name content> pairs, in document order (after the DOM-quiet wait:
# a script may have added its robots meta).
META_JS = """() => Array.from(document.querySelectorAll("meta[name][content]"),
  (m) => [m.getAttribute("name"), m.getAttribute("content")])"""


def directives(text: str) -> set[str]:
    """The lower-cased directives of one comma-separated value (``none`` adds ``nofollow``)."""
    found = {part.strip().lower() for part in text.split(",") if part.strip()}
    if "none" in found:
        found |= {"noindex", "nofollow"}
    return found


def header_for_us(value: str, agent: str = PRODUCT_TOKEN) -> str | None:
    """The directives part of one ``X-Robots-Tag`` value when it applies to ``agent`` (no agent
    prefix, or that agent's), else None."""
    m = _AGENT_PREFIX.match(value)
    if m and m.group(1).lower() not in _COLON_DIRECTIVES:
        return m.group(2) if m.group(1).lower() == agent.lower() else None
    return value


def meta_for_us(pairs: Iterable[Any], agent: str = PRODUCT_TOKEN) -> list[str]:
    """The contents of the ``robots`` and ``<agent>`` meta elements among ``[name, content]`` pairs."""
    names = {"robots", agent.lower()}
    out = []
    for pair in pairs:
        if isinstance(pair, (list, tuple)) and len(pair) == 2 and all(isinstance(x, str) for x in pair):
            if pair[0].strip().lower() in names:
                out.append(pair[1])
    return out


def combine(meta: list[str], header: list[str]) -> dict[str, Any] | None:
    """The ``robots`` answer object from the applying meta contents and header values."""
    if not meta and not header:
        return None
    said: set[str] = set()
    for text in [*meta, *header]:
        said |= directives(text)
    out: dict[str, Any] = {"noarchive": "noarchive" in said, "nofollow": "nofollow" in said}
    if meta:
        out["meta"] = ", ".join(meta)[:_TEXT_MAX]
    if header:
        out["header"] = ", ".join(header)[:_TEXT_MAX]
    return out


def document_header(recorder: Recorder, doc_url: str, name: str = "x-robots-tag") -> list[str]:
    """The values of header ``name`` on the main document's recorded response (the last exchange
    of ``doc_url`` loaded as the page's document), in order."""
    for ex in reversed(recorder.exchanges):
        if ex.url == doc_url and ex.resource_type == "document" and ex.target == "page" and ex.status is not None:
            return [v for k, v in ex.resp_headers if k.lower() == name]
    return []


def header_wishes(resp_headers: Iterable[tuple[str, str]]) -> dict[str, Any] | None:
    """The ``robots`` object from response headers alone (a main document that is a file: a PDF
    says ``X-Robots-Tag: noarchive`` in its header, it has no meta)."""
    values = [v for k, v in resp_headers if k.lower() == "x-robots-tag"]
    return combine([], [v for v in (header_for_us(h) for h in values) if v is not None])


async def wishes(page: Page, recorder: Recorder, timeout_s: float) -> dict[str, Any] | None:
    """What the loaded page said to us (module doc); the meta elements are read from the page."""
    header = [v for v in (header_for_us(h) for h in document_header(recorder, page.url)) if v is not None]
    try:
        pairs = await asyncio.wait_for(page.evaluate(META_JS), timeout_s)
    except asyncio.TimeoutError:
        raise
    except Exception:  # noqa: BLE001 - a page navigating away: its header still counts
        pairs = []
    return combine(meta_for_us(pairs or []), header)
