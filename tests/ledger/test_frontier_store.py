"""The frontier store of issue 14 (migrations 100, 101): crawl_pages keeps the guarantees of its
former row-by-row foreign keys, checked once per statement — a page of an unknown crawl is
refused, deleting a crawl deletes its pages (and their progress rows), a page never moves to
another crawl, discovered_from stays NULL — and the migrations keep existing rows."""

from __future__ import annotations

import uuid

import psycopg
import pytest

from ledger.db.migrate import migrate
from tests.ledger.test_frontier_exact import X, Y

_CRAWL = ("INSERT INTO crawls (id, seeds, scope, max_depth, max_pages, per_host_delay_ms, host_parallelism,"
          " org_id, requested_by) VALUES (gen_random_uuid(), %s, 'same-origin', 1, 10, 0, 1, 'acme', 'alice')"
          " RETURNING id")
_PAGES = ("INSERT INTO crawl_pages (crawl_id, url, url_key, depth, host)"
          " SELECT %s, u, u, 1, 'a.test' FROM unnest(%s::text[]) AS u")


def test_a_page_of_an_unknown_crawl_is_refused(migrated_db_url):
    with psycopg.connect(migrated_db_url) as conn:
        crawl = conn.execute(_CRAWL, ([X],)).fetchone()[0]
        conn.execute(_PAGES, (crawl, [X]))
        conn.commit()
        with pytest.raises(psycopg.errors.ForeignKeyViolation) as err:
            conn.execute(_PAGES, (uuid.uuid4(), [Y]))
        assert "crawl_pages_crawl_id_fkey" in str(err.value)
        conn.rollback()
        # one statement naming a known and an unknown crawl is refused as a whole
        with pytest.raises(psycopg.errors.ForeignKeyViolation):
            conn.execute("INSERT INTO crawl_pages (crawl_id, url, url_key, depth, host) VALUES"
                         " (%s, %s, %s, 1, 'a.test'), (%s, %s, %s, 1, 'a.test')",
                         (crawl, Y, Y, uuid.uuid4(), Y, Y))
        conn.rollback()
        assert conn.execute("SELECT url FROM crawl_pages").fetchall() == [(X,)]


def test_deleting_a_crawl_deletes_its_pages_and_their_progress(migrated_db_url):
    with psycopg.connect(migrated_db_url) as conn:
        gone, kept = (conn.execute(_CRAWL, ([X],)).fetchone()[0] for _ in range(2))
        conn.execute(_PAGES, (gone, [X, Y]))
        conn.execute(_PAGES, (kept, [X]))
        page = conn.execute("SELECT id FROM crawl_pages WHERE crawl_id = %s LIMIT 1", (gone,)).fetchone()[0]
        conn.execute("INSERT INTO crawl_progress (page_id, crawl_id, depth, phase) VALUES (%s, %s, 1, 'started')",
                     (page, gone))
        conn.execute("DELETE FROM crawls WHERE id = %s", (gone,))
        assert conn.execute("SELECT crawl_id FROM crawl_pages").fetchall() == [(kept,)]
        assert conn.execute("SELECT count(*) FROM crawl_progress").fetchone()[0] == 0


def test_a_page_cannot_move_and_discovered_from_stays_null(migrated_db_url):
    with psycopg.connect(migrated_db_url) as conn:
        a, b = (conn.execute(_CRAWL, ([X],)).fetchone()[0] for _ in range(2))
        conn.execute(_PAGES, (a, [X]))
        conn.commit()
        with pytest.raises(psycopg.errors.ForeignKeyViolation):
            conn.execute("UPDATE crawl_pages SET crawl_id = %s", (b,))
        conn.rollback()
        conn.execute("UPDATE crawl_pages SET crawl_id = crawl_id, state = 'captured'")  # same crawl: fine
        with pytest.raises(psycopg.errors.CheckViolation):
            conn.execute("UPDATE crawl_pages SET discovered_from = id")


def test_migrations_keep_existing_rows(create_database):
    url = create_database()
    migrate(url, until="100")
    with psycopg.connect(url, autocommit=True) as conn:
        crawl = conn.execute(_CRAWL, ([X],)).fetchone()[0]
        conn.execute(_PAGES, (crawl, [X, Y]))
        conn.execute("UPDATE crawl_pages SET level = 2 WHERE url = %s", (Y,))
        old = conn.execute("SELECT id, url, url_hash, depth, level, state FROM crawl_pages ORDER BY id").fetchall()
    applied = migrate(url)
    assert {"100_pending_level_index_id.sql", "101_crawl_pages_statement_checks.sql"} <= set(applied)
    with psycopg.connect(url) as conn:
        assert conn.execute("SELECT id, url, url_hash, depth, level, state FROM crawl_pages ORDER BY id").fetchall() == old
        # the pending pages of a level come from the new index, in id order
        conn.execute("SET enable_seqscan = off")
        plan = "\n".join(r[0] for r in conn.execute(
            "EXPLAIN SELECT url FROM crawl_pages WHERE crawl_id = %s AND coalesce(level, depth) = 2"
            " AND state = 'pending' AND id <= 10 ORDER BY id", (crawl,)).fetchall())
        assert "crawl_pages_pending_level_id_idx" in plan and "Sort" not in plan


def test_stored_answers_survive_the_json_migration(create_database):
    url = create_database()
    migrate(url, until="102")
    answer = '{"next": [{"url": "https://a.test/é", "host": "a.test", "depth": 1}], "stopReason": null}'
    with psycopg.connect(url, autocommit=True) as conn:
        crawl = conn.execute(_CRAWL, ([X],)).fetchone()[0]
        conn.execute("INSERT INTO crawl_level_reports (crawl_id, depth, report_sha256, answer)"
                     " VALUES (%s, 0, %s, %s::jsonb)", (crawl, "0" * 64, answer))
    assert "102_level_answer_json.sql" in migrate(url)
    with psycopg.connect(url) as conn:
        assert conn.execute("SELECT answer FROM crawl_level_reports").fetchone()[0] == {
            "next": [{"url": "https://a.test/é", "host": "a.test", "depth": 1}], "stopReason": None}
        with pytest.raises(psycopg.errors.CheckViolation):
            conn.execute("INSERT INTO crawl_level_reports (crawl_id, depth, report_sha256, answer)"
                         " VALUES (%s, 1, %s, '[]')", (crawl, "0" * 64))
