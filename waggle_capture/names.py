"""Artifact names ``{taskId}_{correlationId}[_{labels}].{ext}`` (contracts.md §B.1).

The correlationId slot always exists (``<taskId>_.png``, ``<taskId>__<labels>.png``). Every
byte outside ``A-Z a-z 0-9 . ~`` (and ``-`` in the correlationId) is ``%XX``-escaped from its
UTF-8 form, so ``_`` only ever separates slots; labels are joined with ``-`` (a ``-`` inside a
label is escaped as ``%2D``). The ``.result.json`` name may be at most 255 UTF-8 bytes.
"""

from __future__ import annotations

from urllib.parse import quote

EXTENSIONS = {
    "png": ("png", "image/png"),
    "webp": ("webp", "image/webp"),
    "html": ("html", "text/html"),
    "links": ("links.json", "application/json"),
    "mhtml": ("mhtml", "multipart/related"),
    "wacz": ("wacz", "application/wacz+zip"),
    "manifest": ("result.json", "application/json"),
}
MAX_NAME_BYTES = 255


def _esc(text: str, safe: str) -> str:
    # quote() leaves "_.-~" and alphanumerics alone; "_" must never pass through.
    return quote(text, safe=safe).replace("_", "%5F")


def clean_labels(labels: list[str] | None) -> list[str]:
    """Labels trimmed, empties dropped (§A.3)."""
    return [s.strip() for s in (labels or []) if s.strip()]


def stem(task_id: str, correlation_id: str | None, labels: list[str]) -> str:
    """``{taskId}_{correlationId}[_{labels}]`` with separators escaped."""
    out = f"{task_id}_{_esc(correlation_id or '', '-')}"
    if labels:
        out += "_" + "-".join(_esc(label, "").replace("-", "%2D") for label in labels)
    return out


def file_name(stem_: str, fmt: str) -> str:
    """File name of format ``fmt`` (a key of :data:`EXTENSIONS`)."""
    return f"{stem_}.{EXTENSIONS[fmt][0]}"


def name_too_long(correlation_id: str | None, labels: list[str]) -> bool:
    """True when the ``.result.json`` name would exceed 255 UTF-8 bytes (→ 400)."""
    sample = file_name(stem("00000000-0000-4000-8000-000000000000", correlation_id, labels), "manifest")
    return len(sample.encode("utf-8")) > MAX_NAME_BYTES
