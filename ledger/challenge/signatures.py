"""Match an HTTP answer against the bot-protection signatures of ``signatures.toml``.

Issue 29 item 5, docs/decisions/231-blocked-hosts.md. One data file lists each vendor's
challenge and block pages (Cloudflare, Akamai, Imperva/Incapsula, DataDome, HUMAN/PerimeterX,
AWS WAF, Sucuri, F5, Kasada); :func:`match` says which one an answer is, if any. Our capture
server calls it on every capture's main document; the result travels in the capture answer
(docs/capture-server.md, extension "blocked: challengeSignature").

Pure and synchronous: no I/O but reading the data file once (:func:`load`).
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

DATA_FILE = Path(__file__).with_name("signatures.toml")
DEFAULT_STATUSES = frozenset({403, 429, 503})
BODY_SCAN_BYTES = 256 * 1024  # a challenge page's markers sit in its first bytes; bounds the regex work


class SignatureFileError(ValueError):
    """The data file is not usable: names the signature and the field."""


@dataclass(frozen=True)
class Signature:
    """One page kind: ``vendor`` (shown to people), ``name`` (stable id), the statuses it may
    answer with, header rules ``(lower-case name, compiled pattern)`` that must all hold, body
    patterns and how many of them must be found (``body_min``)."""

    vendor: str
    name: str
    statuses: frozenset[int]
    headers: tuple[tuple[str, re.Pattern[str]], ...]
    body: tuple[re.Pattern[str], ...]
    body_min: int


@dataclass(frozen=True)
class Match:
    """A matched answer: ``vendor``, signature ``name`` and the answer's ``status``."""

    vendor: str
    name: str
    status: int

    def as_json(self) -> dict:
        """``{"vendor", "signature", "status"}`` (the capture answer's ``challenge`` object)."""
        return {"vendor": self.vendor, "signature": self.name, "status": self.status}


def parse(text: str) -> tuple[Signature, ...]:
    """The signatures of one TOML document (the data file's format). Raises
    :class:`SignatureFileError` on an unknown key, a bad pattern, a signature that could match
    anything (no header rule and ``body_min`` 0) or more ``body_min`` than body patterns."""
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise SignatureFileError(f"not TOML: {exc}") from None
    out: list[Signature] = []
    names: set[str] = set()
    for i, item in enumerate(doc.get("signature") or []):
        where = f"signature #{i + 1} ({item.get('name', '?')})"
        unknown = set(item) - {"vendor", "name", "statuses", "headers", "body", "body_min"}
        if unknown:
            raise SignatureFileError(f"{where}: unknown key(s) {', '.join(sorted(unknown))}")
        if not item.get("vendor") or not item.get("name"):
            raise SignatureFileError(f"{where}: vendor and name are required")
        if item["name"] in names:
            raise SignatureFileError(f"{where}: name used twice")
        names.add(item["name"])
        try:
            headers = tuple((str(h["name"]).lower(), re.compile(str(h.get("pattern", "")), re.I))
                            for h in item.get("headers") or [])
            body = tuple(re.compile(p, re.I) for p in item.get("body") or [])
        except (re.error, KeyError, TypeError) as exc:
            raise SignatureFileError(f"{where}: {exc}") from None
        body_min = int(item.get("body_min", 1 if body else 0))
        if body_min > len(body):
            raise SignatureFileError(f"{where}: body_min {body_min} > {len(body)} body pattern(s)")
        if not headers and body_min == 0:
            raise SignatureFileError(f"{where}: neither a header rule nor a body pattern is required")
        statuses = frozenset(int(s) for s in item.get("statuses") or DEFAULT_STATUSES)
        out.append(Signature(item["vendor"], item["name"], statuses, headers, body, body_min))
    if not out:
        raise SignatureFileError("no [[signature]] entries")
    return tuple(out)


@lru_cache(maxsize=1)
def load() -> tuple[Signature, ...]:
    """The signatures of :data:`DATA_FILE` (read and compiled once per process)."""
    return parse(DATA_FILE.read_text(encoding="utf-8"))


def _header_values(headers: Mapping[str, str] | Iterable[tuple[str, str]]) -> dict[str, list[str]]:
    pairs = headers.items() if isinstance(headers, Mapping) else headers
    values: dict[str, list[str]] = {}
    for name, value in pairs:
        values.setdefault(str(name).lower(), []).append(str(value))
    return values


def match(status: int, headers: Mapping[str, str] | Iterable[tuple[str, str]], body: bytes | str | None,
          signatures: tuple[Signature, ...] | None = None) -> Match | None:
    """The first signature (data-file order) that the answer ``status`` / ``headers`` (a mapping
    or ``(name, value)`` pairs, any case) / ``body`` (bytes or text; None = unread) matches,
    else None. Only the first :data:`BODY_SCAN_BYTES` of the body are read."""
    sigs = load() if signatures is None else signatures
    values = _header_values(headers)
    text: str | None = None
    for sig in sigs:
        if status not in sig.statuses:
            continue
        if not all(any(p.search(v) for v in values.get(name, ())) for name, p in sig.headers):
            continue
        if sig.body_min:
            if text is None:
                raw = body or b""
                text = (raw[:BODY_SCAN_BYTES].decode("utf-8", "replace") if isinstance(raw, bytes)
                        else raw[:BODY_SCAN_BYTES])
            if sum(1 for p in sig.body if p.search(text)) < sig.body_min:
                continue
        return Match(sig.vendor, sig.name, status)
    return None
