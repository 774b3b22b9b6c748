"""The crawl page says why a crawl waits (ledger.crawl.waits), in real Chromium against the whole
local stack: a crawl whose host another crawl's level holds lists "waiting for crawl X's turn"
with a link to X, refreshed without a reload, and stops saying it once X is failed."""

from __future__ import annotations

import httpx
import pytest

from tests.fixtures.logged_site import LoggedSite
from tests.web.test_browser import new_page

pytestmark = pytest.mark.e2e


def test_a_crawl_waiting_for_another_crawls_turn_says_so(local_stack, browser) -> None:
    site = LoggedSite(("/a", "/b", "/c"))
    headers = {"Authorization": f"Bearer {local_stack.token()}"}
    context, page = new_page(browser)
    try:
        with httpx.Client(base_url=local_stack.api_url, headers=headers, timeout=30) as api:
            def start(paths):  # slow on purpose: the holder is still on the host while we look
                r = api.post("/api/crawls", json={"seeds": [site.url + p for p in paths], "maxDepth": 0,
                                                  "scripts": [], "perHostDelayMs": 20000})
                assert r.status_code == 202, r.text
                return r.json()["crawlId"]

            holder = start(("/a", "/b"))
            waiter = start(("/c",))
            page.goto(local_stack.api_url + "/")
            page.click("#signin")
            page.wait_for_selector("table#crawls, #crawls-status")
            page.goto(f"{local_stack.api_url}/#/crawls/{waiter}")
            item = page.wait_for_selector("#waiting li[data-kind='turn']")
            assert f"waiting for crawl {holder[:8]}'s turn" in item.inner_text()
            assert item.query_selector("a").get_attribute("href") == f"#/crawls/{holder}"
            api.post(f"/api/crawls/{holder}/failed", json={"reason": "the test is done with it"})
            # the next refreshes (every second, no reload) stop saying it: the host is the waiter's now
            page.wait_for_function("() => !document.querySelector(\"#waiting li[data-kind='turn']\")",
                                   timeout=30000)
            api.post(f"/api/crawls/{waiter}/failed", json={"reason": "the test is done with it"})
    finally:
        context.close()
        site.stop()
