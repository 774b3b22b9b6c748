"""Issue 29 item 4 through the whole local stack (ledger.crawl.control): stop versus fail, and
pause/resume with every gap the site felt — from its access log — at least the delay across
the pause."""

from __future__ import annotations

import time

import httpx
import pytest

from ledger.crawl.control import STOPPED_BEFORE_CAPTURE
from tests.fixtures.logged_site import LoggedSite

pytestmark = pytest.mark.e2e


def _until(what: str, probe, timeout_s: float = 180.0, every_s: float = 0.2):
    deadline = time.monotonic() + timeout_s
    while not (got := probe()):
        assert time.monotonic() < deadline, f"no {what} within {timeout_s} s"
        time.sleep(every_s)
    return got


def _api(local_stack) -> httpx.Client:
    return httpx.Client(base_url=local_stack.api_url, timeout=30,
                        headers={"Authorization": f"Bearer {local_stack.token()}"})


def test_stop_keeps_the_capture_in_flight_starts_none_and_ends_succeeded(local_stack):
    site = LoggedSite()
    try:
        with _api(local_stack) as api:
            seeds = [f"{site.url}/", f"{site.url}/a", f"{site.url}/b"]
            r = api.post("/api/crawls", json={"seeds": seeds, "maxDepth": 0, "scripts": [],
                                              "perHostDelayMs": 8000})  # one host: the 2nd page waits 8 s
            assert r.status_code == 202, r.text
            crawl_id = r.json()["crawlId"]
            _until("finished capture", lambda: (api.get(f"/api/crawls/{crawl_id}").json().get("levelProgress")
                                                or {}).get("captured"))
            r = api.post(f"/api/crawls/{crawl_id}/stop")
            assert r.json() == {"state": "succeeded", "stopReason": "stopped"}, r.text
            stopped_at = time.monotonic()
            view = api.get(f"/api/crawls/{crawl_id}").json()
            archives = _until("listed archive", lambda: api.get("/api/archives", params={"crawl": crawl_id})
                              .json()["archives"])
            pages = api.get(f"/api/crawls/{crawl_id}/pages").json()["pages"]
            time.sleep(max(0.0, stopped_at + 9 - time.monotonic()))  # past the second page's turn
            failed = api.post("/api/crawls", json={"seeds": [f"{site.url}/a"], "maxDepth": 0, "scripts": [],
                                                   "perHostDelayMs": 100}).json()["crawlId"]
            api.post(f"/api/crawls/{failed}/failed", json={"reason": "broken on purpose"})
            failed_view = api.get(f"/api/crawls/{failed}").json()
    finally:
        site.stop()
    documents = [h for h in site.log if h.document]
    assert [h.path for h in documents if h.start < stopped_at + 9] == ["/"], documents  # no new capture started
    assert (view["state"], view["stopReason"], view["error"], view["pagesCaptured"]) == ("succeeded", "stopped", None, 1)
    assert [(p["state"], p["reason"]) for p in pages] == [
        ("captured", None), ("skipped", STOPPED_BEFORE_CAPTURE), ("skipped", STOPPED_BEFORE_CAPTURE)], pages
    assert [a["sourceUrl"] for a in archives] == [pages[0]["url"]]
    assert (failed_view["state"], failed_view["stopReason"], failed_view["error"]) == (
        "failed", "failed", "broken on purpose")


DELAY_MS = 5000  # long enough that a resume which forgot the gap would be felt below it
LEVEL_1 = ("/a", "/b")


def test_pause_and_resume_keep_every_gap(local_stack):
    site = LoggedSite(LEVEL_1)
    try:
        with _api(local_stack) as api:
            r = api.post("/api/crawls", json={"seeds": [f"{site.url}/"], "maxDepth": 1, "maxPages": 10, "scripts": [],
                                              "perHostDelayMs": DELAY_MS})
            assert r.status_code == 202, r.text
            crawl_id = r.json()["crawlId"]
            asked = api.post(f"/api/crawls/{crawl_id}/pause").json()
            assert asked["state"] in ("pausing", "paused"), asked
            paused = _until("paused crawl", lambda: (v := api.get(f"/api/crawls/{crawl_id}").json())["state"]
                            == "paused" and v)
            documents_paused = [h.path for h in site.log if h.document]
            time.sleep(0.5)  # paused: nothing is captured
            assert [h.path for h in site.log if h.document] == documents_paused == ["/"]
            assert api.post(f"/api/crawls/{crawl_id}/resume").json() == {"state": "running"}
            view = _until("finished crawl", lambda: (v := api.get(f"/api/crawls/{crawl_id}").json())["state"]
                          != "running" and v)
    finally:
        site.stop()
    assert paused["currentDepth"] == 1 and paused["pagesPending"] == len(LEVEL_1), paused
    assert (view["state"], view["pagesCaptured"]) == ("succeeded", 1 + len(LEVEL_1)), view
    felt = site.felt_gaps()
    print("felt gaps (ms):", [round(f * 1000) for f in felt])
    assert len(felt) == len(LEVEL_1) and all(f >= DELAY_MS / 1000 for f in felt), felt  # across the pause too


def test_time_limit_ends_the_crawl_through_the_stack(local_stack):
    """timeLimitS 10 with a 30 s delay: the crawl ends time_limit at 10 s (a loop round later),
    before the second page's turn; whatever the first capture got to (under load it may not have
    started) is admitted, and no capture starts after the end."""
    site = LoggedSite()
    try:
        with _api(local_stack) as api:
            seeds = [f"{site.url}/", f"{site.url}/a", f"{site.url}/b"]
            started = time.monotonic()
            r = api.post("/api/crawls", json={"seeds": seeds, "maxDepth": 0, "scripts": [], "timeLimitS": 10,
                                              "perHostDelayMs": 30000})  # the 2nd page would come after 30 s
            assert r.status_code == 202, r.text
            crawl_id = r.json()["crawlId"]
            view = _until("ended crawl", lambda: (v := api.get(f"/api/crawls/{crawl_id}").json())["state"]
                          != "running" and v, timeout_s=60)
            ended = time.monotonic() - started
            time.sleep(8)  # a capture in flight at the end finishes and is recorded late
            after = api.get(f"/api/crawls/{crawl_id}").json()
            archives = api.get("/api/archives", params={"crawl": crawl_id}).json()["archives"]
            if after["pagesCaptured"] and not archives:  # admitted after the late done's answer
                archives = _until("listed archive", lambda: api.get("/api/archives", params={"crawl": crawl_id})
                                  .json()["archives"], timeout_s=60)
    finally:
        site.stop()
    print("ended after", round(ended, 1), "s;", after["pagesCaptured"], "captured")
    assert (view["state"], view["stopReason"], view["error"]) == ("succeeded", "time_limit", None), view
    assert 10 <= ended < 25, ended
    documents = [h.path for h in site.log if h.document]
    assert documents in ([], ["/"]), documents  # never the second page
    assert after["pagesCaptured"] == len(archives) <= len(documents), (after, archives)
