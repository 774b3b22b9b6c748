"""The crawl page says why a crawl waits (ledger.crawl.waits), in real Chromium against the whole
local stack: a crawl whose host another crawl's level holds lists "waiting for crawl X's turn"
with a link to X, refreshed without a reload, and stops saying it once X is failed."""

from __future__ import annotations

import time

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
            # the holder must hold the host before the waiter is dispatched (levels are dispatched
            # in the background: two started back to back may claim in either order)
            deadline = time.monotonic() + 60
            while not site.log and time.monotonic() < deadline:
                time.sleep(0.1)
            assert site.log, "the holder never reached the site"
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


# Every fetch of the page is counted; one whose URL holds window.__hold waits for window.__release()
# after its answer came, as a slow answer on a loaded ledger does.
SLOW_ANSWERS = """
window.__fetched = []; window.__hold = null; window.__held = 0;
const send = window.fetch.bind(window);
window.fetch = async (input, init) => {
  const url = typeof input === "string" ? input : input.url;
  window.__fetched.push(url);
  const answer = await send(input, init);
  if (window.__hold && url.includes(window.__hold)) {
    window.__held += 1;
    await new Promise((resolve) => { window.__release = resolve; });
  }
  return answer;
};
"""


def test_a_late_answer_for_the_crawl_left_never_shows_on_the_next_crawls_page(local_stack, browser) -> None:
    """Switching from crawl A's page to crawl B's while A's refresh is in flight: A's late answer
    is not rendered on B's page and A's polling ends (the trial saw a 3000 ms crawl's "this
    crawl's delay 3000 ms" on the 500 ms crawl's page)."""
    site = LoggedSite(("/a", "/b"))
    headers = {"Authorization": f"Bearer {local_stack.token()}"}
    context, page = new_page(browser)
    page.add_init_script(SLOW_ANSWERS)
    try:
        with httpx.Client(base_url=local_stack.api_url, headers=headers, timeout=30) as api:
            def start(path):
                r = api.post("/api/crawls", json={"seeds": [site.url + path], "maxDepth": 0, "scripts": [],
                                                  "perHostDelayMs": 20000})
                assert r.status_code == 202, r.text
                return r.json()["crawlId"]

            a, b = start("/a"), start("/b")
            page.goto(local_stack.api_url + "/")
            page.click("#signin")
            page.wait_for_selector("table#crawls, #crawls-status")
            page.goto(f"{local_stack.api_url}/#/crawls/{a}")
            page.wait_for_selector(f"h1:has-text('{a[:8]}')")
            page.evaluate("(a) => { window.__hold = '/api/crawls/' + a; }", a)
            page.wait_for_function("() => window.__held >= 1", timeout=30000)  # A's next refresh is in flight
            page.evaluate("(b) => { location.hash = '#/crawls/' + b; }", b)
            page.wait_for_selector(f"h1:has-text('{b[:8]}')")
            page.evaluate("() => { window.__hold = null; window.__release(); }")
            asked_a = page.evaluate("(a) => window.__fetched.filter((u) => u.includes(a)).length", a)
            # three more refreshes of B (a second apart): A's loop, had it survived, asked again meanwhile
            asked_b = "(b) => window.__fetched.filter((u) => u.endsWith('/api/crawls/' + b)).length"
            page.wait_for_function(f"([b, n]) => ({asked_b})(b) >= n", arg=[b, page.evaluate(asked_b, b) + 3],
                                   timeout=30000)
            assert page.inner_text("h1") == f"Crawl {b[:8]}"
            assert page.evaluate("(a) => window.__fetched.filter((u) => u.includes(a)).length", a) == asked_a
            for crawl in (a, b):
                api.post(f"/api/crawls/{crawl}/failed", json={"reason": "the test is done with it"})
    finally:
        context.close()
        site.stop()
