"""Timestamps as the API writes them (one format for every crawl route and the flow's contract)."""

from __future__ import annotations

from datetime import datetime, timezone


def iso_ms(value: datetime | None) -> str | None:
    """ISO 8601 UTC with milliseconds and ``Z`` (``2026-09-19T14:53:36.759Z``); None stays None."""
    if value is None:
        return None
    value = value.astimezone(timezone.utc)
    return value.strftime("%Y-%m-%dT%H:%M:%S.") + f"{value.microsecond // 1000:03d}Z"
