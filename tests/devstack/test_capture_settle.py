"""The settle wait's clocks (waggle_capture/settle.py; issue 11): ``minMs`` runs from the page's
load event as the page dated it, and the quiet window dates a request's end by the proxy's last
byte when the browser's event came later. Real Chromium for the load date; the quiet rule is
pure."""

from __future__ import annotations

import asyncio
import time
from types import SimpleNamespace

from waggle_capture.settle import loaded_at, quiet_since


def test_the_load_is_dated_between_the_navigation_start_and_its_return(test_site):
    from playwright.async_api import async_playwright

    async def run() -> tuple[float, float | None, float, float | None]:
        async with async_playwright() as p:
            browser = await p.chromium.launch(executable_path="/usr/bin/chromium")
            try:
                page = await browser.new_page()
                before_blank = await loaded_at(page)  # about:blank has no navigation entry to date
                started = time.monotonic()
                await page.goto(test_site.url("/other"), wait_until="load")
                returned = time.monotonic()
                return started, await loaded_at(page), returned, before_blank
            finally:
                await browser.close()

    started, at, returned, blank = asyncio.run(run())
    assert at is not None and started <= at <= time.monotonic()
    assert at <= returned + 0.5  # dated by the page, not by our later read
    assert blank is None or blank <= started


def _run(wire: float | None) -> SimpleNamespace:
    return SimpleNamespace(proxy=SimpleNamespace(last_traffic=wire) if wire is not None else None)


def test_quiet_is_dated_by_the_wire_when_the_end_event_came_later():
    recorder = SimpleNamespace(last_start=10.0, last_activity=10.5)  # the end event arrived at 10.5
    assert quiet_since(_run(10.2), recorder) == 10.2  # the last byte passed the proxy at 10.2
    assert quiet_since(_run(9.0), recorder) == 10.0  # never before the last request start
    assert quiet_since(_run(11.0), recorder) == 10.5  # a streaming connection: the events' time, as before
    assert quiet_since(_run(None), recorder) == 10.5  # no proxy traffic: the events, as before
    assert quiet_since(_run(10.2), SimpleNamespace(last_start=None, last_activity=10.5)) == 10.5
