"""Per-crawl signing (issue 24 item 6; ``POST /api/crawls`` ``signing``, migration 201): stored,
shown in the crawl view and sent to the flow as the level's ``signing``; without it the
deployment's ``WAGGLE_CAPTURE_SIGNING`` applies; ``waggle crawl --sign/--no-sign`` sends it.
Real Postgres, OpenFGA stand-in, fake Windmill webhook over HTTP."""

from __future__ import annotations

import pytest

from ledger.client.cli import build_crawl_body
from tests.fixtures.ledger import LedgerHarness, ledger_settings, open_ledger

pytestmark = pytest.mark.anyio
WHO = LedgerHarness.who()
SEED = ["https://a.test/"]


@pytest.fixture
def settings(migrated_db_url, ledger_fga, fake_webhook):
    return ledger_settings(migrated_db_url, ledger_fga, fake_webhook.url)


@pytest.mark.parametrize("default", [False, True])
@pytest.mark.parametrize("asked", [True, False, None])
async def test_a_crawls_signing_is_stored_shown_and_sent_else_the_default(settings, fake_webhook, asked, default):
    settings = settings.model_copy(update={"capture_signing": default})
    body = {"seeds": SEED, "maxDepth": 0, "scripts": []}
    if asked is not None:
        body["signing"] = asked
    async with open_ledger(settings) as h:
        r = await h.client.post("/api/crawls", json=body, headers=WHO)
        assert r.status_code == 202, r.text
        view = (await h.client.get(f"/api/crawls/{r.json()['crawlId']}", headers=WHO)).json()
    assert view["signing"] is asked
    assert fake_webhook.bodies()[0]["signing"] is (default if asked is None else asked)


def test_the_cli_sends_signing_only_when_asked():
    assert build_crawl_body(SEED, None, None, None, None, None, None, False, sign=True)["signing"] is True
    assert build_crawl_body(SEED, None, None, None, None, None, None, False, sign=False)["signing"] is False
    assert "signing" not in build_crawl_body(SEED, None, None, None, None, None, None, False)
