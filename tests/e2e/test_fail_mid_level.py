"""Failing a crawl mid-level through the whole local stack (ledger.crawl.salvage): the page
whose capture had finished is recorded captured and its archive listed, although the level never
reported; the pages not yet captured are skipped."""

from __future__ import annotations

import time

import httpx
import pytest

from ledger.crawl.crawls import CLOSED_BEFORE_CAPTURE
from tests.fixtures.logged_site import LoggedSite

pytestmark = pytest.mark.e2e


def _until(what: str, probe, timeout_s: float = 120.0, every_s: float = 0.3):
    deadline = time.monotonic() + timeout_s
    while not (got := probe()):
        assert time.monotonic() < deadline, f"no {what} within {timeout_s} s"
        time.sleep(every_s)
    return got


def test_failing_mid_level_keeps_the_finished_capture_and_lists_its_archive(local_stack):
    site = LoggedSite()
    try:
        with httpx.Client(base_url=local_stack.api_url, timeout=30,
                          headers={"Authorization": f"Bearer {local_stack.token()}"}) as api:
            seeds = [f"{site.url}/", f"{site.url}/a", f"{site.url}/b"]
            r = api.post("/api/crawls", json={"seeds": seeds, "maxDepth": 0, "scripts": [],
                                              "perHostDelayMs": 20000})  # one host: the 2nd page waits 20 s
            assert r.status_code == 202, r.text
            crawl_id = r.json()["crawlId"]
            _until("finished capture", lambda: (api.get(f"/api/crawls/{crawl_id}").json().get("levelProgress")
                                                or {}).get("captured"))
            assert api.post(f"/api/crawls/{crawl_id}/failed", json={"reason": "enough"}).json() == {"closed": True}
            view = api.get(f"/api/crawls/{crawl_id}").json()
            archives = _until("listed archive", lambda: api.get("/api/archives", params={"crawl": crawl_id})
                              .json()["archives"])  # admitted after the answer
            pages = api.get(f"/api/crawls/{crawl_id}/pages").json()["pages"]
    finally:
        site.stop()
    assert (view["state"], view["pagesCaptured"]) == ("failed", 1), view
    assert [(p["state"], p["reason"]) for p in pages] == [
        ("captured", None), ("skipped", CLOSED_BEFORE_CAPTURE), ("skipped", CLOSED_BEFORE_CAPTURE)], pages
    assert [a["sourceUrl"] for a in archives] == [pages[0]["url"]] and pages[0]["archiveId"] is not None
