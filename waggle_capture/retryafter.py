"""The main document's ``Retry-After`` (RFC 9110 §10.2.3) on a 429 or 503 answer, for a capture
held behind it (extension 12 ``holdAfter``) and for the answer's ``retryAfterMs``
(docs/capture-server.md extension 18).

The field is ``delay-seconds`` (1*DIGIT) or an ``HTTP-date`` (IMF-fixdate; the obsolete RFC 850
and asctime forms are read too); anything else is ignored, as RFC 9110 lets a recipient do. A
date is counted from when the capture reads it, on this machine's wall clock (a date already
past is 0). The delay is capped at :data:`CAP_S`, the flow's back-off cap (crawl_host
``BACKOFF_CAP_MS``): a held capture can wait no longer than its task budget anyway.
"""

from __future__ import annotations

import time
from datetime import timezone
from email.utils import parsedate_to_datetime

STATUSES = frozenset({429, 503})
CAP_S = 120.0


def delay_s(value: str | None, now: float | None = None) -> float | None:
    """Seconds ``value`` (a ``Retry-After`` field value) asks to wait, in [0, CAP_S]; None when
    absent or unreadable. ``now``: epoch seconds a date is compared with (default: now)."""
    if value is None:
        return None
    text = value.strip()
    if text.isascii() and text.isdigit():
        return min(CAP_S, float(int(text)))
    try:
        when = parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError):
        return None
    if when is None:
        return None
    if when.tzinfo is None:  # asctime and "-0000" forms: an HTTP-date is always GMT (RFC 9110)
        when = when.replace(tzinfo=timezone.utc)
    left = when.timestamp() - (time.time() if now is None else now)
    return min(CAP_S, max(0.0, left))


def header(headers: dict[str, str]) -> str | None:
    """The ``Retry-After`` value of Playwright's ``all_headers()`` (lower-case names; repeated
    fields joined with ``\\n``: the first is taken)."""
    value = headers.get("retry-after")
    return None if value is None else value.split("\n", 1)[0]
