"""Requests a page starts after its network was sealed (waggle extension ``sealBeforeFormats``,
docs/capture-server.md extension 10).

With ``sealBeforeFormats: true`` the capture seals the page's network right after the settle wait
and the behaviors, and takes the page formats (screenshots, DOM, MHTML, title and links) from the
sealed page. Whatever the page requests from then on — a lazy image a full-page screenshot
reveals, a timer's fetch — cannot reach a site (the context's proxy is sealed) and is not in the
WACZ (the recorder has stopped). :class:`AfterSeal` lists those requests so the loss is visible in
the report (``afterSeal``) and the archive's ``datapackage.json``, never silent.

A request that completes after the seal was served by the browser's own cache (the proxy
refuses every connection), so it is not listed: the page lost nothing.
"""

from __future__ import annotations

import contextlib
from typing import Any

from playwright.async_api import BrowserContext, Request

URLS_LISTED = 20  # afterSeal.urls lists the first ones; afterSeal.refused counts all


class AfterSeal:
    """Listens on ``context`` from :meth:`watch` (called when the recorder stopped) until :meth:`stop`."""

    def __init__(self, context: BrowserContext | None) -> None:
        self._target = context
        self._context: BrowserContext | None = None
        self._started: dict[Request, None] = {}  # in start order
        self._served: set[Request] = set()
        self._handlers: list[tuple[str, Any]] = []
        self._result: dict[str, Any] | None = None

    def watch(self) -> None:
        """Start listing the http(s) requests the context starts (idempotent)."""
        if self._target is None or self._context is not None:
            return
        self._context = context = self._target
        self._handlers = [("request", self._on_request), ("requestfinished", self._on_finished)]
        for event, handler in self._handlers:
            context.on(event, handler)

    def _on_request(self, request: Request) -> None:
        if request.url.startswith(("http:", "https:")):
            self._started[request] = None

    def _on_finished(self, request: Request) -> None:
        self._served.add(request)

    def stop(self) -> None:
        """Stop listening (the formats are taken) and fix :meth:`report`; idempotent."""
        if self._context is not None:
            for event, handler in self._handlers:
                with contextlib.suppress(Exception):
                    self._context.remove_listener(event, handler)
        if self._result is None:
            refused = [r.url for r in self._started if r not in self._served]
            self._result = {"refused": len(refused), "urls": refused[:URLS_LISTED]}
        self._handlers, self._started, self._served = [], {}, set()

    def report(self) -> dict[str, Any]:
        """``{"refused": n, "urls": [the first URLS_LISTED]}``: the requests started after the
        seal that did not complete from the browser's cache (they failed, or were still pending
        at :meth:`stop`); stops listening first when :meth:`stop` was not called yet."""
        self.stop()
        assert self._result is not None
        return dict(self._result)
