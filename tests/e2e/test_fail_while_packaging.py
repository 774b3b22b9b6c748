"""Nothing lost when a crawl is failed (issue 24 item 5) through the whole local stack: the crawl
is failed while a capture packages its WACZ (or uploads it) — after its seal, before its answer —
so the flow's job is cancelled and that capture's answer reaches nobody. Its archive is still
admitted and its page says ``captured``; the pages never captured are skipped. The capture
servers hold each capture after its seal with the fault knobs ``slow_package_ms`` /
``slow_upload_ms`` (docs/capture-server.md extension "robots")."""

from __future__ import annotations

import time

import httpx
import psycopg
import pytest

from ledger.crawl.crawls import CLOSED_BEFORE_CAPTURE
from tests.fixtures.logged_site import LoggedSite

pytestmark = pytest.mark.e2e
HOLD_MS = 8000


def _until(what: str, probe, timeout_s: float = 150.0, every_s: float = 0.3):
    deadline = time.monotonic() + timeout_s
    while not (got := probe()):
        assert time.monotonic() < deadline, f"no {what} within {timeout_s} s"
        time.sleep(every_s)
    return got


def _captures(local_stack) -> list[str]:
    return [url for name, url in local_stack.info["services"].items() if name.startswith("capture-")]


def _sealed_task(database_url: str, crawl_id: str) -> str | None:
    """The task of a page whose capture sealed and has not answered (its ``sealed`` event)."""
    with psycopg.connect(database_url) as conn:
        row = conn.execute("SELECT task_id::text FROM crawl_progress WHERE crawl_id = %s AND phase = 'started'"
                           " AND task_id IS NOT NULL LIMIT 1", (crawl_id,)).fetchone()
    return row[0] if row else None


@pytest.mark.parametrize("knob", ["slow_package_ms", "slow_upload_ms"])
def test_failing_while_a_capture_packages_keeps_it(local_stack, knob):
    site = LoggedSite()
    captures = _captures(local_stack)
    try:
        for url in captures:
            assert httpx.put(f"{url}/faults", json={knob: HOLD_MS}).status_code == 200
        with httpx.Client(base_url=local_stack.api_url, timeout=30,
                          headers={"Authorization": f"Bearer {local_stack.token()}"}) as api:
            seeds = [f"{site.url}/", f"{site.url}/a", f"{site.url}/b"]
            r = api.post("/api/crawls", json={"seeds": seeds, "maxDepth": 0, "scripts": [], "perHostDelayMs": 20000})
            assert r.status_code == 202, r.text
            crawl_id = r.json()["crawlId"]
            task = _until("sealed capture", lambda: _sealed_task(local_stack.info["database_url"], crawl_id))
            assert api.post(f"/api/crawls/{crawl_id}/failed", json={"reason": "enough"}).json() == {"closed": True}
            archives = _until("listed archive", lambda: api.get("/api/archives", params={"crawl": crawl_id})
                              .json()["archives"], timeout_s=HOLD_MS / 1000 + 120)
            pages = _until("captured page", lambda: [p for p in api.get(f"/api/crawls/{crawl_id}/pages").json()["pages"]
                                                     if p["state"] == "captured"] and
                           api.get(f"/api/crawls/{crawl_id}/pages").json()["pages"], timeout_s=60)
            view = api.get(f"/api/crawls/{crawl_id}").json()
    finally:
        for url in captures:
            httpx.put(f"{url}/faults", json={knob: 0})
        site.stop()
    assert (view["state"], view["pagesCaptured"]) == ("failed", 1), view
    assert [(p["state"], p["reason"]) for p in pages] == [
        ("captured", None), ("skipped", CLOSED_BEFORE_CAPTURE), ("skipped", CLOSED_BEFORE_CAPTURE)], pages
    assert [a["sourceUrl"] for a in archives] == [pages[0]["url"]] and pages[0]["archiveId"] is not None
    with psycopg.connect(local_stack.info["database_url"]) as conn:  # the archive is the sealed capture's
        assert conn.execute("SELECT count(*) FROM archives WHERE task_id = %s", (task,)).fetchone() == (1,)
