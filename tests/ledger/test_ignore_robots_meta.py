"""``ignoreRobotsMeta`` (issue 24 item 7): recorded on the crawl (migration 190), shown in its view,
sent to the flow only when true, refused when not a boolean — against the real ledger and Postgres."""

from __future__ import annotations

import psycopg
import pytest

from tests.fixtures.ledger import LedgerHarness, ledger_settings, open_ledger

pytestmark = pytest.mark.anyio
WHO = LedgerHarness.who()


@pytest.fixture
def settings(migrated_db_url, ledger_fga, fake_webhook):
    return ledger_settings(migrated_db_url, ledger_fga, fake_webhook.url)


async def _start(h, **body):
    return await h.client.post("/api/crawls", json={"seeds": ["https://a.test/"], "scripts": [], **body}, headers=WHO)


@pytest.mark.parametrize("given, stored", [({}, False), ({"ignoreRobotsMeta": False}, False),
                                           ({"ignoreRobotsMeta": True}, True)])
async def test_recorded_shown_and_sent_to_the_flow(settings, fake_webhook, given, stored):
    async with open_ledger(settings) as h:
        r = await _start(h, **given)
        assert r.status_code == 202, r.text
        crawl_id = r.json()["crawlId"]
        view = (await h.client.get(f"/api/crawls/{crawl_id}", headers=WHO)).json()
    assert view["ignoreRobotsMeta"] is stored
    with psycopg.connect(settings.database_url) as conn:
        assert conn.execute("SELECT ignore_robots_meta FROM crawls WHERE id = %s", (crawl_id,)).fetchone()[0] is stored
    [body] = fake_webhook.bodies(crawl_id)
    assert body.get("ignore_robots_meta", False) is stored
    assert ("ignore_robots_meta" in body) is stored  # absent = honoured: older flows see nothing new


@pytest.mark.parametrize("value", ["yes", 1, None])
async def test_not_a_boolean_is_a_400_naming_the_field(settings, value):
    async with open_ledger(settings) as h:
        r = await _start(h, ignoreRobotsMeta=value)
    assert r.status_code == 400 and "ignoreRobotsMeta" in r.text, r.text
