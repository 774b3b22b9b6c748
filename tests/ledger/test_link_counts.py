"""Each page's links: discovered, kept, dropped by reason (issue 24 item 8, last part; decision 232),
in the level report's answer (``pageLinks``) and the page listing (``links``), on real Postgres.
"discovered 1000" on a page whose links were mostly cut says how many could be taken:
``discovered = kept + Σ dropped`` for every page."""

from __future__ import annotations

import pytest

from ledger.crawl import link_counts
from ledger.crawl.urls import parse_http_url
from tests.fixtures.ledger import open_ledger
from tests.ledger.test_level_reports import WHO, post, report, settings, start, store_of  # noqa: F401

pytestmark = pytest.mark.anyio


def _consistent(item: dict) -> bool:
    return item["discovered"] == item["kept"] + sum(item["dropped"].values())


async def _listed(h, crawl_id) -> dict[str, dict]:
    pages = (await h.client.get(f"/api/crawls/{crawl_id}/pages", headers=WHO)).json()["pages"]
    return {p["url"]: p for p in pages}


async def test_a_page_whose_links_were_mostly_cut_says_how_many_could_be_taken(settings, s3_server, fake_webhook):
    """1,000 discovered: 600 on the page (a calendar walk and a few real pages), 400 beyond the
    per-page cap; the crawl's page budget takes 4."""
    links = [{"href": f"https://a.test/p{i}"} for i in range(5)]
    links += [{"href": "https://a.test/p0#top"}, {"href": "https://other.test/"}, {"href": "https://a.test/" + "x" * 2100}]
    links += [{"href": f"https://a.test/cal/{i}"} for i in range(600 - len(links))]
    async with open_ledger(settings, s3=store_of(s3_server)) as h:
        crawl_id = await start(h, seeds=["https://a.test/"], maxDepth=3, maxPages=5)
        r = await post(h, crawl_id, report(0, [{"url": "https://a.test/", "status": "captured", "links": links,
                                                "linksOverflow": 400}]))
        assert r.status_code == 200, r.text
        listed = await _listed(h, crawl_id)
    [item] = r.json()["pageLinks"]
    assert item == {"url": "https://a.test/", "discovered": 1000, "kept": 4,
                    "dropped": {"duplicate": 1, "links_overflow": 400, "max_pages": 593, "out_of_scope": 1,
                                "url_too_long": 1}}
    assert _consistent(item)
    assert listed["https://a.test/"]["links"] == {k: v for k, v in item.items() if k != "url"}
    assert listed["https://a.test/p0"]["links"] is None  # pending: it gave no links yet


async def test_traps_and_known_pages_per_page_and_the_next_level(settings, s3_server, fake_webhook):
    async with open_ledger(settings, s3=store_of(s3_server)) as h:
        crawl_id = await start(h, seeds=["https://a.test/", "https://b.test/"], scope="domain", maxDepth=1,
                               maxPagesPerHost=3)
        r = await post(h, crawl_id, report(0, [
            {"url": "https://a.test/", "status": "captured",
             "links": [{"href": f"https://a.test/p{i}"} for i in range(4)] + [{"href": "https://b.test/"}]},
            {"url": "https://b.test/", "status": "captured",
             "links": [{"href": "https://a.test/p0"}, {"href": "https://b.test/q", "rel": "nofollow"},
                       {"href": "https://b.test/r"}]}]))
        first = r.json()["pageLinks"]
        # the last level: every new link is beyond the depth limit
        r = await post(h, crawl_id, report(1, [
            {"url": "https://a.test/p0", "status": "captured", "links": [{"href": "https://a.test/deeper"},
                                                                         {"href": "https://a.test/p1"}]},
            {"url": "https://a.test/p1", "status": "failed", "skipReason": "http_error: HTTP 404"},
            {"url": "https://b.test/r", "status": "captured"}]))
        last = r.json()
    assert first == [
        {"url": "https://a.test/", "discovered": 5, "kept": 2,  # p0, p1; the host's cap (3 with the seed) cuts p2, p3
         "dropped": {"duplicate": 1, "max_pages_per_host": 2}},  # b.test/: a seed, known
        {"url": "https://b.test/", "discovered": 3, "kept": 1,
         "dropped": {"duplicate": 1, "nofollow": 1}}]  # a.test/p0: named by the page above first
    assert last["stopReason"] == "max_depth" and last["next"] == []
    # no level follows: every link is max_depth, a known one too (nothing is looked up then)
    assert last["pageLinks"] == [{"url": "https://a.test/p0", "discovered": 2, "kept": 0,
                                  "dropped": {"max_depth": 2}}]
    assert all(_consistent(i) for i in first + last["pageLinks"])


def test_tally_without_a_plan_counts_every_unjudged_link_as_known() -> None:
    seeds = [parse_http_url("https://a.test/")]
    result = {"url": "https://a.test/", "links": []}
    with link_counts.collecting() as fates:
        link_counts.note_all(["https://a.test/new"], "max_pages", ["https://a.test/new"])
        link_counts.note("https://a.test/cut", "path_walk")
        link_counts.note("https://a.test/cut", "max_pages")  # the first verdict stays
    [c] = link_counts.tally([(result, [{"href": "https://a.test/new"}, {"href": "https://a.test/cut"},
                                       {"href": "https://a.test/old"}, {"href": "mailto:x@a.test"}], 0)],
                            seeds, "origin", fates, allow_private=True)
    assert c == {"discovered": 4, "kept": 1, "dropped": {"duplicate": 1, "invalid_url": 1, "path_walk": 1}}
    assert link_counts.current() == {}  # collecting ended with the block
