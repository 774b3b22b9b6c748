"""Exact frontier dedup (issue 14 item 2, migration 071): a forced hash collision never drops a
distinct URL — through the level report route, on a later level (the collided URL is found as
known and its row closed by step 1), and for seeds; rows inserted without a url_hash get the old
generated value; the migration keeps existing rows and their hashes."""

from __future__ import annotations

import hashlib

import psycopg
import pytest

import ledger.crawl.frontier as frontier
from ledger.db.migrate import migrate
from tests.ledger.test_level_reports import (
    WHO, open_ledger, post, report, rows, settings, start, store_of,  # noqa: F401 - fixture
)

pytestmark = pytest.mark.anyio
X, Y, Z = "https://a.test/x", "https://a.test/y", "https://a.test/z"


@pytest.fixture
def collide(monkeypatch):
    """SHA-256 as before, except that Y's key hashes to X's."""
    real = frontier.url_hash

    def forced(key: str) -> bytes:
        return real(X) if key == Y else real(key)

    monkeypatch.setattr(frontier, "url_hash", forced)
    return real


async def test_a_collision_keeps_both_urls_across_levels(settings, s3_server, collide):
    async with open_ledger(settings, s3=store_of(s3_server)) as h:
        crawl_id = await start(h, maxDepth=3)
        r = await post(h, crawl_id, report(0, [{"url": "https://a.test/", "status": "captured",
                                                "links": [{"href": X}, {"href": Y}]}]))
        assert r.status_code == 200, r.text
        assert [n["url"] for n in r.json()["next"]] == [X, Y]
        stored = dict(rows(settings.database_url, "SELECT url, url_hash FROM crawl_pages WHERE depth = 1"))
        assert bytes(stored[X]) == collide(X) and bytes(stored[Y]) == frontier.probe_hash(Y, 1)
        # level 1: X and Y reported, their links name both again and one new page
        r = await post(h, crawl_id, report(1, [
            {"url": X, "status": "captured", "links": [{"href": Y}, {"href": Z}]},
            {"url": Y, "status": "captured", "links": [{"href": X}]},
        ]))
        assert r.status_code == 200, r.text
        assert [n["url"] for n in r.json()["next"]] == [Z]
    states = dict(rows(settings.database_url, "SELECT url, state FROM crawl_pages"))
    assert states == {"https://a.test/": "captured", X: "captured", Y: "captured", Z: "pending"}


async def test_colliding_seeds_both_start(settings, s3_server, collide, fake_webhook):
    async with open_ledger(settings, s3=store_of(s3_server)) as h:
        crawl_id = await start(h, seeds=[X, Y, X + "#again"], maxDepth=0)
    assert sorted(u for (u,) in rows(settings.database_url, "SELECT url FROM crawl_pages")) == [X, Y]
    assert [f["url"] for f in fake_webhook.bodies(crawl_id)[0]["frontier"]] == [X, Y]


async def test_the_budget_path_is_exact_too(settings, s3_server, collide):
    """maxPages leaves less room than candidates: known ones are looked up first (by the first
    hash, compared by key), then the plan is inserted through the probe chain."""
    async with open_ledger(settings, s3=store_of(s3_server)) as h:
        crawl_id = await start(h, seeds=["https://a.test/", X], maxDepth=2, maxPages=4)
        r = await post(h, crawl_id, report(0, [
            {"url": "https://a.test/", "status": "captured", "links": [{"href": X}, {"href": Y}, {"href": Z}]},
            {"url": X, "status": "captured", "links": []},
        ]))
        assert r.status_code == 200, r.text
        assert [n["url"] for n in r.json()["next"]] == [Y, Z]


def test_insert_without_url_hash_gets_sha256_of_the_key(migrated_db_url):
    with psycopg.connect(migrated_db_url) as conn:
        crawl = conn.execute(
            "INSERT INTO crawls (id, seeds, scope, max_depth, max_pages, per_host_delay_ms, host_parallelism,"
            " org_id, requested_by) VALUES (gen_random_uuid(), %s, 'same-origin', 1, 10, 0, 1, 'acme', 'alice')"
            " RETURNING id", ([X],)).fetchone()[0]
        conn.execute("INSERT INTO crawl_pages (crawl_id, url, url_key, depth, host) VALUES (%s, %s, %s, 0, 'a.test')",
                     (crawl, X + "#f", X))
        (h,) = conn.execute("SELECT url_hash FROM crawl_pages").fetchone()
        with pytest.raises(psycopg.errors.UniqueViolation):
            conn.execute("INSERT INTO crawl_pages (crawl_id, url, url_key, depth, host) VALUES (%s, %s, %s, 1, 'a.test')",
                         (crawl, X, X))
    assert bytes(h) == hashlib.sha256(X.encode()).digest()


def test_migration_keeps_existing_rows_and_hashes(create_database):
    url = create_database()
    migrate(url, until="071")
    with psycopg.connect(url, autocommit=True) as conn:
        crawl = conn.execute(
            "INSERT INTO crawls (id, seeds, scope, max_depth, max_pages, per_host_delay_ms, host_parallelism,"
            " org_id, requested_by) VALUES (gen_random_uuid(), %s, 'same-origin', 1, 10, 0, 1, 'acme', 'alice')"
            " RETURNING id", ([X],)).fetchone()[0]
        conn.execute("INSERT INTO crawl_pages (crawl_id, url, url_key, depth, host) VALUES (%s, %s, %s, 0, 'a.test'),"
                     " (%s, %s, %s, 1, 'a.test')", (crawl, X, X, crawl, Y, Y))
        old = dict(conn.execute("SELECT url, url_hash FROM crawl_pages").fetchall())
    assert "071_frontier_exact_hash.sql" in migrate(url)
    with psycopg.connect(url) as conn:
        assert dict(conn.execute("SELECT url, url_hash FROM crawl_pages").fetchall()) == old
        generated = conn.execute("SELECT attgenerated FROM pg_attribute WHERE attrelid = 'crawl_pages'::regclass"
                                 " AND attname = 'url_hash'").fetchone()[0]
    assert generated == "" and bytes(old[Y]) == hashlib.sha256(Y.encode()).digest()
