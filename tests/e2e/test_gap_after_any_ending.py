"""The gap runs from the site's last byte whatever ended the capture (issue 24 item 2), through
the whole local stack: one crawl of a logged loopback site whose level-1 pages end every way a
capture can end — a download refused at the response limit (30 MB with ``Content-Length``), one
cut there (no ``Content-Length``), a connection reset, a timeout, a redirect loop, 404, 500, 429
with ``Retry-After``, the load deadline, success. For every pair of consecutive captures the site
saw (retries included), every request of the next one arrives at least the host's delay after the
last moment the site felt the previous one (its last byte written, its write failing, or the
client hanging up)."""

from __future__ import annotations

import time

import httpx
import pytest

from tests.fixtures.endings_site import ENDINGS, EndingsSite

pytestmark = pytest.mark.e2e

DELAY_MS = 300


def test_every_request_of_the_next_page_waits_the_delay_after_any_ending(local_stack):
    site = EndingsSite()
    try:
        headers = {"Authorization": f"Bearer {local_stack.token()}"}
        with httpx.Client(base_url=local_stack.api_url, headers=headers, timeout=30) as api:
            r = api.post("/api/crawls", json={"seeds": [f"{site.url}/"], "maxDepth": 1, "maxPages": 20,
                                              "scripts": [], "perHostDelayMs": DELAY_MS})
            assert r.status_code == 202, r.text
            crawl_id = r.json()["crawlId"]
            deadline = time.monotonic() + 600
            while (view := api.get(f"/api/crawls/{crawl_id}").json())["state"] == "running":
                assert time.monotonic() < deadline, view
                time.sleep(0.5)
    finally:
        site.stop()
    caps = site.captures()
    firsts = [c[0].path for c in caps]
    assert firsts[0] == "/" and set(ENDINGS) <= set(firsts), (firsts, view)
    short = []
    followed = set()
    for prev, nxt in zip(caps, caps[1:]):
        last = max(h.end for h in prev)
        gap = min(h.start for h in nxt) - last
        followed.add(prev[0].path)
        print(f"{prev[0].path:>13} → {nxt[0].path:<13} {gap * 1000:7.0f} ms")  # shown with -s / on failure
        if gap < DELAY_MS / 1000:
            short.append((prev[0].path, nxt[0].path, round(gap * 1000)))
    assert not short, short
    # every ending was followed by a page (the last capture of the level has no successor)
    assert len(set(ENDINGS) - followed) <= 1, (sorted(set(ENDINGS) - followed), firsts)
