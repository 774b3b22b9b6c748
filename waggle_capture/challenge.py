"""Is the main document a bot-protection challenge or block page? (issue 29 item 5; extension
``challengeSignature``, docs/capture-server.md section "blocked").

The main document's status, headers and first bytes are matched against the signatures data
file (:mod:`ledger.challenge.signatures`). A match rides on the capture's ``errorDetails`` as
``challenge: {vendor, signature, status}``:

* a non-2xx main document already ends the capture ``http_error`` with nothing written; the
  match only says whose page it was, so the client can pause the host (its circuit breaker);
* a 2xx main document that a definitive header marks as a challenge (``cf-mitigated:
  challenge``, ``x-amzn-waf-action: challenge``) ends the capture ``failed`` / ``policy`` with
  :data:`MESSAGE` before anything is written: a challenge is never the archive of the page asked for.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

from waggle_capture.state import CaptureFailure, HeldDuplicate
from ledger.challenge.signatures import Match, match

log = logging.getLogger("waggle_capture")

BODY_WAIT_S = 5.0  # reading the body of an answer already loaded
MESSAGE = "a bot-protection challenge page answered ({vendor}, HTTP {status}): not archived"


async def main_document_match(response: Any, status: int) -> Match | None:
    """The signature ``response`` (Playwright's main-document Response, loaded) matches, else None;
    a body that cannot be read is matched on its status and headers alone."""
    try:
        headers = list((await response.all_headers()).items())
    except Exception:  # noqa: BLE001 - a page gone: nothing to say
        return None
    body: bytes | None = None
    with contextlib.suppress(Exception):
        body = await asyncio.wait_for(response.body(), BODY_WAIT_S)
    found = match(status, headers, body)
    if found is not None:
        log.info("challenge page: %s (%s) at %s, HTTP %d", found.vendor, found.name, response.url, status)
    return found


async def checked(run: Any, response: Any, status: int) -> Match | None:
    """:func:`main_document_match`, kept on ``run.challenge`` for a capture held behind this one."""
    found = await main_document_match(response, status)
    if found is not None:
        run.challenge = found.as_json()
    run.main_checked.set()
    return found


async def refuse_challenge(run: Any, response: Any, status: int) -> None:
    """Raise the capture's ``policy`` failure when a 2xx main document is a challenge page."""
    found = await checked(run, response, status)
    if found is not None:
        raise CaptureFailure("failed", "policy", MESSAGE.format(vendor=found.vendor, status=status),
                             challenge=found.as_json())


class HeldBehindChallenge(HeldDuplicate):
    """A held capture (extension ``holdAfter``) whose previous capture answered a challenge page:
    it ends before it sends anything, answered 409 (the client's breaker pauses the host)."""

    def __init__(self, found: dict) -> None:
        super().__init__("")
        self.message = (f"holdAfter: the previous capture answered a challenge page ({found.get('vendor')});"
                        " nothing was sent")

    def __str__(self) -> str:
        return self.message


async def refuse_behind_challenge(run: Any, hold: Any, timeout_s: float) -> None:
    """Before a held capture navigates: wait until the capture it is held behind has had its main
    document matched (or ended: sealed), at most ``timeout_s``, and raise
    :class:`HeldBehindChallenge` when that was a challenge — or was itself refused behind one, so
    a chain of held captures stops whole. The proxy's release comes after that seal anyway, so
    the wait costs a held navigation at most its lead."""
    prev = getattr(hold.prev, "run", None)
    waits = [asyncio.ensure_future(hold.prev.event.wait())]
    if prev is not None and hasattr(prev, "main_checked"):
        waits.append(asyncio.ensure_future(prev.main_checked.wait()))
    try:
        await asyncio.wait(waits, timeout=max(0.0, timeout_s), return_when=asyncio.FIRST_COMPLETED)
    finally:
        for w in waits:
            w.cancel()
    found = getattr(getattr(hold.prev, "run", None), "challenge", None)
    if found:
        run.challenge = found  # a capture held behind this one stops too
        run.main_checked.set()
        raise HeldBehindChallenge(found)


def with_challenge(failure: CaptureFailure, found: Match | None) -> CaptureFailure:
    """``failure`` (the http_error of a non-2xx main document) carrying ``found`` in its details."""
    if found is not None:
        failure.details["challenge"] = found.as_json()
    return failure
