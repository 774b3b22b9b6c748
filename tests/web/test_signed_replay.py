"""ReplayWeb.page shows a signed archive as signed (issue 24 item 6): a crawl with ``signing``
through the whole local stack, its WACZ opened in the pinned ReplayWeb.page (served by the
ledger on the replay origin), whose "Archive Info" names the observer (``localhost``, the
authsign certificate's domain) and the signing software. Real Chromium."""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from urllib.parse import urlencode, urlsplit

import httpx
import pytest

from tests.e2e.test_signed_crawl import crawl
from tests.fixtures.logged_site import LoggedSite

pytestmark = pytest.mark.e2e


def test_replaywebpage_names_the_signer_of_a_signed_archive(local_stack, browser):
    site = LoggedSite(("/a",))
    try:
        _, view = crawl(local_stack, f"{site.url}/", signing=True, maxDepth=0)
    finally:
        site.stop()
    [archive] = view["archives"]
    assert archive["signatureVerified"] is True
    headers = {"Authorization": f"Bearer {local_stack.token()}"}
    source = httpx.post(f"{local_stack.api_url}/api/archives/{archive['id']}/url", headers=headers,
                        timeout=30).json()["url"]
    # the replay origin: the ledger's twin host name (localhost ↔ 127.0.0.1), as the web page uses
    replay = f"http://localhost:{urlsplit(local_stack.api_url).port}"
    context = browser.new_context(viewport={"width": 1200, "height": 900})
    try:
        page = context.new_page()
        page.set_default_timeout(60000)
        page.goto(f"{replay}/replay.html?" + urlencode({"source": source, "url": archive["sourceUrl"]}))
        deadline = time.monotonic() + 120  # our page registers ReplayWeb.page's worker, then replays
        while not any("/replay/w/" in f.url for f in page.frames):
            assert time.monotonic() < deadline, [f.url for f in page.frames]
            page.wait_for_timeout(500)
        page.goto(f"{replay}/replay/?" + urlencode({"source": source}))  # ReplayWeb.page's own UI
        page.get_by_label("more replay controls").click()
        page.get_by_text("Archive Info").first.click()
        # the fields are slotted into ReplayWeb.page's own elements (shadow DOM: locators pierce it)
        observed = page.locator("wr-labeled-field[label='Observed By']")
        observed.wait_for()
        assert observed.locator("p:not(.minihead)").inner_text().strip() == "localhost"
        assert "authsigner 0.6.1" in page.locator("wr-labeled-field[label='Created With']").inner_text()
        page.screenshot(path=str(Path(tempfile.gettempdir()) / "waggle-signed-replay.png"))
    finally:
        context.close()
