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


async def test_a_final_url_with_credentials_is_stored_and_shown_without_them(settings, s3_server, caplog):
    """A redirect to ``user:pw@`` (the site's choice): the page row, the API and the log never
    hold the password; the URL without it is shown; it is counted as a ``userinfo`` drop and is
    not made known for dedup (a later link to the same path is still a page of its own)."""
    async with open_ledger(settings, s3=store_of(s3_server)) as h:
        crawl_id = await start(h, seeds=["https://a.test/old"], maxDepth=1)
        r = await post(h, crawl_id, report(0, [
            {"url": "https://a.test/old", "status": "captured", "finalUrl": "https://bob:s3cret@a.test/new",
             "links": [{"href": "https://a.test/new"}]}]))
        assert r.status_code == 200, r.text
        assert r.json()["next"] == [{"url": "https://a.test/new", "host": "a.test", "depth": 1}]
        view = (await h.client.get(f"/api/crawls/{crawl_id}", headers=WHO)).json()
        pages = (await h.client.get(f"/api/crawls/{crawl_id}/pages", headers=WHO)).json()["pages"]
    assert view["drops"] == {"userinfo": 1}
    assert pages[0]["finalUrl"] == "https://a.test/new"
    assert rows(settings.database_url, "SELECT final_url, final_url_key FROM crawl_pages WHERE url = 'https://a.test/old'"
                ) == [("https://a.test/new", None)]
    assert "s3cret" not in caplog.text + str(view)
    tables = rows(settings.database_url, "SELECT table_name FROM information_schema.tables WHERE table_schema = 'public'")
    stored = [t for (t,) in tables
              if rows(settings.database_url, f"SELECT count(*) FROM {t} x WHERE x::text LIKE '%%s3cret%%'")[0][0]]
    assert stored == []  # in no table at all
