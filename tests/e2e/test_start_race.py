"""Two crawls started together on one host, through the whole local stack (round 21, item 6;
decision 301): the short-delay crawl's level is claimed before the long-delay crawl registers, yet —
because every request to the host is admitted with the host's shared delay as the ledger says it
then (plan_level before robots.txt, crawl_host before each capture) — the site's own access log
shows every request (robots.txt included) at least the longer delay after the end of the one
before it. Ratios of the delay, not absolute times. The deterministic form of the race (the
registration exactly between plan_level's read and the first capture) is
tests/flow/test_admission.py."""

from __future__ import annotations

import time
from datetime import datetime

import httpx
import psycopg
import pytest

from tests.fixtures.logged_site import LoggedSite

pytestmark = pytest.mark.e2e

SHORT_MS, LONG_MS = 300, 3000


def felt(site: LoggedSite) -> list[dict]:
    """Each request the site felt as one visit — a robots.txt fetch, or a capture (a document and
    what it loaded) — with the gap from the end of the previous visit's last request (s)."""
    visits: list[list] = []
    for hit in sorted(site.log, key=lambda h: h.start):
        if hit.path == "/robots.txt" or hit.document or not visits or visits[-1][0].path == "/robots.txt":
            visits.append([hit])
        else:
            visits[-1].append(hit)
    return [{"to": nxt[0].path, "gap_s": nxt[0].start - max(h.end for h in prev)}
            for prev, nxt in zip(visits, visits[1:])]


def test_the_longer_delay_holds_from_the_first_request_when_two_crawls_start_together(local_stack):
    site = LoggedSite(("/a", "/b", "/c", "/d"))
    headers = {"Authorization": f"Bearer {local_stack.token()}"}
    wall_minus_mono = time.time() - time.monotonic()
    try:
        with httpx.Client(base_url=local_stack.api_url, headers=headers, timeout=30) as api:
            def start(paths, delay):
                r = api.post("/api/crawls", json={"seeds": [site.url + p for p in paths], "maxDepth": 0,
                                                  "scripts": [], "perHostDelayMs": delay})
                assert r.status_code == 202, r.text
                return r.json()["crawlId"]

            short = start(("/a", "/b"), SHORT_MS)
            deadline = time.monotonic() + 30
            while api.get(f"/api/crawls/{short}").json()["levelState"] != "dispatched":  # claimed alone
                assert time.monotonic() < deadline
                time.sleep(0.02)
            long_ = start(("/c", "/d"), LONG_MS)
            committed_by = time.monotonic()  # its 202 came after its transaction committed
            views, deadline = {}, time.monotonic() + 300
            while any((views := {c: api.get(f"/api/crawls/{c}").json() for c in (short, long_)})[c]["state"]
                      == "running" for c in (short, long_)):
                assert time.monotonic() < deadline, views
                time.sleep(0.5)
    finally:
        site.stop()
    assert [(v["state"], v["pagesCaptured"]) for v in views.values()] == [("succeeded", 2)] * 2, views
    with psycopg.connect(local_stack.info["database_url"]) as conn:
        (registered,) = conn.execute("SELECT started_at FROM crawls WHERE id = %s", (long_,)).fetchone()
    first = min(h.start for h in site.log)
    # the race as it happened: the long crawl registered after the short one's claim, and had committed
    # before its first request (started_at is its transaction's start, not its commit: the 202 is after)
    assert committed_by < first, (registered, datetime.fromtimestamp(first + wall_minus_mono))
    gaps = felt(site)
    print("felt gaps (s):", [(g["to"], round(g["gap_s"], 3)) for g in gaps])
    assert [g["to"] for g in gaps].count("/robots.txt") == 1 and len(gaps) == 5, gaps  # one crawl's after the other's
    assert min(g["gap_s"] for g in gaps) / (LONG_MS / 1000) >= 1.0, gaps
