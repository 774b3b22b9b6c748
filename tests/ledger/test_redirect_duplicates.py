"""A redirect target listed in the same level (f/waggle/crawl_host.py ``REDIRECT_DUPLICATE``):
the flow reports it ``skipped`` with the reason naming the page it was captured through — an
outcome the level report always had — and the ledger records it so: one capture, no failure."""

from __future__ import annotations

import pytest

from f.waggle.crawl_host import REDIRECT_DUPLICATE
from tests.fixtures.ledger import open_ledger
from tests.ledger.test_level_reports import WHO, post, report, rows, settings, start, store_of  # noqa: F401

pytestmark = pytest.mark.anyio


async def test_a_skipped_redirect_target_is_recorded_as_the_flow_reported_it(settings, s3_server):
    async with open_ledger(settings, s3=store_of(s3_server)) as h:
        crawl_id = await start(h, seeds=["https://a.test/old", "https://a.test/new"], maxDepth=0)
        r = await post(h, crawl_id, report(0, [
            {"url": "https://a.test/old", "status": "captured", "finalUrl": "https://a.test/new"},
            {"url": "https://a.test/new", "status": "skipped", "skipReason": REDIRECT_DUPLICATE + "https://a.test/old"},
        ]))
        assert r.status_code == 200, r.text
        view = (await h.client.get(f"/api/crawls/{crawl_id}", headers=WHO)).json()
        assert (view["state"], view["pagesCaptured"], view["pagesSkipped"], view["failures"]) == ("succeeded", 1, 1, [])
        skipped = (await h.client.get(f"/api/crawls/{crawl_id}/pages?state=skipped", headers=WHO)).json()["pages"]
        assert [(p["url"], p["reason"]) for p in skipped] == [
            ("https://a.test/new", "already captured in this level as the redirect target of https://a.test/old")]
    assert rows(settings.database_url, "SELECT url, state, final_url FROM crawl_pages ORDER BY id") == [
        ("https://a.test/old", "captured", "https://a.test/new"), ("https://a.test/new", "skipped", None)]
