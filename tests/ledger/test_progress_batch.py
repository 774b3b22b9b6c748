"""Progress events in batches (docs/internals.md "Progress events in batches"): ``{events: [...]}``
records several events of one crawl in one request, in order, one outcome each; a hostile event
refuses the whole batch with its place named. Real Postgres, real OpenFGA server, fake Windmill
webhook."""

from __future__ import annotations

import uuid

import pytest

from tests.ledger.test_progress import NOBODY, SEEDS, WHO, _crawl, settings  # noqa: F401 - fixture
from tests.fixtures.ledger import open_ledger

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def _batch(h, crawl_id, events, headers=WHO):
    return await h.client.post(f"/api/crawls/{crawl_id}/progress", json={"events": events}, headers=headers)


async def _progress(h, crawl_id) -> dict:
    return (await h.client.get(f"/api/crawls/{crawl_id}", headers=WHO)).json()["levelProgress"]


async def test_a_batch_is_recorded_in_order_with_one_outcome_per_event(settings):
    async with open_ledger(settings) as h:
        crawl_id = await _crawl(h)
        r = await _batch(h, crawl_id, [
            {"url": SEEDS[0], "phase": "started"},
            {"url": SEEDS[0], "phase": "done", "status": "captured"},
            {"url": "https://a.test/never-planned", "phase": "started"},  # refused alone
            {"url": SEEDS[0], "phase": "started"},  # late: a started never replaces a done
            {"url": SEEDS[2], "phase": "started"},
        ])
        assert r.status_code == 200, r.text
        results = r.json()["results"]
        assert [x["recorded"] for x in results] == [True, True, False, True, True]
        assert results[2]["status"] == 409 and "pending page" in results[2]["error"]
        progress = await _progress(h, crawl_id)
        assert (progress["done"], progress["captured"]) == (1, 1)
        assert [c["url"] for c in progress["capturing"]] == [SEEDS[2]]
        # the single-event body is unchanged
        assert (await h.client.post(f"/api/crawls/{crawl_id}/progress", headers=WHO,
                                    json={"url": SEEDS[1], "phase": "started"})).json() == {"recorded": True}


@pytest.mark.parametrize("events,status,needle", [
    ([], 400, "events"),
    ([{"url": SEEDS[0], "phase": "started"}] * 33, 400, "events"),
    ([{"url": SEEDS[0], "phase": "started"}, {"url": SEEDS[1], "phase": "done"}], 400, "events.1"),
    ([{"url": SEEDS[0], "phase": "started"}, {"url": SEEDS[1], "phase": "started", "x": 1}], 400,
     "unknown field events.1.x"),
    ([{"url": SEEDS[0], "phase": "started"}, "started"], 400, "events.1"),
    ([{"url": "https://a.test/\x00", "phase": "started"}], 400, "NUL"),
    ([{"url": SEEDS[0], "phase": "started"},
      {"url": SEEDS[1], "phase": "done", "status": "captured",
       "links": [{"href": f"https://a.test/{i}"} for i in range(1001)]}], 413, "events.1.links"),
])
async def test_a_hostile_event_refuses_the_whole_batch(settings, events, status, needle):
    async with open_ledger(settings) as h:
        crawl_id = await _crawl(h)
        r = await _batch(h, crawl_id, events)
        assert r.status_code == status and needle in r.json()["error"], r.text
        progress = await _progress(h, crawl_id)
        assert progress["capturing"] == [] and progress["done"] == 0


async def test_a_batch_is_authorized_as_one_event(settings):
    async with open_ledger(settings) as h:
        crawl_id = await _crawl(h)
        events = [{"url": SEEDS[0], "phase": "started"}]
        assert (await _batch(h, crawl_id, events, headers=NOBODY)).status_code == 404
        assert (await _batch(h, crawl_id, events, headers={})).status_code == 401
        assert (await _batch(h, str(uuid.uuid4()), events)).status_code == 404
        assert (await _progress(h, crawl_id))["capturing"] == []
