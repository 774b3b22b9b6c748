"""The gap the site feels, through the whole local stack (issue 11 item 6; BRIEF contracts 1–4):
a logged loopback site whose pages each load a stylesheet and a slow image; every server-felt
gap — from the end of one page's last request (the response written) to the first request of the
host's next page — is at least the delay, within a level and across the level boundary, with the
gap running from the page's last request and the host's captures pipelined (the stack's two
capture servers advertise ``sealWait`` and ``startAfterMs``: the next page is submitted when the
previous one's network is sealed, before its answer)."""

from __future__ import annotations

import time

import httpx
import psycopg
import pytest

from tests.fixtures.logged_site import LoggedSite

pytestmark = pytest.mark.e2e

DELAY_MS = 500
LEVEL_1 = ("/a", "/b", "/c", "/d")


def crawl(local_stack, seed: str, max_depth: int = 1) -> tuple[str, dict]:
    headers = {"Authorization": f"Bearer {local_stack.token()}"}
    with httpx.Client(base_url=local_stack.api_url, headers=headers, timeout=30) as api:
        r = api.post("/api/crawls", json={"seeds": [seed], "maxDepth": max_depth, "maxPages": 10, "scripts": [],
                                          "perHostDelayMs": DELAY_MS})
        assert r.status_code == 202, r.text
        crawl_id = r.json()["crawlId"]
        deadline = time.monotonic() + 300
        while (view := api.get(f"/api/crawls/{crawl_id}").json())["state"] == "running":
            assert time.monotonic() < deadline, view
            time.sleep(0.5)
    return crawl_id, view


def test_every_felt_gap_is_at_least_the_delay_from_the_last_request(local_stack):
    site = LoggedSite(LEVEL_1)
    wall_minus_mono = time.time() - time.monotonic()
    try:
        crawl_id, view = crawl(local_stack, f"{site.url}/")
    finally:
        site.stop()
    assert (view["state"], view["pagesCaptured"]) == ("succeeded", 1 + len(LEVEL_1)), view
    caps = site.captures()
    assert [c[0].path for c in caps][0] == "/" and sorted(c[0].path for c in caps[1:]) == list(LEVEL_1)
    felt = site.felt_gaps()
    print("felt gaps (ms):", [round(f * 1000) for f in felt])  # shown with -s / on failure
    assert all(f >= DELAY_MS / 1000 for f in felt), felt  # across the level boundary (/ → a) and within
    with psycopg.connect(local_stack.info["database_url"]) as conn:
        rows = conn.execute("SELECT url, submitted_at, gap_from, finished_at FROM crawl_pages WHERE crawl_id = %s"
                            " ORDER BY submitted_at", (crawl_id,)).fetchall()
    # the gap ran from the seal's sinceLastRequestMs (recorded by the ledger): before each answer
    assert len(rows) == 1 + len(LEVEL_1) and all(s <= g < f for _, s, g, f in rows), rows
    # ... and never from before the page's last request as the site saw it (same machine, wall
    # clocks; 20 ms for the per-process anchoring of crawl_host's monotonic clock)
    last_end = {c[0].path: max(h.end for h in c) + wall_minus_mono for c in caps}
    for url, _, gap_from, _ in rows:
        path = "/" + url.split("/", 3)[3]
        assert gap_from.timestamp() >= last_end[path] - 0.02, (url, gap_from.timestamp() - last_end[path])
    # pipelined: within level 1 a page was submitted while the previous one was still finishing
    level_1 = rows[1:]
    overlaps = [b[0] for a, b in zip(level_1, level_1[1:]) if b[1] < a[3]]
    assert overlaps, [(u, s.isoformat(), f.isoformat()) for u, s, _, f in level_1]
