"""Revisit records (waggle extension ``revisit``, docs/capture-server.md; decision 181).

At packaging time the capture's responses are digested as the WARC writes them (sha256, RFC 4648
base32 with padding: :func:`payload_digest`), and the ledger named in the request's ``revisit``
member (``{"url": <lookup URL>, "token": <bearer>}``) is asked **once** which of them the
crawl's organization already holds (``POST url {"digests": [...]}`` → ``{"held": {digest:
{"uri", "date", "container"?}}}``). A held one is written as a WARC/1.1 ``revisit`` record (profile
identical-payload-digest, ``WARC-Refers-To-Target-URI``/``-Date``, ``WARC-Refers-To-Container``
when the ledger named the original's WACZ — decision 322 —, its HTTP headers, no body).

Within one crawl (extension ``recrawl``, decision 321): the lookup also names each
:func:`skippable` sub-resource as ``(url, digest)`` and each behavior source as
``(urn:behavior:<id>, sha256:<hex>)``; a pair an earlier capture of the same crawl already wrote
(``written``) is not written again — no response, no revisit, no request record — as Browsertrix
does within a crawl: replay finds it by URL in the crawl's collection. What was left out is
listed in the datapackage (``revisits.sameCrawl``) by URL, for provenance (decision 391); a
behavior source or the behavior runtime the crawl stored is named by its sha256 only.

Never lose data: any failure of the lookup (refused, timeout, bad answer) stores every body,
and says so in the datapackage (``browserhive:capture.revisits.lookup``). Bodies under
:data:`MIN_BYTES` are always stored (a revisit record's extra WARC headers cost about as much),
and so are cut bodies (their digest is of a prefix) and withheld or failed exchanges.
"""

from __future__ import annotations

import base64
import hashlib
import logging
from dataclasses import dataclass, field
from typing import Any

import httpx

from waggle_capture.behaviors import RUNTIME_JS
from waggle_capture.recorder import Exchange

log = logging.getLogger("waggle_capture")

MIN_BYTES = 1024
URI_MAX = 2000  # a longer URL is never left out (the ledger does not index it)
PAIRS_MAX = 5000  # the route's bound; a page with more stores the rest
LOOKUP_TIMEOUT_S = 5.0  # the capture waits at most this long; past it every body is stored


def payload_digest(body: bytes) -> str:
    """``sha256:`` + base32 (padded) of ``body``: the WARC-Payload-Digest warc.py writes."""
    return "sha256:" + base64.b32encode(hashlib.sha256(body).digest()).decode()


def eligible(ex: Exchange) -> bool:
    """Whether ``ex`` may become a revisit: a response archived with its whole body ≥ MIN_BYTES."""
    return (ex.status is not None and ex.withheld not in ("no-archive", "deny") and not ex.truncated
            and not ex.incomplete and len(ex.body or b"") >= MIN_BYTES)


def skippable(ex: Exchange) -> bool:
    """Whether ``ex`` may be left out when the crawl already wrote its URL and payload: a GET
    sub-resource answered 200 with its whole body — never a document of the main frame (the
    page's own capture always holds its main document and redirects)."""
    return (ex.method == "GET" and ex.status == 200 and ex.body is not None and ex.withheld is None
            and not ex.truncated and not ex.incomplete
            and not (ex.resource_type == "document" and ex.target == "page"))


def behavior_uri(behavior_id: str) -> str:
    """The name a behavior source goes by in the crawl's written pairs."""
    return f"urn:behavior:{behavior_id}"


RUNTIME_URI = "urn:behaviors:runtime.js"  # the behavior host object (behaviors/runtime.js)


def source_digest(source: str) -> str:
    """``sha256:<hex>`` of a behavior source (UTF-8), as datapackage resources are hashed."""
    return "sha256:" + hashlib.sha256(source.encode("utf-8")).hexdigest()


@dataclass
class Revisits:
    """The lookup's outcome for one capture: ``held`` digest → ``{"uri", "date"}``; ``lookup``
    ``"ok"``, ``"failed: …"`` or ``"not asked"``; ``count``/``bytes_saved`` filled by the writer."""

    held: dict[str, dict[str, str]] = field(default_factory=dict)
    lookup: str = "not asked"
    count: int = 0
    bytes_saved: int = 0
    written: set[tuple[str, str]] = field(default_factory=set)  # (uri, digest) an earlier capture of the crawl wrote
    left_out: list[tuple[str, str]] = field(default_factory=list)  # filled by the writer: (url, digest)
    left_out_bytes: int = 0

    def report(self) -> dict[str, Any]:
        out: dict[str, Any] = {"lookup": self.lookup, "count": self.count, "bytesSaved": self.bytes_saved}
        if self.left_out:
            out["sameCrawl"] = {"count": len(self.left_out), "bytesSaved": self.left_out_bytes,
                                # URLs only (decision 391): the crawl's record of that URL holds the digest
                                "resources": [u for u, _ in self.left_out]}
        return out


async def look_up(spec: dict | None, exchanges: list[Exchange], *, timeout_s: float = LOOKUP_TIMEOUT_S,
                  transport: httpx.AsyncBaseTransport | None = None,
                  behaviors: list[dict] | None = None) -> Revisits:
    """Ask the ledger (``spec`` = the request's ``revisit`` member) about the eligible responses'
    digests and the crawl's written pairs (the skippable sub-resources, ``behaviors``' sources);
    never raises — a failure is a :class:`Revisits` with nothing held nor written."""
    if not spec:
        return Revisits()
    digests = sorted({payload_digest(ex.body or b"") for ex in exchanges if eligible(ex)})
    pairs = sorted({(ex.url, payload_digest(ex.body or b"")) for ex in exchanges if skippable(ex)}
                   | {(behavior_uri(b["id"]), source_digest(b["source"])) for b in behaviors or ()}
                   | ({(RUNTIME_URI, source_digest(RUNTIME_JS))} if behaviors else set()))
    pairs = [p for p in pairs if len(p[0]) <= URI_MAX][:PAIRS_MAX]
    if not digests and not pairs:
        return Revisits(lookup="ok")
    body: dict[str, Any] = {"digests": digests}
    if pairs:
        body["resources"] = [{"uri": u, "digest": d} for u, d in pairs]
    try:
        async with httpx.AsyncClient(timeout=timeout_s, transport=transport) as client:
            resp = await client.post(spec["url"], json=body,
                                     headers={"authorization": f"Bearer {spec['token']}"})
        if resp.status_code != 200:
            raise ValueError(f"the ledger answered {resp.status_code}: {resp.text[:200]}")
        held = resp.json().get("held")
        if not isinstance(held, dict):
            raise ValueError("the answer has no held object")
        good = {d: v for d, v in held.items() if d in digests and isinstance(v, dict)
                and isinstance(v.get("uri"), str) and isinstance(v.get("date"), str)}
        asked = set(pairs)
        written = {(w.get("uri"), w.get("digest")) for w in resp.json().get("written") or []
                   if isinstance(w, dict)} & asked
        return Revisits(held=good, lookup="ok", written=written)
    except Exception as exc:  # noqa: BLE001 - never lose data: store every body
        reason = f"failed: {type(exc).__name__}: {str(exc)[:300]}"
        log.warning("revisit lookup failed; storing every body (%s)", reason)
        return Revisits(lookup=reason)
