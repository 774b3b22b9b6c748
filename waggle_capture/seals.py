"""Seal wait (waggle extension ``sealWait``, docs/capture-server.md extension 8): which capture
carries which ``Waggle-Capture-Key``, and ``GET /captures/seal`` answered as soon as that capture
has sealed its page's network or ended.

A key is registered when its capture is accepted (never for a 400 or a 429: those captures do not
exist) and its entry is kept after the capture ended, so a wait that arrives late is answered at
once; entries are bounded (:data:`KEEP` most recent). A wait for a key not known yet keeps its
entry until it times out (the capture may be on its way), then drops it when nothing else
refers to it. Everything runs on the event loop: waiting never blocks it.
"""

from __future__ import annotations

import asyncio
import re
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, Callable, Protocol

from waggle_capture import names, retryafter


class Measured(Protocol):
    """What a seal answer reads of its capture (a ``state.Run``; state.py holds the board)."""

    def since_last_request_ms(self) -> int | None: ...

KEY_HEADER = "waggle-capture-key"
KEY_RE = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
MAX_TIMEOUT_MS = 60_000
KEEP = 256  # ended captures whose seal is still answered


class SealRequestError(ValueError):
    """A bad key or timeout: the message says what is allowed (400 ``ValidationException``)."""


def check_key(value: str | None) -> str | None:
    """The ``Waggle-Capture-Key`` header value, or None when absent; raises :class:`SealRequestError`."""
    if value is None:
        return None
    if not KEY_RE.match(value):
        raise SealRequestError("Waggle-Capture-Key must be 1–64 characters of A–Z, a–z, 0–9, '_' or '-'")
    return value


def check_timeout_ms(raw: str | None) -> int:
    """``timeoutMs`` of a seal wait: an integer 0–60000 (ms); raises :class:`SealRequestError`."""
    if raw is None or not raw.strip().isdigit() or int(raw) > MAX_TIMEOUT_MS:
        raise SealRequestError(f"timeoutMs must be an integer from 0 to {MAX_TIMEOUT_MS} (milliseconds)")
    return int(raw)


@dataclass
class Seal:
    """One key's seal: ``event`` is set when its capture sealed the network or ended."""

    event: asyncio.Event = field(default_factory=asyncio.Event)
    run: Measured | None = None
    waiters: int = 0
    accepted: asyncio.Event = field(default_factory=asyncio.Event)  # its capture was accepted here


class SealBoard:
    """Keys → :class:`Seal` (bounded)."""

    def __init__(self, keep: int = KEEP) -> None:
        self._seals: OrderedDict[str, Seal] = OrderedDict()
        self._keep = keep

    def accept(self, key: str) -> Seal:
        """The seal a newly accepted capture with ``key`` signals; a wait already waiting for
        the key keeps waiting on it, an older capture's entry with the same key is replaced."""
        seal = self._seals.get(key)
        if seal is None or seal.run is not None or seal.event.is_set():
            seal = Seal()
        self._seals[key] = seal
        self._seals.move_to_end(key)
        seal.accepted.set()
        self._trim()
        return seal

    async def find(self, key: str, timeout_s: float) -> Seal | None:
        """The seal of the capture accepted here with ``key`` (running or ended), waiting up to
        ``timeout_s`` seconds for its acceptance (its POST may still be on its way); None when
        no such capture was accepted (extension ``holdAfter``)."""
        seal = await self._until(key, lambda s: s.accepted, timeout_s)
        return seal if seal.accepted.is_set() else None

    async def wait(self, key: str, timeout_s: float) -> dict[str, Any]:
        """The seal answer ``{key, sealed, sinceLastRequestMs, finalUrl?, httpStatusCode?, retryAfterMs?,
        taskId?, manifestLocation?}`` once ``key``'s capture
        sealed or ended, or ``sealed: false`` after ``timeout_s`` seconds. ``sinceLastRequestMs``
        is measured now (as the answer is written), null when the page made no request."""
        seal = await self._until(key, lambda s: s.event, timeout_s)
        if not seal.event.is_set():
            return {"key": key, "sealed": False, "sinceLastRequestMs": None}
        since = seal.run.since_last_request_ms() if seal.run is not None else None
        answer: dict[str, Any] = {"key": key, "sealed": True, "sinceLastRequestMs": since}
        task_id = getattr(seal.run, "task_id", None)
        if isinstance(task_id, str):  # extension "robots": who the capture is, and its manifest-to-be
            answer["taskId"] = task_id
            location = getattr(getattr(seal.run, "sink", None), "location", None)
            stem = getattr(seal.run, "stem", None)
            if callable(location) and isinstance(stem, str):
                answer["manifestLocation"] = location(names.file_name(stem, "manifest"))
        if isinstance(document := getattr(seal.run, "document_ms", None), int):  # extension "serverpolite"
            answer["documentMs"] = document
        final = getattr(seal.run, "landed_url", None)
        if isinstance(final, str) and final:  # where the page landed (redirects followed)
            answer["finalUrl"] = final
        if getattr(seal.run, "doc_status", None) in retryafter.STATUSES:  # extension 18: back off now
            answer["httpStatusCode"] = seal.run.doc_status
            if (retry_after := seal.run.retry_after_ms()) is not None:
                answer["retryAfterMs"] = retry_after
        return answer

    async def _until(self, key: str, event: Callable[[Seal], asyncio.Event], timeout_s: float) -> Seal:
        """``key``'s entry (made when unknown) once ``event(entry)`` is set or ``timeout_s``
        passed; an entry no capture was accepted for is dropped when nobody waits on it any more."""
        seal = self._seals.get(key)
        if seal is None:
            seal = self._seals[key] = Seal()
            self._trim()
        seal.waiters += 1
        try:
            await asyncio.wait_for(event(seal).wait(), timeout=timeout_s)
        except asyncio.TimeoutError:
            pass
        finally:
            seal.waiters -= 1
        if not seal.accepted.is_set() and seal.waiters == 0 and self._seals.get(key) is seal:
            del self._seals[key]  # nobody submitted it (yet): do not keep it
        return seal

    def _trim(self) -> None:
        """Forget the oldest entries beyond ``keep``, never a capture still running."""
        excess = len(self._seals) - self._keep
        for key in [k for k, s in self._seals.items() if s.run is None or s.event.is_set()][:max(0, excess)]:
            del self._seals[key]
