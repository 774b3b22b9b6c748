"""Per-crawl capture formats (``POST /api/crawls`` ``formats``, migration 151): validated with
a 400 that says why and creates nothing; stored, shown in the crawl view and sent to the flow
as the level's ``capture_formats`` (``links`` still forced on while levels follow). Real
Postgres, real OpenFGA server, fake Windmill webhook over HTTP."""

from __future__ import annotations

import psycopg
import pytest

from ledger.client.cli import build_crawl_body
from tests.fixtures.ledger import LedgerHarness, ledger_settings, open_ledger

pytestmark = pytest.mark.anyio
WHO = LedgerHarness.who()
SEED = ["https://a.test/"]


@pytest.fixture
def settings(migrated_db_url, ledger_fga, fake_webhook):
    return ledger_settings(migrated_db_url, ledger_fga, fake_webhook.url)


@pytest.mark.parametrize("formats,needle", [
    (["png"], 'formats must include "wacz"'),
    (["wacz", "wacz"], "list each format once"),
    (["wacz", "gif"], "formats"),
    ([], "formats"),
    ("wacz,png", "formats"),
    (["wacz", "", "png"], "empty format at position 1"),  # `--formats wacz,,png`
    (["wacz", "png", " "], "empty format at position 2"),
])
async def test_bad_formats_are_400_with_the_reason_and_nothing_is_created(settings, fake_webhook, formats, needle):
    async with open_ledger(settings) as h:
        r = await h.client.post("/api/crawls", json={"seeds": SEED, "formats": formats}, headers=WHO)
    assert r.status_code == 400, r.text
    assert needle in r.json()["error"] and "formats" in r.json()["fields"]
    with psycopg.connect(settings.database_url) as conn:
        assert conn.execute("SELECT count(*) FROM crawls").fetchone()[0] == 0
    assert fake_webhook.bodies() == []


@pytest.mark.parametrize("max_depth,links", [(0, False), (1, True)])
async def test_chosen_formats_are_stored_shown_and_sent_to_the_flow(settings, fake_webhook, max_depth, links):
    async with open_ledger(settings) as h:
        r = await h.client.post("/api/crawls", json={"seeds": SEED, "formats": ["wacz", "png", "webp"],
                                                     "maxDepth": max_depth, "scripts": []}, headers=WHO)
        assert r.status_code == 202, r.text
        view = (await h.client.get(f"/api/crawls/{r.json()['crawlId']}", headers=WHO)).json()
    assert view["formats"] == ["png", "webp", "wacz"]
    assert fake_webhook.bodies()[0]["capture_formats"] == {
        "png": True, "webp": True, "html": False, "links": links, "mhtml": False, "wacz": True}


async def test_without_formats_the_deployment_default_applies(settings, fake_webhook):
    async with open_ledger(settings) as h:
        r = await h.client.post("/api/crawls", json={"seeds": SEED, "maxDepth": 0, "scripts": []}, headers=WHO)
        view = (await h.client.get(f"/api/crawls/{r.json()['crawlId']}", headers=WHO)).json()
    assert view["formats"] is None
    assert fake_webhook.bodies()[0]["capture_formats"] == {
        "png": False, "webp": False, "html": False, "links": False, "mhtml": False, "wacz": True}


def test_the_cli_sends_the_formats_as_a_list():
    body = build_crawl_body(SEED, None, None, None, None, None, None, False, "wacz, png")
    assert body["formats"] == ["wacz", "png"]
    empty = build_crawl_body(SEED, None, None, None, None, None, None, False, "wacz,,png")
    assert empty["formats"] == ["wacz", "", "png"]  # sent as given: the ledger's 400 names it
    assert "formats" not in build_crawl_body(SEED, None, None, None, None, None, None, False)
