"""Refusals of the crawl domain, turned into HTTP answers by ``ledger.api.errors``."""

from __future__ import annotations

from typing import Any


class Refused(Exception):
    """A request the ledger will not carry out: ``status`` (4xx, or 5xx with a safe message),
    ``error`` (what to change) and ``extra`` fields for the JSON body."""

    def __init__(self, status: int, error: str, **extra: Any):
        self.status, self.error, self.extra = status, error, extra
        super().__init__(error)

    def body(self) -> dict[str, Any]:
        return {"error": self.error, **self.extra}
