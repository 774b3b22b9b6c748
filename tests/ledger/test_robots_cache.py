"""robots.txt cache per crawl (docs/internals.md "robots.txt cache"): the level report's optional
``robots`` field is stored per (crawl, host) and the next level's dispatch sends the young
outcomes of its hosts (once per host), never an unreachable one nor one older than
WAGGLE_ROBOTS_CACHE_TTL_S; a hostile field is refused with a 4xx reason and nothing recorded."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from tests.fixtures.ledger import ledger_settings
from tests.ledger.test_level_reports import (  # noqa: F401 - settings is a fixture
    WHO, open_ledger, post, report, rows, settings, start, store_of,
)

pytestmark = pytest.mark.anyio
BODY = "user-agent: *\ndisallow: /private\ncrawl-delay: 3\n"


def iso(delta_s: float = 0.0) -> str:
    moment = datetime.now(timezone.utc) + timedelta(seconds=delta_s)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def entry(host="a.test", state="allowed", body=BODY, at=None):
    return {"host": host, "fetchedAt": at or iso(-1), "state": state, "body": body}


def level0(robots, links=({"href": "https://a.test/n"}, {"href": "https://a.test/m"})):
    body = report(0, [{"url": "https://a.test/", "status": "captured", "links": list(links)}])
    if robots is not None:
        body["robots"] = robots
    return body


async def test_stored_per_host_and_sent_once_per_host_to_the_next_level(settings, s3_server, fake_webhook):
    async with open_ledger(settings, s3=store_of(s3_server)) as h:
        crawl_id = await start(h, maxDepth=2)
        assert "robots" not in fake_webhook.bodies(crawl_id)[0]  # level 0: nothing cached yet
        r = await post(h, crawl_id, level0([entry(), entry("stranger.test", "unavailable", None)]))
        assert r.status_code == 200 and len(r.json()["next"]) == 2, r.text
        level1 = fake_webhook.bodies(crawl_id)[-1]
    assert level1["depth"] == 1 and len(level1["frontier"]) == 2
    # one entry for the host of both URLs; the host the level did not plan was ignored
    assert level1["robots"] == [{"host": "a.test", "fetchedAt": level1["robots"][0]["fetchedAt"], "state": "allowed",
                                 "body": BODY}]  # young: no stale mark
    assert rows(settings.database_url, "SELECT host, state, depth FROM crawl_robots") == [("a.test", "allowed", 0)]


@pytest.mark.parametrize("state,body", [("unreachable", None), ("unavailable", None)])
async def test_unreachable_is_kept_but_never_sent(settings, s3_server, fake_webhook, state, body):
    async with open_ledger(settings, s3=store_of(s3_server)) as h:
        crawl_id = await start(h, maxDepth=2)
        r = await post(h, crawl_id, level0([entry(state=state, body=body)]))
        assert r.status_code == 200, r.text
        level1 = fake_webhook.bodies(crawl_id)[-1]
    assert rows(settings.database_url, "SELECT state FROM crawl_robots") == [(state,)]
    sent = [e["state"] for e in level1.get("robots", [])]
    assert sent == ([] if state == "unreachable" else ["unavailable"])  # unreachable is transient: fetch again


@pytest.mark.parametrize("body,sent", [
    ("user-agent: *\ndisallow: /private\n", None),  # expired: not sent, the flow fetches
    (BODY, True),  # expired with a Crawl-delay: sent stale, only so the new fetch waits it
])
async def test_older_than_the_ttl_is_not_used(migrated_db_url, ledger_fga, fake_webhook, s3_server, body, sent):
    settings = ledger_settings(migrated_db_url, ledger_fga, fake_webhook.url, s3_bucket=s3_server.bucket,
                               robots_cache_ttl_s=60)
    async with open_ledger(settings, s3=store_of(s3_server)) as h:
        crawl_id = await start(h, maxDepth=2)
        r = await post(h, crawl_id, level0([entry(at=iso(-61), body=body)]))  # fetched 61 s ago, TTL 60 s
        assert r.status_code == 200, r.text
        level1 = fake_webhook.bodies(crawl_id)[-1]
    assert rows(settings.database_url, "SELECT count(*) FROM crawl_robots") == [(1,)]
    assert [e.get("stale") for e in level1.get("robots", [])] == ([] if sent is None else [True])


async def test_ttl_zero_turns_the_cache_off_and_the_ttl_is_at_most_a_day(migrated_db_url, ledger_fga, fake_webhook,
                                                                         s3_server):
    from pydantic import ValidationError

    from ledger.settings import Settings

    with pytest.raises(ValidationError):
        Settings(_env_file=None, robots_cache_ttl_s=86401)
    settings = ledger_settings(migrated_db_url, ledger_fga, fake_webhook.url, s3_bucket=s3_server.bucket,
                               robots_cache_ttl_s=0)
    async with open_ledger(settings, s3=store_of(s3_server)) as h:
        crawl_id = await start(h, maxDepth=2)
        assert (await post(h, crawl_id, level0([entry(body="user-agent: *\nallow: /\n")]))).status_code == 200
        assert "robots" not in fake_webhook.bodies(crawl_id)[-1]


async def test_a_later_fetch_replaces_an_earlier_one_never_the_reverse(settings, s3_server, fake_webhook):
    async with open_ledger(settings, s3=store_of(s3_server)) as h:
        crawl_id = await start(h, maxDepth=3)
        assert (await post(h, crawl_id, level0([entry(at=iso(-5))]))).status_code == 200
        # level 1 (a.test/n, a.test/m) reports an older copy (a stale flow): the stored one stays
        r = await post(h, crawl_id, report(1, [{"url": "https://a.test/n", "status": "captured", "links": []},
                                               {"url": "https://a.test/m", "status": "captured",
                                                "links": [{"href": "https://a.test/z"}]}]) | {
            "robots": [entry(at=iso(-50), state="unavailable", body=None)]})
        assert r.status_code == 200, r.text
        assert rows(settings.database_url, "SELECT state FROM crawl_robots") == [("allowed",)]
        r = await post(h, crawl_id, report(2, [{"url": "https://a.test/z", "status": "captured", "links": []}]) | {
            "robots": [entry(state="unavailable", body=None)]})
        assert r.status_code == 200, r.text
    assert rows(settings.database_url, "SELECT state, depth FROM crawl_robots") == [("unavailable", 2)]


@pytest.mark.parametrize("robots,status,needle", [
    ([entry(state="maybe")], 400, "robots.0.state"),
    ([entry(at="2026-09-19T14:53:36")], 400, "robots.0.fetchedAt"),  # no offset
    ([entry(at=iso(3600))], 400, "lies in the future"),
    ([entry(state="unavailable")], 400, "body is required when state is allowed and must be null otherwise"),
    ([entry(body=None)], 400, "body is required"),
    ([entry(), entry()], 400, "appears twice"),
    ([entry(host="a.test/x")], 400, "robots.0.host"),
    ([entry(host="")], 400, "robots.0.host"),
    ([entry(body=123)], 400, "robots.0: must be a string, not 123"),
    ([entry() | {"extra": 1}], 400, "unknown field robots.0.extra"),
    ({"a.test": entry()}, 400, "robots"),
    ([entry(body="disallow: /x\n" * 50_000)], 413, "robots.0.body has 650000 characters; at most 524288"),
    ([entry(body="x\u0000")], 400, "NUL"),
])
async def test_hostile_robots_field_refused_and_nothing_recorded(settings, s3_server, fake_webhook, robots, status,
                                                                 needle):
    async with open_ledger(settings, s3=store_of(s3_server)) as h:
        crawl_id = await start(h, maxDepth=2)
        r = await post(h, crawl_id, level0(robots))
        assert r.status_code == status and needle in r.json()["error"], r.text
        assert len(fake_webhook.bodies(crawl_id)) == 1  # no next level
    assert rows(settings.database_url, "SELECT count(*) FROM crawl_robots") == [(0,)]
    assert rows(settings.database_url, "SELECT count(*) FROM crawl_level_reports") == [(0,)]


async def test_too_many_entries_or_bodies_413(migrated_db_url, ledger_fga, fake_webhook, s3_server):
    settings = ledger_settings(migrated_db_url, ledger_fga, fake_webhook.url, s3_bucket=s3_server.bucket,
                               report_results_max=3)
    many = [entry(f"h{i}.test") for i in range(4)]
    big = [entry(f"h{i}.test", body="d" * 500_000) for i in range(17)]  # 8.5 M characters in all
    async with open_ledger(settings, s3=store_of(s3_server)) as h:
        crawl_id = await start(h, maxDepth=2)
        r = await post(h, crawl_id, level0(many))
        assert r.status_code == 413 and "at most 3 (WAGGLE_REPORT_RESULTS_MAX" in r.json()["error"], r.text
    settings = ledger_settings(migrated_db_url, ledger_fga, fake_webhook.url, s3_bucket=s3_server.bucket)
    async with open_ledger(settings, s3=store_of(s3_server)) as h:
        r = await post(h, crawl_id, level0(big))
        assert r.status_code == 413 and "8388608 in one report" in r.json()["error"], r.text
    assert rows(settings.database_url, "SELECT count(*) FROM crawl_robots") == [(0,)]
