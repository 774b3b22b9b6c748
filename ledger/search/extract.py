"""A captured page's searchable text: title, headings, visible body text and language.

Sources: the HTML a page's WARC ``response`` record holds (selectolax/Lexbor, the parser a
browser-grade HTML5 tokenizer gives), or a PDF's text (pypdf). Language: ``<html lang>``
(its primary subtag), else detected from the text (py3langid, model shipped in the package),
else None. Text is capped (:data:`BODY_MAX_CHARS`): Postgres refuses a tsvector over 1 MB and
the first 200,000 characters of a page are what a person searches for.
"""

from __future__ import annotations

import io
import re
from dataclasses import dataclass

from selectolax.lexbor import LexborHTMLParser

BODY_MAX_CHARS = 200_000
TITLE_MAX_CHARS = 1_000
HEADINGS_MAX_CHARS = 20_000
DETECT_SAMPLE_CHARS = 2_000  # py3langid on 2,000 characters: as sure as on the whole page, ~10× cheaper
PDF_MAX_PAGES = 200
_INVISIBLE = "script, style, noscript, template, svg, head, iframe, object"
_SPACES = re.compile(r"\s+")
_LANG = re.compile(r"^[A-Za-z]{2,3}(?:[-_].*)?$")
# NUL and lone surrogates Postgres cannot store; other controls (\x02/\x03 mark snippet hits)
_UNSTORABLE = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\ud800-\udfff]")


@dataclass(frozen=True)
class PageText:
    """``title``, ``headings`` (h1–h6, one per line), ``body`` (visible text, spaces folded),
    ``lang`` (ISO 639 primary code, lower case, or None) and ``lang_source``
    (``html`` | ``detected`` | None)."""

    title: str
    headings: str
    body: str
    lang: str | None
    lang_source: str | None


def _clean(text: str, limit: int) -> str:
    return _UNSTORABLE.sub(" ", _SPACES.sub(" ", text)).strip()[:limit]


def primary_subtag(value: str | None) -> str | None:
    """``"en-GB"`` → ``"en"``; None for anything that is not a language tag."""
    if not value:
        return None
    value = value.strip()
    if not _LANG.match(value):
        return None
    return re.split(r"[-_]", value, maxsplit=1)[0].lower()


def detect_language(text: str) -> str | None:
    """py3langid's guess for ``text`` (its first :data:`DETECT_SAMPLE_CHARS`), or None when there
    are fewer than 20 letters to go on."""
    sample = text[:DETECT_SAMPLE_CHARS]
    if sum(c.isalpha() for c in sample) < 20:
        return None
    import py3langid  # loads its model once, on first use

    lang, _score = py3langid.classify(sample)
    return lang or None


def _with_language(title: str, headings: str, body: str, declared: str | None) -> PageText:
    if declared:
        return PageText(title, headings, body, declared, "html")
    detected = detect_language(f"{title}\n{body}")
    return PageText(title, headings, body, detected, "detected" if detected else None)


def from_html(data: bytes | str, encoding: str | None = None) -> PageText:
    """Text of an HTML document (bytes decoded with ``encoding``, else UTF-8 with replacement)."""
    if isinstance(data, bytes):
        try:
            data = data.decode(encoding or "utf-8", errors="replace")
        except LookupError:  # an unknown charset name in Content-Type
            data = data.decode("utf-8", errors="replace")
    tree = LexborHTMLParser(data)
    html = tree.css_first("html")
    declared = primary_subtag(html.attributes.get("lang") if html is not None else None)
    title_node = tree.css_first("title")
    title = _clean(title_node.text(deep=True) if title_node is not None else "", TITLE_MAX_CHARS)
    headings = "\n".join(
        t for t in (_clean(h.text(deep=True, separator=" "), 1000) for h in tree.css("h1, h2, h3, h4, h5, h6")) if t
    )[:HEADINGS_MAX_CHARS]
    body_node = tree.body
    if body_node is not None:
        for node in body_node.css(_INVISIBLE):
            node.decompose()
        body = _clean(body_node.text(deep=True, separator=" "), BODY_MAX_CHARS)
    else:
        body = ""
    return _with_language(title, headings, body, declared)


def from_pdf(data: bytes) -> PageText:
    """Text of a PDF (pypdf; at most :data:`PDF_MAX_PAGES` pages); title from its metadata.
    Raises ``ValueError`` when the bytes are not a readable PDF."""
    from pypdf import PdfReader
    from pypdf.errors import PdfReadError

    try:
        reader = PdfReader(io.BytesIO(data))
        meta = reader.metadata
        title = _clean(str(meta.title) if meta is not None and meta.title else "", TITLE_MAX_CHARS)
        parts: list[str] = []
        size = 0
        for page in reader.pages[:PDF_MAX_PAGES]:
            text = page.extract_text() or ""
            parts.append(text)
            size += len(text)
            if size >= BODY_MAX_CHARS:
                break
    except (PdfReadError, ValueError, KeyError, TypeError, AttributeError, IndexError, RecursionError) as exc:
        raise ValueError(f"not a readable PDF: {str(exc)[:200]}") from exc
    return _with_language(title, "", _clean(" ".join(parts), BODY_MAX_CHARS), None)
