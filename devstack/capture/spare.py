"""Browser contexts for captures, and one spare prepared while the server is idle.

Opening a context costs three Chromium round trips — the context, its page (a new renderer
process: 0.3–2 s on a loaded 2-core machine) and a CDP session — that a capture would otherwise
wait for between the request and the site's first request. :class:`Spare` opens one ahead of
time (after the previous capture's response) with the server's default viewport and device
pixel ratio. A capture takes it only when its own viewport and last device pixel ratio match
and it belongs to the current, connected browser; otherwise the spare is closed and the capture
opens its own. A spare has never navigated (its page shows ``about:blank``, no network), so
taking it is as isolated as opening a new context (``session: "isolated"``, contracts.md §A.3).
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass

from playwright.async_api import Browser, BrowserContext, CDPSession, Page


@dataclass
class Opened:
    """A context with one page and a CDP session on that page."""

    browser: Browser
    context: BrowserContext
    page: Page
    cdp: CDPSession
    viewport: dict
    dpr: int

    async def close(self, timeout_s: float = 10.0) -> None:
        """Close the context (never raises: a crashed browser cannot be closed politely)."""
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self.context.close(), timeout_s)


async def open_context(browser: Browser, proxy_url: str, viewport: dict, dpr: int, timeout_s: float) -> Opened:
    """A new context routed through ``proxy_url`` with ``viewport`` ({width, height} CSS px) and
    ``dpr`` (device scale factor), service workers blocked; each step bounded by ``timeout_s``.
    Raises playwright ``Error`` or ``asyncio.TimeoutError`` (the context is closed then)."""
    context = await asyncio.wait_for(browser.new_context(
        proxy={"server": proxy_url}, viewport=viewport, device_scale_factor=dpr, service_workers="block"), timeout_s)
    try:
        page = await asyncio.wait_for(context.new_page(), timeout_s)
        cdp = await asyncio.wait_for(context.new_cdp_session(page), timeout_s)
    except BaseException:
        with contextlib.suppress(Exception):
            await asyncio.wait_for(context.close(), timeout_s)
        raise
    return Opened(browser, context, page, cdp, dict(viewport), dpr)


class Spare:
    """At most one prepared :class:`Opened`, owned here until :meth:`take` hands it out."""

    def __init__(self) -> None:
        self._opened: Opened | None = None
        self.taken = 0  # captures that started on a spare (observability)

    async def take(self, browser: Browser, viewport: dict, dpr: int) -> Opened | None:
        """The spare if it fits (same browser, still connected, same viewport and dpr), else
        None after closing it."""
        opened, self._opened = self._opened, None
        if opened is None:
            return None
        fits = (opened.browser is browser and browser.is_connected() and opened.viewport == viewport
                and opened.dpr == dpr and not opened.page.is_closed())
        if fits:
            self.taken += 1
            return opened
        await opened.close(5)
        return None

    async def fill(self, browser: Browser, proxy_url: str, viewport: dict, dpr: int, timeout_s: float) -> None:
        """Prepare a spare unless one is held (errors leave none: the next capture opens its own)."""
        if self._opened is not None:
            return
        with contextlib.suppress(Exception):
            self._opened = await open_context(browser, proxy_url, viewport, dpr, timeout_s)

    async def discard(self) -> None:
        """Close the spare, if any."""
        opened, self._opened = self._opened, None
        if opened is not None:
            await opened.close(5)
