"""WACZ 1.1.1 packaging (contracts.md §B.5; peers.md §4.4).

Layout: ``archive/data.warc.gz`` (ZIP_STORED: already gzip'd, range-readable), ``indexes/index.cdx``
(plain-text CDXJ; named ``.cdx`` — not BrowserHive's ``index.cdxj`` — because pywb's
``wb-manager add --unpack-wacz`` only picks up ``*.cdx``/``*.cdx.gz`` and otherwise imports the
WACZ with "no indices", case C8; ReplayWeb.page reads a plain ``.cdx`` too), ``pages/pages.jsonl`` (header line + the page: url, ts = capture start, title),
optional ``behaviors/runtime.js``, ``behaviors/custom.jsonl`` (the behaviors' reports are in the
datapackage: decision 391),
``preload/scripts.jsonl``, then ``datapackage.json`` (profile ``data-package``,
``wacz_version`` 1.1.1, ``resources`` with ``sha256:<hex>`` and ``bytes`` for every other file,
compact JSON + newline: decision 321) and, only when signed, ``datapackage-digest.json`` (hash of
the datapackage bytes and ``signedData``, wacz-auth 0.1.0: :mod:`waggle_capture.signing`; contracts.md
§B.5 "only when signed", decision 391 — unsigned, the resources' hashes and the zip CRCs stand).
Text members are deflated; the WARC is stored.
"""

from __future__ import annotations

import hashlib
import json
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

WACZ_VERSION = "1.1.1"


@dataclass
class Member:
    path: str
    data: bytes
    stored: bool = False


def _jsonl(rows: list[dict[str, Any]]) -> bytes:
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows).encode("utf-8")


def pages_jsonl(task_id: str, url: str, ts: str, title: str | None, final_url: str | None = None) -> bytes:
    """Header line + the page line ``{id, url, finalUrl, ts, title?}``: ``url`` is the requested
    URL (replay opens it and follows the recorded 301/302 records to the final document);
    ``finalUrl`` is where the main document ended (waggle extension, issue 13 item 3; replay
    tools keep unknown page fields and ignore them)."""
    page: dict[str, Any] = {"id": task_id, "url": url, "finalUrl": final_url or url, "ts": ts}
    if title is not None:
        page["title"] = title
    return _jsonl([{"format": "json-pages-1.0", "id": "pages", "title": "All Pages"}, page])


def build_wacz(out: Path, *, warc: Path, cdxj: bytes, pages: bytes, extra: list[Member],
               datapackage: dict[str, Any],
               sign: Callable[[str, str], dict[str, Any]] | None = None) -> dict[str, Any]:
    """Write the WACZ to ``out``; returns the final datapackage dict (with ``resources``).

    ``sign(hash, created)``: returns the ``signedData`` of the datapackage.json hash
    (``sha256:<hex>``) dated its ``created``; called before the zip is written, so a signature
    that cannot be had (its exception propagates) leaves no WACZ."""
    warc_bytes = warc.read_bytes()
    members = [
        Member("archive/data.warc.gz", warc_bytes, stored=True),
        Member("indexes/index.cdx", cdxj),
        Member("pages/pages.jsonl", pages),
        *extra,
    ]
    resources = [{
        "name": Path(m.path).name, "path": m.path,
        "hash": "sha256:" + hashlib.sha256(m.data).hexdigest(), "bytes": len(m.data),
    } for m in members]
    package = {"profile": "data-package", "wacz_version": WACZ_VERSION, **datapackage, "resources": resources}
    # compact: the same JSON, ~120 B less per WACZ once deflated (decision 321)
    package_bytes = (json.dumps(package, separators=(",", ":"), ensure_ascii=False) + "\n").encode("utf-8")
    digest: dict[str, Any] | None = None
    if sign is not None:  # the digest file only with its signature (contracts.md §B.5; decision 391)
        digest = {"path": "datapackage.json", "hash": "sha256:" + hashlib.sha256(package_bytes).hexdigest()}
        digest["signedData"] = sign(digest["hash"], package["created"])
    with zipfile.ZipFile(out, "w") as z:
        for m in members:
            z.writestr(m.path, m.data,
                       compress_type=zipfile.ZIP_STORED if m.stored else zipfile.ZIP_DEFLATED)
        z.writestr("datapackage.json", package_bytes, compress_type=zipfile.ZIP_DEFLATED)
        if digest is not None:
            z.writestr("datapackage-digest.json", (json.dumps(digest, separators=(",", ":")) + "\n").encode(),
                       compress_type=zipfile.ZIP_DEFLATED)
    return package
