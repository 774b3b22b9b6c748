"""What the collection answer reuses, and what it never reuses (decision 371): a finished crawl's
members are read again as soon as they change (a late admission); a caller's decisions over
more than 50 members are asked again as soon as the ledger writes or deletes a tuple (the
outbox), and otherwise at most ``WAGGLE_COLLECTION_CACHE_S`` old — while every read of a
member's bytes is a live Check (a revoked archive's path answers 404 at once). With ``0``
nothing is reused. Real ledger, Postgres, OpenFGA, S3 stand-in."""

from __future__ import annotations

import json
import time

import psycopg
import pytest

from tests.fixtures.ledger import LedgerHarness, ledger_settings, open_ledger
from tests.fixtures.s3_store import store_of
from tests.ledger.test_crawl_collection import capture, start

pytestmark = pytest.mark.anyio
WHO = LedgerHarness.who()
MANY = 55  # more than authz.BATCH_MAX: the size whose decisions are reused


def share(archive_id: str) -> dict:
    return {"user": "organization:acme#member", "relation": "viewer", "object": f"archive:{archive_id}"}


async def finished_crawl(h, db, s3_server, fga, n: int) -> tuple[str, list[str], list[str]]:
    """A finished crawl of ``n`` captured, viewable pages and two more pages not admitted yet."""
    seeds = [f"https://reuse.test/{i}" for i in range(n + 1)]
    crawl_id = await start(h, seeds)
    ids = [capture(db, s3_server, fga, crawl_id, u)[0] for u in seeds[:n]]
    with psycopg.connect(db) as conn:
        conn.execute("UPDATE crawls SET state = 'succeeded', finished_at = now() WHERE id = %s", (crawl_id,))
    return crawl_id, ids, seeds


async def members(h, crawl_id) -> list[str]:
    r = await h.client.get(f"/api/crawls/{crawl_id}/collection", headers=WHO)
    assert r.status_code == 200, r.text
    return [m["archiveId"] for m in r.json()["resources"]]


async def test_decisions_are_asked_again_when_the_ledger_changes_a_tuple(migrated_db_url, ledger_fga, fake_webhook,
                                                                         s3_server):
    from ledger.authz.outbox import drain_all

    settings = ledger_settings(migrated_db_url, ledger_fga, fake_webhook.url, s3_bucket=s3_server.bucket,
                               collection_cache_s=300)
    db = settings.database_url
    async with open_ledger(settings, s3=store_of(s3_server)) as h:
        crawl_id, ids, _ = await finished_crawl(h, db, s3_server, ledger_fga, MANY)
        assert await members(h, crawl_id) == ids
        ledger_fga.write(deletes=[share(ids[1])])  # behind the ledger's back: OpenFGA alone knows
        listed = await members(h, crawl_id)  # the reused decisions (younger than 300 s)
        read = await h.client.get(f"/api/crawls/{crawl_id}/members/{ids[1]}.wacz", headers=WHO)
        with psycopg.connect(db) as conn:  # the ledger's own change: a revocation through the outbox
            conn.execute("INSERT INTO fga_outbox (payload) VALUES (%s)", (json.dumps({"deletes": [share(ids[2])]}),))
        queued = await members(h, crawl_id)  # queued, not yet in OpenFGA: asked again all the same
        await drain_all(h.services.pool, h.services.authz)
        delivered = await members(h, crawl_id)
    assert listed == ids  # listed from the reused decisions ...
    assert read.status_code == 404  # ... but its bytes are behind a live Check
    assert queued == [i for i in ids if i != ids[1]]  # the outbox moved: OpenFGA asked again
    assert delivered == [i for i in ids if i not in ids[1:3]]


async def test_nothing_is_reused_with_zero_and_decisions_age_out(migrated_db_url, ledger_fga, fake_webhook, s3_server):
    db = migrated_db_url
    zero = ledger_settings(db, ledger_fga, fake_webhook.url, s3_bucket=s3_server.bucket, collection_cache_s=0)
    async with open_ledger(zero, s3=store_of(s3_server)) as h:
        crawl_id, ids, _ = await finished_crawl(h, db, s3_server, ledger_fga, MANY)
        assert await members(h, crawl_id) == ids
        ledger_fga.write(deletes=[share(ids[0])])
        at_once = await members(h, crawl_id)
    short = ledger_settings(db, ledger_fga, fake_webhook.url, s3_bucket=s3_server.bucket, collection_cache_s=2)
    async with open_ledger(short, s3=store_of(s3_server)) as h:
        assert await members(h, crawl_id) == ids[1:]
        ledger_fga.write(deletes=[share(ids[1])])
        within = await members(h, crawl_id)
        time.sleep(2.5)  # real time: past the 2 s window
        after = await members(h, crawl_id)
    assert at_once == ids[1:]
    assert within == ids[1:] and after == ids[2:]


async def test_a_finished_crawls_members_are_read_again_when_they_change(migrated_db_url, ledger_fga, fake_webhook,
                                                                          s3_server):
    """A late admission (the reconciler's) of a finished crawl is in the very next answer, and
    the page it was missing from is no longer said missing."""
    settings = ledger_settings(migrated_db_url, ledger_fga, fake_webhook.url, s3_bucket=s3_server.bucket,
                               collection_cache_s=300)
    db = settings.database_url
    async with open_ledger(settings, s3=store_of(s3_server)) as h:
        crawl_id, ids, seeds = await finished_crawl(h, db, s3_server, ledger_fga, 3)
        first = (await h.client.get(f"/api/crawls/{crawl_id}/collection", headers=WHO)).json()
        late, _ = capture(db, s3_server, ledger_fga, crawl_id, seeds[3])
        second = (await h.client.get(f"/api/crawls/{crawl_id}/collection", headers=WHO)).json()
    assert [m["archiveId"] for m in first["resources"]] == ids
    assert [m["why"] for m in first["missing"]] == ["not-captured"]
    assert [m["archiveId"] for m in second["resources"]] == ids + [late] and second["missing"] == []


async def test_a_member_whose_object_is_gone_does_not_stop_the_members_being_kept(migrated_db_url, ledger_fga,
                                                                                  fake_webhook, s3_server, monkeypatch):
    """An admitted archive whose object the store says is missing is measured once: the finished
    crawl's members are kept all the same, and the next answer asks the store nothing."""
    import ledger.crawl.collection as collection

    settings = ledger_settings(migrated_db_url, ledger_fga, fake_webhook.url, s3_bucket=s3_server.bucket,
                               collection_cache_s=300)
    db = settings.database_url
    measured: list[int] = []
    real = collection.measure_missing

    async def counting(pool, s3, members, *rest):
        measured.append(len(members))
        return await real(pool, s3, members, *rest)

    monkeypatch.setattr(collection, "measure_missing", counting)
    async with open_ledger(settings, s3=store_of(s3_server)) as h:
        crawl_id, ids, _ = await finished_crawl(h, db, s3_server, ledger_fga, 3)
        with psycopg.connect(db) as conn:
            key = conn.execute("SELECT object_key FROM archives WHERE id = %s", (ids[1],)).fetchone()[0]
        s3_server.client().delete_object(Bucket=s3_server.bucket, Key=key)
        first = (await h.client.get(f"/api/crawls/{crawl_id}/collection", headers=WHO)).json()
        second = (await h.client.get(f"/api/crawls/{crawl_id}/collection", headers=WHO)).json()
    assert measured == [3]  # the first answer measured the three; the second reused them
    assert first == second
    gone = next(m for m in first["resources"] if m["archiveId"] == ids[1])
    assert gone["bytes"] is None and gone["hash"] is None  # unknown, said so
