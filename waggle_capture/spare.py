"""Browser contexts for captures, and spares prepared ahead of the captures that take them.

Opening a context costs six Chromium round trips — the context, its page (a new renderer
process: 0.3–2 s on a loaded 2-core machine; 0.25–0.35 s of CPU in all, since the browser builds
no omnibox popup for the context's window, :data:`.browser.QUIET_FEATURES`), a CDP session and the file reader's domains
(:func:`files.prepare`, 25 ms per round trip on a loaded machine) — that a capture would
otherwise wait for between the request and the site's first request. :class:`Spare` opens them ahead of
time (from when the previous capture opened its own context) with the server's default
viewport and device pixel ratio. A capture takes it only when its own viewport and last device pixel ratio match
and it belongs to the current, connected browser; otherwise the spare is closed and the capture
opens its own. A spare has never navigated (its page shows ``about:blank``, no network), so
taking it is as isolated as opening a new context (``session: "isolated"``, contracts.md §A.3).

Each context has its own :class:`GuardedProxy` (sealed until its capture begins, sealed again
when it ends), so a context still being closed after its answer can reach no site even while
the next capture's proxy is open: the next capture never waits for the previous teardown.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from dataclasses import dataclass

from playwright.async_api import Browser, BrowserContext, CDPSession, Page

from waggle_capture import files
from waggle_capture.proxy import GuardedProxy

log = logging.getLogger("waggle_capture")


@dataclass
class Opened:
    """A context with one page and a CDP session on that page."""

    browser: Browser
    context: BrowserContext
    page: Page
    cdp: CDPSession
    viewport: dict
    dpr: int
    proxy: GuardedProxy
    main_frame: str  # the page's main frame id; the file reader's domains are enabled (files.prepare)

    async def close(self, timeout_s: float = 10.0) -> None:
        """Close the context, then its proxy (never raises: a crashed browser cannot be closed
        politely)."""
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self.context.close(), timeout_s)
        with contextlib.suppress(Exception):
            await self.proxy.close()


async def open_context(browser: Browser, allow_private: bool, viewport: dict, dpr: int, timeout_s: float,
                       user_agent: str | None = None) -> Opened:
    """A new context routed through a proxy of its own (sealed until ``proxy.begin_capture``;
    ``allow_private`` as the server's) with ``viewport`` ({width, height} CSS px) and ``dpr``
    (device scale factor), service workers blocked, ``user_agent`` on every request of its pages
    and workers (None: Chromium's own); each step bounded by ``timeout_s`` seconds.
    Raises playwright ``Error`` or ``asyncio.TimeoutError`` (context and proxy closed then)."""
    began = time.monotonic()
    proxy = GuardedProxy(allow_private=allow_private, sealed=True)
    await proxy.start()
    context = None
    try:
        context = await asyncio.wait_for(browser.new_context(
            proxy={"server": proxy.url}, viewport=viewport, device_scale_factor=dpr, service_workers="block",
            user_agent=user_agent),
            timeout_s)
        page = await asyncio.wait_for(context.new_page(), timeout_s)
        cdp = await asyncio.wait_for(context.new_cdp_session(page), timeout_s)
        main_frame = await asyncio.wait_for(files.prepare(cdp), timeout_s)
    except BaseException:
        if context is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(context.close(), timeout_s)
        await proxy.close()
        raise
    # monotonic: tests/bench/politeness.py lays context builds beside the pages' settle windows
    log.info("context built %.4f %.4f", began, time.monotonic())
    return Opened(browser, context, page, cdp, dict(viewport), dpr, proxy, main_frame)


class Spare:
    """Up to ``size`` prepared :class:`Opened`, owned here until :meth:`take` hands one out.

    One by default. Two let a back-to-back capture take a ready one while the other is being
    prepared, but cost a renderer process (~250 MiB more tree RSS measured with the `capture`
    benchmark, 1,381 vs 1,137 MiB after 53 captures), which brought the browser to its
    1,500 MiB recycling bound every ~20 captures of long pages; not worth it on 2 cores."""

    def __init__(self, size: int = 1) -> None:
        self.size = size
        self._ready: list[Opened] = []
        self._filling: asyncio.Task | None = None
        self.taken = 0  # captures that started on a spare (observability)

    async def take(self, browser: Browser, viewport: dict, dpr: int, timeout_s: float = 10.0) -> Opened | None:
        """A spare that fits (same browser, still connected, same viewport and dpr; the others
        are closed), else None. When none is ready but one is being prepared, that one is waited
        for (≤ ``timeout_s`` s): it is further along than a context opened now would be."""
        if not self._ready and self._filling is not None and not self._filling.done():
            await asyncio.wait([self._filling], timeout=timeout_s)
        while self._ready:
            opened = self._ready.pop(0)
            if (opened.browser is browser and browser.is_connected() and opened.viewport == viewport
                    and opened.dpr == dpr and not opened.page.is_closed()):
                self.taken += 1
                return opened
            await opened.close(5)
        return None

    async def fill(self, browser: Browser, allow_private: bool, viewport: dict, dpr: int, timeout_s: float,
                   user_agent: str | None = None) -> None:
        """Prepare spares up to ``size`` unless that is under way (errors stop it: the next
        capture opens its own). Each one is handed out as soon as it is ready."""
        if self._filling is not None and not self._filling.done():
            return
        self._filling = asyncio.current_task()
        try:
            while len(self._ready) < self.size:
                self._ready.append(await open_context(browser, allow_private, viewport, dpr, timeout_s, user_agent))
        except Exception:  # noqa: BLE001 — preparation is an optimisation
            pass
        finally:
            self._filling = None

    async def discard(self) -> None:
        """Stop a preparation and close every spare."""
        if self._filling is not None and not self._filling.done():
            self._filling.cancel()
            await asyncio.wait([self._filling], timeout=5)
        ready, self._ready = self._ready, []
        for opened in ready:
            await opened.close(5)
