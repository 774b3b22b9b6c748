"""Issue 29 item 1 through the routes on real Postgres: scope fields stored and shown, a bad
pattern refused at submission (400 naming it), extra hops and excludes through level reports."""

from __future__ import annotations

import pytest

from tests.fixtures.ledger import open_ledger
from tests.ledger.test_level_reports import WHO, post, report, rows, settings, start, store_of  # noqa: F401

pytestmark = pytest.mark.anyio


def captured(url, links):
    return {"url": url, "status": "captured", "links": [{"href": h} for h in links]}


@pytest.mark.parametrize("field, pattern", [("exclude", "(unclosed"), ("include", r"(a)\1"),
                                            ("exclude", "(?<=x)y")])
async def test_bad_pattern_is_a_400_naming_it(settings, s3_server, field, pattern):
    async with open_ledger(settings, s3=store_of(s3_server)) as h:
        r = await h.client.post("/api/crawls", headers=WHO, json={
            "seeds": ["https://a.test/"], "scripts": [], field: ["^https://a\\.test/ok", pattern]})
    assert r.status_code == 400, r.text
    body = r.json()
    assert pattern in body["error"] and field in body["fields"], body
    assert rows(settings.database_url, "SELECT count(*) FROM crawls") == [(0,)]


@pytest.mark.parametrize("body, needle", [({"scope": "any"}, "scope"), ({"extraHops": 11}, "extraHops"),
                                          ({"extraHops": "1"}, "extraHops")])
async def test_bad_scope_settings_are_400(settings, s3_server, body, needle):
    async with open_ledger(settings, s3=store_of(s3_server)) as h:
        r = await h.client.post("/api/crawls", headers=WHO, json={"seeds": ["https://a.test/"], "scripts": [], **body})
    assert r.status_code == 400 and needle in r.json()["fields"], r.text


async def test_scope_fields_stored_and_shown_old_names_still_work(settings, s3_server):
    async with open_ledger(settings, s3=store_of(s3_server)) as h:
        crawl_id = await start(h, scope="prefix", include=["/shared/"], exclude=["\\.pdf$"], extraHops=1)
        view = (await h.client.get(f"/api/crawls/{crawl_id}", headers=WHO)).json()
        old = await start(h, seeds=["https://b.test/"], scope="same-host")
        old_view = (await h.client.get(f"/api/crawls/{old}", headers=WHO)).json()
    assert (view["scope"], view["include"], view["exclude"], view["extraHops"]) == (
        "prefix", ["/shared/"], ["\\.pdf$"], 1)
    assert (old_view["scope"], old_view["include"], old_view["exclude"], old_view["extraHops"]) == ("host", [], [], 0)


async def test_extra_hops_capture_out_of_scope_pages_without_expanding_them(settings, s3_server):
    async with open_ledger(settings, s3=store_of(s3_server)) as h:
        crawl_id = await start(h, seeds=["https://a.test/"], maxDepth=5, extraHops=1, exclude=["/logout$"])
        r = await post(h, crawl_id, report(0, [captured("https://a.test/", [
            "https://a.test/in", "https://b.test/ref", "https://a.test/logout", "https://c.test/x/logout"])]))
        assert r.status_code == 200, r.text
        assert [n["url"] for n in r.json()["next"]] == ["https://a.test/in", "https://b.test/ref"]
        # b.test/ref is one hop out: captured, its links (in scope or not) not followed
        r = await post(h, crawl_id, report(1, [
            captured("https://a.test/in", ["https://a.test/deeper", "https://d.test/"]),
            captured("https://b.test/ref", ["https://b.test/more", "https://a.test/from-b"])]))
        assert [n["url"] for n in r.json()["next"]] == ["https://a.test/deeper", "https://d.test/"]
        view = (await h.client.get(f"/api/crawls/{crawl_id}", headers=WHO)).json()
    assert rows(settings.database_url, "SELECT url, hops FROM crawl_pages ORDER BY id") == [
        ("https://a.test/", 0), ("https://a.test/in", 0), ("https://b.test/ref", 1),
        ("https://a.test/deeper", 0), ("https://d.test/", 1)]
    assert view["drops"]["excluded"] == 2 and view["drops"]["extra_hops"] == 2


async def test_without_extra_hops_out_of_scope_links_are_dropped(settings, s3_server):
    async with open_ledger(settings, s3=store_of(s3_server)) as h:
        crawl_id = await start(h, seeds=["https://a.test/docs/"], scope="prefix", maxDepth=2)
        r = await post(h, crawl_id, report(0, [captured("https://a.test/docs/", [
            "https://a.test/docs/a", "https://a.test/blog/", "https://b.test/docs/a"])]))
    assert [n["url"] for n in r.json()["next"]] == ["https://a.test/docs/a"]
