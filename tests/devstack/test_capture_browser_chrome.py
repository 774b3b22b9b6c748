"""Contexts without browser chrome (waggle_capture/browser.py ``QUIET_FEATURES``): Chromium
builds a WebUI omnibox popup for every new context's window, in a renderer of its own, unless
those features are disabled — and the disabling must keep Playwright's own list (Chromium reads
only the last ``--disable-features``). Real Chromium."""

from __future__ import annotations

import asyncio

from waggle_capture import browser as browser_module
from waggle_capture.browser import (CHROMIUM, DISABLE_FEATURES, QUIET_FEATURES, BrowserHolder,
                                      launched_disable_features, merged_disable_features)


def test_merged_list_keeps_every_feature_once_and_in_order():
    assert merged_disable_features("--disable-features=A,WebUIOmniboxPopup", ("WebUIOmniboxPopup", "B")) == (
        "--disable-features=A,WebUIOmniboxPopup,B")
    assert merged_disable_features("--disable-features=", ("X",)) == "--disable-features=X"


async def _targets_after_a_context(holder: BrowserHolder) -> list[dict]:
    browser = holder.browser
    assert browser is not None
    cdp = await browser.new_browser_cdp_session()
    context = await browser.new_context()
    try:
        page = await context.new_page()
        await page.goto("data:text/html,<p>a page</p>")
        assert await page.inner_text("p") == "a page"
        await asyncio.sleep(0.3)  # the popup, when built, is created with the window
        return (await cdp.send("Target.getTargets", {"filter": [{}]}))["targetInfos"]
    finally:
        await context.close()
        await cdp.detach()


def test_a_new_context_builds_no_browser_chrome_and_playwright_defaults_stay():
    async def go() -> tuple[str | None, list[dict], list[dict], int]:
        holder = BrowserHolder(CHROMIUM, recycle_every=1000, max_rss_mb=100_000)
        await holder.start()
        try:
            live = await asyncio.to_thread(launched_disable_features)
            first = await _targets_after_a_context(holder)
            await holder._close_browser()  # a relaunch (crash, recycling) keeps the merged list
            await holder.ensure()
            return live, first, await _targets_after_a_context(holder), holder.launches
        finally:
            await holder.close()

    live, first, relaunched, launches = asyncio.run(go())
    assert live is not None and live.startswith(DISABLE_FEATURES)
    features = live[len(DISABLE_FEATURES):].split(",")
    assert set(QUIET_FEATURES) <= set(features)
    playwright_own = browser_module._learned["playwright"][len(DISABLE_FEATURES):].split(",")
    assert "PaintHolding" in playwright_own and set(playwright_own) <= set(features), "Playwright's defaults dropped"
    assert launches == 2
    for targets in (first, relaunched):
        assert [t for t in targets if t["type"] == "page"], targets
        assert not [t for t in targets if "top-chrome" in t["url"]], targets
