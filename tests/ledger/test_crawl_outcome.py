"""A crawl's outcome when its level reports end it (ledger.crawl.outcome): nothing captured and
every seed host's robots.txt unreachable → ``failed`` with the reason; anything captured, or
pages that failed for another reason → ``succeeded`` as before."""

from __future__ import annotations

import pytest

from ledger.crawl.outcome import NO_HOST_REACHED
from tests.fixtures.ledger import LedgerHarness, ledger_settings, open_ledger

pytestmark = pytest.mark.anyio
WHO = LedgerHarness.who()
NO_SCRIPTS = {"typescript": "6.0.3", "hostTypes": "v0.2.0", "scripts": []}
UNREACHABLE = {"status": "skipped", "skipReason": "robots-unreachable", "failureClass": "transient"}


@pytest.fixture
def settings(migrated_db_url, ledger_fga, fake_webhook):
    return ledger_settings(migrated_db_url, ledger_fga, fake_webhook.url)


async def crawl_ending_with(h, seeds: list[str], results: list[dict]) -> tuple[dict, dict]:
    r = await h.client.post("/api/crawls", json={"seeds": seeds, "scripts": [], "maxDepth": 1}, headers=WHO)
    assert r.status_code == 202, r.text
    crawl_id = r.json()["crawlId"]
    body = {"depth": 0, "results": results, "compiled": NO_SCRIPTS}
    answer = await h.client.post(f"/api/crawls/{crawl_id}/pages", json=body, headers=WHO)
    assert answer.status_code == 200, answer.text
    again = await h.client.post(f"/api/crawls/{crawl_id}/pages", json=body, headers=WHO)
    assert again.json() == answer.json()  # a re-sent report is answered as before
    view = (await h.client.get(f"/api/crawls/{crawl_id}", headers=WHO)).json()
    return answer.json(), view


async def test_no_seed_host_reached_fails_the_crawl_with_the_reason(settings):
    seeds = ["https://b.test/", "https://a.test/", "https://a.test/more"]
    async with open_ledger(settings) as h:
        answer, view = await crawl_ending_with(h, seeds, [{"url": s, **UNREACHABLE} for s in seeds])
        assert answer == {"next": [], "stopReason": "failed"}
        assert (view["state"], view["stopReason"], view["pagesCaptured"]) == ("failed", "failed", 0)
        assert view["error"].startswith(f"{NO_HOST_REACHED}: robots.txt of a.test, b.test could not be fetched")
        assert view["finishedAt"] is not None
        listed = (await h.client.get("/api/crawls", headers=WHO)).json()["crawls"][0]
        assert (listed["state"], listed["stopReason"]) == ("failed", "failed")
        # a failed crawl frees its place and takes no more reports, as one failed on request
        r = await h.client.post(f"/api/crawls/{view['crawlId']}/pages",
                                json={"depth": 1, "results": [], "compiled": NO_SCRIPTS}, headers=WHO)
        assert r.status_code == 409


@pytest.mark.parametrize("other", [
    {"url": "https://b.test/", "status": "captured"},  # one host answered: what it gave is kept
    {"url": "https://b.test/", "status": "failed", "skipReason": "http: 500", "failureClass": "transient"},
    {"url": "https://b.test/", "status": "skipped", "skipReason": "robots", "failureClass": "permanent"},
])
async def test_a_reached_host_keeps_succeeded(settings, other):
    async with open_ledger(settings) as h:
        answer, view = await crawl_ending_with(h, ["https://a.test/", "https://b.test/"],
                                               [{"url": "https://a.test/", **UNREACHABLE}, other])
        assert answer["stopReason"] in ("completed", "max_depth")
        assert view["state"] == "succeeded" and view["error"] is None
