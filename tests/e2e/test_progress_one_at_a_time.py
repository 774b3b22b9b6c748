"""The live progress of a short-gap host through the whole local stack (decision 401): the flow
submits the next page held behind the loading one (extension holdAfter); ``levelProgress`` lists
it ``queued``, never as a second page ``capturing`` — one host, one page capturing at a time, as
the site's own access log shows it was asked. Real Chromium, the real ledger and capture servers."""

from __future__ import annotations

from collections import Counter

import httpx
import pytest

from tests.e2e.site import Site
from tests.fixtures.crawl_api import start_crawl, wait_for_end
from tests.web.test_browser import page_html

pytestmark = pytest.mark.e2e
PAGES = [f"p{i}.html" for i in range(1, 9)]
DELAY_MS = 500  # a short gap: the next page is held behind the loading one


@pytest.fixture
def site(tmp_path):
    (tmp_path / "index.html").write_text(page_html("Hive", PAGES))
    for name in PAGES:
        (tmp_path / name).write_text(page_html(name, []))
    s = Site(tmp_path, "User-agent: *\nAllow: /\n")
    try:
        yield s
    finally:
        s.stop()


def test_a_held_page_is_queued_and_one_page_of_the_host_captures_at_a_time(local_stack, site):
    headers = {"Authorization": f"Bearer {local_stack.token()}"}
    samples: list[dict] = []
    with httpx.Client(base_url=local_stack.api_url, headers=headers, timeout=30) as api:
        body = {"seeds": [f"{site.url}/index.html"], "maxDepth": 1, "maxPages": 20, "scripts": [],
                "perHostDelayMs": DELAY_MS}
        crawl_id = start_crawl(api, body)
        view = wait_for_end(api, crawl_id, 240, poll_s=0.05,
                            on_view=lambda v: v.get("levelProgress") and samples.append(v["levelProgress"]))
    assert view["state"] == "succeeded" and view["pagesCaptured"] == 1 + len(PAGES), view
    level_1 = [s for s in samples if s["depth"] == 1]
    assert level_1, samples
    for sample in level_1:  # one host: never two of its pages capturing at once
        busy = Counter(c["host"] for c in sample["capturing"])
        assert max(busy.values(), default=0) <= 1, sample
        assert not {c["url"] for c in sample["capturing"]} & {c["url"] for c in sample["queued"]}, sample
    assert any(s["queued"] for s in level_1), level_1  # the held page was shown waiting its turn
    assert any(s["finishing"] for s in level_1), level_1  # a sealed page writing its archive, apart
    # the site's own log: the pages one after the other, each asked ≥ the delay after the previous one
    pages = [h for h in site.hits if h.path.lstrip("/") in PAGES]
    assert sorted(h.path.lstrip("/") for h in pages) == sorted(PAGES), site.hits
    assert min(b.t - a.t for a, b in zip(pages, pages[1:])) >= DELAY_MS / 1000, pages
