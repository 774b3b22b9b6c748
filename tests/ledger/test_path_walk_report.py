"""Issue 24 item 7 through the level report route on real Postgres and the S3 stand-in: a
date-path calendar (each day's page links only the next day, ``/cal/2026/01/01/`` →
``/cal/2026/01/02/`` …) is cut after WAGGLE_TRAP_PATH_WALK_LEVELS levels, long before the depth
limit, and the crawl says why (``drops``: ``path_walk``)."""

from __future__ import annotations

import datetime

import pytest

from tests.fixtures.ledger import open_ledger
from tests.ledger.test_level_report_real_web import captured, view_of
from tests.ledger.test_level_reports import post, put_links, report, rows, settings, start, store_of  # noqa: F401

pytestmark = pytest.mark.anyio


def day(n: int) -> str:
    d = datetime.date(2026, 1, 1) + datetime.timedelta(days=n)
    return f"https://cal.test/cal/{d:%Y/%m/%d}/"


async def walk_calendar(h, s3_server, crawl_id) -> tuple[int, str]:
    url, depth = day(0), 0
    while True:
        n = (datetime.date.fromisoformat(url.split("/cal/")[1].strip("/").replace("/", "-")) - datetime.date(2026, 1, 1)).days
        links = put_links(s3_server, [{"href": day(n + 1)}, {"href": "https://cal.test/about"}])
        r = await post(h, crawl_id, report(depth, [captured(url, links)]))
        assert r.status_code == 200, r.text
        nxt = [x["url"] for x in r.json()["next"] if "/cal/" in x["url"]]
        if not nxt:
            return depth, url
        url, depth = nxt[0], depth + 1


async def test_date_path_calendar_is_stopped_by_path_walk(settings, s3_server):
    async with open_ledger(settings, s3=store_of(s3_server)) as h:
        crawl_id = await start(h, seeds=[day(0)], maxDepth=10, maxPages=1000)
        depth, url = await walk_calendar(h, s3_server, crawl_id)
        view = await view_of(h, crawl_id)
    assert depth == 5 and url == day(5)
    assert view["drops"] == {"path_walk": 1}
    shapes = rows(settings.database_url, "SELECT shape, depths FROM crawl_url_shapes WHERE kind = 'path_walk'")
    assert shapes == [("https://cal.test/cal/#/#/#/", [1, 2, 3, 4, 5])]


async def test_path_walk_setting_bounds_and_zero_turns_it_off(settings, s3_server):
    for levels, expected_depth in ((2, 2), (0, 10)):
        custom = settings.model_copy(update={"trap_path_walk_levels": levels})
        async with open_ledger(custom, s3=store_of(s3_server)) as h:
            crawl_id = await start(h, seeds=[day(0)], maxDepth=10, maxPages=1000)
            depth, _ = await walk_calendar(h, s3_server, crawl_id)
            view = await view_of(h, crawl_id)
        assert depth == expected_depth, levels
        assert view["drops"] == ({"path_walk": 1} if levels else {})
