# /// script
# requires-python = ">=3.11"
# dependencies = []
# ///
"""A host's circuit breaker: a host that answers with challenge or block pages is paused (issue 29
item 5; docs/decisions/231-blocked-hosts.md). A Windmill library script (no ``main``), imported
as ``f.waggle.breaker``.

Two ways to trip it, in one host's job (its level):

* a capture whose answer names a bot-protection signature (our capture server's extension
  ``challengeSignature``: ``report.errorDetails.challenge = {vendor, signature, status}``) — at
  once; that page is ``blocked`` (:func:`challenge_reason`), never retried, nothing archived;
* ``after`` main documents in a row answering 403, 429 or 503 (the status-only fallback, all a
  real BrowserHive v12 can tell) — the last of them becomes ``blocked``. Any other outcome
  (captured, another failure) ends the streak. ``after`` 0 turns the fallback off.

Once tripped, every page of the host not yet submitted is ``blocked`` with the reason
(:meth:`HostBreaker.held`), and the ledger holds back the host's pages of later levels. A
capture already in flight when it trips (pipelined: submitted at the previous seal, or held behind
it) goes on; answered 403/429/503 it is ``blocked`` too (:data:`IN_FLIGHT`, decision 402), so every
page of the host that the block kept from being archived says ``blocked`` and why.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

BLOCKED = "blocked"
BLOCKED_STATUSES = frozenset({403, 429, 503})
BLOCKED_AFTER = 3  # the ledger's WAGGLE_BLOCKED_AFTER (flow input blocked_after) wins
HELD = "not captured, never requested: the host is paused for the rest of the crawl after "  # decision 402
# a capture in flight when the breaker tripped (pipelined or held): the site answered it a block too
IN_FLIGHT = "requested before the pause took effect: in flight when the host was paused after "


def challenge_reason(report: Any) -> str | None:
    """``"challenge page: {vendor} ({signature}), HTTP {status}"`` when a capture ``report``'s
    ``errorDetails.challenge`` names a signature; None otherwise (a real v12 never does)."""
    details = report.get("errorDetails") if isinstance(report, dict) else None
    found = details.get("challenge") if isinstance(details, dict) else None
    if not isinstance(found, dict) or not isinstance(found.get("vendor"), str) or not found["vendor"]:
        return None
    name = found.get("signature") if isinstance(found.get("signature"), str) else "?"
    status = found.get("status") if isinstance(found.get("status"), int) else "?"
    return f"challenge page: {found['vendor'][:80]} ({name[:80]}), HTTP {status}"


def blocked_after(value: Any) -> int:
    """The flow input ``blocked_after`` as an int ≥ 0; None or anything else → :data:`BLOCKED_AFTER`."""
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    return BLOCKED_AFTER


@dataclass
class HostBreaker:
    """One host job's breaker; ``reason`` is set once it tripped (then it stays)."""

    after: int = BLOCKED_AFTER
    say: Callable[[str], None] = print
    reason: str | None = None
    streak: list[int] = field(default_factory=list)

    def observe(self, result: dict, doc_status: int | None) -> None:
        """Count one concluded page (``result`` its PageResult, ``doc_status`` its main
        document's status when the capture failed on it). The page that trips the breaker by the
        streak is turned ``blocked`` in place; so is a page concluded after the trip whose document
        answered 403/429/503 (decision 402): it was in flight — submitted, or held by the capture
        server, before the trip was known — and its answer is the block the host gave, not a
        failure of its own."""
        if self.reason is not None:
            if result.get("status") == "failed" and doc_status in BLOCKED_STATUSES:
                why = str(result.get("skipReason") or f"HTTP {doc_status}")
                result.update(status=BLOCKED, skipReason=f"{IN_FLIGHT}{self.reason}; the site answered: {why}")
            return
        if result.get("status") == BLOCKED:
            self._trip(str(result.get("skipReason") or "a challenge page"))
        elif result.get("status") == "failed" and doc_status in BLOCKED_STATUSES and self.after > 0:
            self.streak.append(int(doc_status))
            if len(self.streak) >= self.after:
                statuses = ", ".join(str(s) for s in self.streak)
                reason = f"{len(self.streak)} blocked answers in a row (HTTP {statuses})"
                result.update(status=BLOCKED, skipReason=f"{reason}; last: {result.get('skipReason') or ''}".rstrip("; :"))
                self._trip(reason)
        else:
            self.streak.clear()

    def _trip(self, reason: str) -> None:
        self.reason = reason
        self.say(f"host paused for the rest of the crawl: {reason}")

    def held(self, url: str) -> dict | None:
        """The ``blocked`` PageResult of ``url`` once tripped (it is not submitted), else None."""
        if self.reason is None:
            return None
        return {"url": url, "status": BLOCKED, "skipReason": HELD + self.reason}
