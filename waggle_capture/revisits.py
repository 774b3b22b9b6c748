"""Revisit records (waggle extension ``revisit``, docs/capture-server.md; decision 181).

At packaging time the capture's responses are digested as the WARC writes them (sha256, RFC 4648
base32 with padding: :func:`payload_digest`), and the ledger named in the request's ``revisit``
member (``{"url": <lookup URL>, "token": <bearer>}``) is asked **once** which of them the
crawl's organization already holds (``POST url {"digests": [...]}`` → ``{"held": {digest:
{"uri", "date"}}}``). A held one is written as a WARC/1.1 ``revisit`` record (profile
identical-payload-digest, ``WARC-Refers-To-Target-URI``/``-Date``, its HTTP headers, no body).

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

from waggle_capture.recorder import Exchange

log = logging.getLogger("waggle_capture")

MIN_BYTES = 1024
LOOKUP_TIMEOUT_S = 5.0  # the capture waits at most this long; past it every body is stored


def payload_digest(body: bytes) -> str:
    """``sha256:`` + base32 (padded) of ``body``: the WARC-Payload-Digest warc.py writes."""
    return "sha256:" + base64.b32encode(hashlib.sha256(body).digest()).decode()


def eligible(ex: Exchange) -> bool:
    """Whether ``ex`` may become a revisit: a response archived with its whole body ≥ MIN_BYTES."""
    return (ex.status is not None and ex.withheld not in ("no-archive", "deny") and not ex.truncated
            and not ex.incomplete and len(ex.body or b"") >= MIN_BYTES)


@dataclass
class Revisits:
    """The lookup's outcome for one capture: ``held`` digest → ``{"uri", "date"}``; ``lookup``
    ``"ok"``, ``"failed: …"`` or ``"not asked"``; ``count``/``bytes_saved`` filled by the writer."""

    held: dict[str, dict[str, str]] = field(default_factory=dict)
    lookup: str = "not asked"
    count: int = 0
    bytes_saved: int = 0

    def report(self) -> dict[str, Any]:
        return {"lookup": self.lookup, "count": self.count, "bytesSaved": self.bytes_saved}


async def look_up(spec: dict | None, exchanges: list[Exchange], *, timeout_s: float = LOOKUP_TIMEOUT_S,
                  transport: httpx.AsyncBaseTransport | None = None) -> Revisits:
    """Ask the ledger (``spec`` = the request's ``revisit`` member) about the eligible responses'
    digests; never raises — a failure is a :class:`Revisits` with nothing held."""
    if not spec:
        return Revisits()
    digests = sorted({payload_digest(ex.body or b"") for ex in exchanges if eligible(ex)})
    if not digests:
        return Revisits(lookup="ok")
    try:
        async with httpx.AsyncClient(timeout=timeout_s, transport=transport) as client:
            resp = await client.post(spec["url"], json={"digests": digests},
                                     headers={"authorization": f"Bearer {spec['token']}"})
        if resp.status_code != 200:
            raise ValueError(f"the ledger answered {resp.status_code}: {resp.text[:200]}")
        held = resp.json().get("held")
        if not isinstance(held, dict):
            raise ValueError("the answer has no held object")
        good = {d: v for d, v in held.items() if d in digests and isinstance(v, dict)
                and isinstance(v.get("uri"), str) and isinstance(v.get("date"), str)}
        return Revisits(held=good, lookup="ok")
    except Exception as exc:  # noqa: BLE001 - never lose data: store every body
        reason = f"failed: {type(exc).__name__}: {str(exc)[:300]}"
        log.warning("revisit lookup failed; storing every body (%s)", reason)
        return Revisits(lookup=reason)
