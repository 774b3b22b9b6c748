"""``POST /api/crawls/{id}/progress`` and ``levelProgress`` in ``GET /api/crawls/{id}`` (issue 15):
real Postgres, real OpenFGA server, fake Windmill webhook."""

from __future__ import annotations

import uuid

import pytest

from tests.fixtures.ledger import LedgerHarness, ledger_settings, open_ledger

pytestmark = pytest.mark.anyio
WHO = LedgerHarness.who()
NOBODY = LedgerHarness.who("mallory", "acme")
SEEDS = ["https://a.test/", "https://a.test/x", "https://b.test/"]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def settings(migrated_db_url, ledger_fga, fake_webhook):
    return ledger_settings(migrated_db_url, ledger_fga, fake_webhook.url)


async def _crawl(h) -> str:
    r = await h.client.post("/api/crawls", json={"seeds": SEEDS, "maxDepth": 1, "scripts": []}, headers=WHO)
    assert r.status_code == 202, r.text
    return r.json()["crawlId"]


async def _event(h, crawl_id: str, headers=WHO, **body):
    return await h.client.post(f"/api/crawls/{crawl_id}/progress", json=body, headers=headers)


async def test_events_show_the_level_live_and_are_idempotent(settings):
    async with open_ledger(settings) as h:
        crawl_id = await _crawl(h)
        view = (await h.client.get(f"/api/crawls/{crawl_id}", headers=WHO)).json()
        assert view["levelProgress"] == {"depth": 0, "planned": 3, "done": 0, "captured": 0, "failed": 0,
                                         "capturing": [], "finishing": [], "queued": []}
        assert (await _event(h, crawl_id, url=SEEDS[0], phase="started")).json() == {"recorded": True}
        assert (await _event(h, crawl_id, url=SEEDS[2], phase="started")).status_code == 200
        progress = (await h.client.get(f"/api/crawls/{crawl_id}", headers=WHO)).json()["levelProgress"]
        assert [(c["host"], c["url"]) for c in progress["capturing"]] == [("a.test", SEEDS[0]), ("b.test", SEEDS[2])]
        for _ in range(2):  # a re-sent event changes nothing
            assert (await _event(h, crawl_id, url=SEEDS[0], phase="done", status="captured")).status_code == 200
        assert (await _event(h, crawl_id, url=SEEDS[0], phase="started")).status_code == 200  # late: ignored
        assert (await _event(h, crawl_id, url=SEEDS[2], phase="done", status="failed")).status_code == 200
        progress = (await h.client.get(f"/api/crawls/{crawl_id}", headers=WHO)).json()["levelProgress"]
        assert (progress["done"], progress["captured"], progress["failed"], progress["capturing"]) == (2, 1, 1, [])


async def test_a_held_capture_is_queued_then_capturing_then_finishing(settings):
    """Decision 401: a capture submitted held behind its host's loading page is listed ``queued``
    (nothing of it reached the site), ``capturing`` once released, ``finishing`` once sealed; one
    host's pages are never two ``capturing`` at once, and no phase moves back."""
    async with open_ledger(settings) as h:
        crawl_id = await _crawl(h)

        async def lists() -> tuple[list, list, list]:
            p = (await h.client.get(f"/api/crawls/{crawl_id}", headers=WHO)).json()["levelProgress"]
            return tuple([c["url"] for c in p[k]] for k in ("capturing", "finishing", "queued"))

        task = str(uuid.uuid4())
        assert (await _event(h, crawl_id, url=SEEDS[0], phase="started")).status_code == 200
        assert (await _event(h, crawl_id, url=SEEDS[1], phase="queued")).json() == {"recorded": True}
        assert await lists() == ([SEEDS[0]], [], [SEEDS[1]])
        assert (await _event(h, crawl_id, url=SEEDS[0], phase="sealed", taskId=task)).status_code == 200
        assert (await _event(h, crawl_id, url=SEEDS[1], phase="started")).status_code == 200
        assert await lists() == ([SEEDS[1]], [SEEDS[0]], [])
        assert (await _event(h, crawl_id, url=SEEDS[1], phase="queued")).status_code == 200  # late: ignored
        assert (await _event(h, crawl_id, url=SEEDS[0], phase="queued")).status_code == 200  # ignored too
        assert await lists() == ([SEEDS[1]], [SEEDS[0]], [])
        assert (await _event(h, crawl_id, url=SEEDS[0], phase="done", status="captured")).status_code == 200
        assert (await _event(h, crawl_id, url=SEEDS[1], phase="done", status="failed")).status_code == 200
        assert (await _event(h, crawl_id, url=SEEDS[1], phase="queued")).status_code == 200  # after done: ignored
        assert (await _event(h, crawl_id, url=SEEDS[2], phase="queued")).status_code == 200
        assert (await _event(h, crawl_id, url=SEEDS[2], phase="done", status="captured")).status_code == 200
        progress = (await h.client.get(f"/api/crawls/{crawl_id}", headers=WHO)).json()["levelProgress"]
        assert (progress["done"], progress["captured"], progress["failed"]) == (3, 2, 1)
        assert (progress["capturing"], progress["finishing"], progress["queued"]) == ([], [], [])
        bad = await _event(h, crawl_id, url=SEEDS[2], phase="queued", status="captured")
        assert bad.status_code == 400 and "status" in bad.json()["error"]


@pytest.mark.parametrize("body,needle", [
    ({"url": SEEDS[0], "phase": "done"}, "status"),
    ({"url": SEEDS[0], "phase": "started", "status": "captured"}, "status"),
    ({"url": SEEDS[0], "phase": "finished"}, "phase"),
    ({"url": "", "phase": "started"}, "url"),
    ({"url": "x" * 9000, "phase": "started"}, "url"),
    ({"url": "https://a.test/\x00", "phase": "started"}, "NUL"),
    ({"url": SEEDS[0], "phase": "started", "extra": 1}, "extra"),
])
async def test_hostile_events_are_400_and_store_nothing(settings, body, needle):
    async with open_ledger(settings) as h:
        crawl_id = await _crawl(h)
        r = await _event(h, crawl_id, **body)
        assert r.status_code == 400 and needle in r.json()["error"], r.text
        view = (await h.client.get(f"/api/crawls/{crawl_id}", headers=WHO)).json()
        assert view["levelProgress"]["capturing"] == [] and view["levelProgress"]["done"] == 0


async def test_who_may_post_and_what_is_refused(settings):
    async with open_ledger(settings) as h:
        crawl_id = await _crawl(h)
        assert (await _event(h, crawl_id, headers=NOBODY, url=SEEDS[0], phase="started")).status_code == 404
        assert (await _event(h, crawl_id, headers={}, url=SEEDS[0], phase="started")).status_code == 401
        unknown = await _event(h, str(uuid.uuid4()), url=SEEDS[0], phase="started")
        assert unknown.status_code == 404
        not_in_level = await _event(h, crawl_id, url="https://a.test/elsewhere", phase="started")
        assert not_in_level.status_code == 409 and "not a pending page" in not_in_level.json()["error"]
        r = await h.client.post(f"/api/crawls/{crawl_id}/failed", json={"reason": "stop"}, headers=WHO)
        assert r.status_code == 200
        closed = await _event(h, crawl_id, url=SEEDS[0], phase="started")
        assert closed.status_code == 409 and "not running" in closed.json()["error"]
        view = (await h.client.get(f"/api/crawls/{crawl_id}", headers=WHO)).json()
        assert "levelProgress" not in view
