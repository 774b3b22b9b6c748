"""A crawl's outcome when its level reports end it (ledger.crawl.outcome): nothing captured →
``failed`` with what happened to its seeds (every seed host's robots.txt unreachable: round 20's
reason); at least one page captured → ``succeeded``."""

from __future__ import annotations

import pytest

from ledger.crawl.outcome import NO_HOST_REACHED, NOTHING_CAPTURED
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


async def test_one_captured_page_keeps_succeeded(settings):
    async with open_ledger(settings) as h:
        answer, view = await crawl_ending_with(h, ["https://a.test/", "https://b.test/"],
                                               [{"url": "https://a.test/", **UNREACHABLE},
                                                {"url": "https://b.test/", "status": "captured"}])
        assert answer["stopReason"] in ("completed", "max_depth")
        assert view["state"] == "succeeded" and view["error"] is None


# round 21: these ended "succeeded / completed" with nothing archived (a new-user trial)
@pytest.mark.parametrize("result, fate", [
    ({"status": "failed", "skipReason": "failed: HTTP 404", "failureClass": "permanent"},
     "https://b.test/ answered HTTP 404"),
    ({"status": "failed", "skipReason": "http: 500", "failureClass": "transient"}, "https://b.test/ answered HTTP 500"),
    ({"status": "failed", "skipReason": "failed: page.goto: net::ERR_TOO_MANY_REDIRECTS at https://b.test/ (HTTP 302)",
      "failureClass": "permanent"}, "https://b.test/: redirect loop"),
    ({"status": "failed", "skipReason": "timeout: the task budget of 30000 ms ran out during load",
      "failureClass": "transient"}, "https://b.test/: timeout"),
    ({"status": "skipped", "skipReason": "robots", "failureClass": "permanent"}, "https://b.test/: skipped: robots"),
])
async def test_nothing_captured_fails_the_crawl_naming_what_happened(settings, result, fate):
    async with open_ledger(settings) as h:
        answer, view = await crawl_ending_with(h, ["https://a.test/", "https://b.test/"],
                                               [{"url": "https://a.test/", **UNREACHABLE},
                                                {"url": "https://b.test/", **result}])
        assert answer == {"next": [], "stopReason": "failed"}
        assert (view["state"], view["stopReason"], view["pagesCaptured"]) == ("failed", "failed", 0)
        assert view["error"] == f"{NOTHING_CAPTURED}: https://a.test/: robots.txt could not be fetched; {fate}"
        assert view["finishedAt"] is not None


async def test_nothing_captured_names_five_seeds_then_how_many_more(settings):
    seeds = [f"https://a.test/{i}" for i in range(7)]
    async with open_ledger(settings) as h:
        _, view = await crawl_ending_with(h, seeds, [{"url": s, "status": "failed", "skipReason": "failed (HTTP 404)",
                                                      "failureClass": "permanent"} for s in seeds])
        assert view["state"] == "failed"
        assert view["error"].count("answered HTTP 404") == 5
        assert view["error"].endswith("https://a.test/4 answered HTTP 404; and 2 more seed(s)")
