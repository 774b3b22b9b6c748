"""The schema on real Postgres (idempotent migrate, several running crawls, dedup indexes,
generated hashes) and the operator CLIs: db migrate, targets, scripts."""

from __future__ import annotations

import hashlib
import uuid

import psycopg
import pytest
from typer.testing import CliRunner

from ledger.cli import app as waggle
from ledger.db.migrate import available, migrate

runner = CliRunner()


def cli(db_url, *args, input=None):
    return runner.invoke(waggle, list(args), input=input, env={"WAGGLE_DATABASE_URL": db_url})


def test_migrate_is_idempotent_and_recorded(empty_db_url):
    first = cli(empty_db_url, "db", "migrate")
    assert first.exit_code == 0 and "applied 001_initial.sql" in first.output
    again = cli(empty_db_url, "db", "migrate")
    assert again.exit_code == 0 and "up to date" in again.output
    assert migrate(empty_db_url) == []
    with psycopg.connect(empty_db_url) as conn:
        versions = [r[0] for r in conn.execute("SELECT version FROM schema_migrations ORDER BY version")]
        tables = {r[0] for r in conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")}
    assert versions == [m.version for m in available()]
    assert {"crawls", "crawl_pages", "scripts", "capture_targets", "capture_submissions", "archives",
            "fga_outbox", "crawl_level_reports"} <= tables


def insert_crawl(conn, state="running"):
    crawl_id = uuid.uuid4()
    conn.execute(
        "INSERT INTO crawls (id, seeds, scope, max_depth, max_pages, per_host_delay_ms, host_parallelism, org_id,"
        " requested_by, state, finished_at) VALUES (%s, %s, 'same-origin', 2, 30, 2000, 4, 'acme', 'alice', %s,"
        " CASE WHEN %s = 'running' THEN NULL ELSE now() END)",
        (crawl_id, ["https://a.test/"], state, state))
    return crawl_id


def test_constraints(migrated_db_url):
    with psycopg.connect(migrated_db_url, autocommit=True) as conn:
        crawl_id = insert_crawl(conn)
        insert_crawl(conn, "succeeded")
        insert_crawl(conn)  # issue 12: any number of running crawls (the org limit is the API's)
        assert conn.execute("SELECT count(*) FROM crawls WHERE state = 'running'").fetchone()[0] == 2
        page = "INSERT INTO crawl_pages (crawl_id, url, url_key, depth, host) VALUES (%s, %s, %s, 0, 'a.test')"
        conn.execute(page, (crawl_id, "https://a.test/x", "https://a.test/x"))
        with pytest.raises(psycopg.errors.UniqueViolation) as err:
            conn.execute(page, (crawl_id, "HTTPS://A.test/x", "https://a.test/x"))  # same key, other spelling
        assert err.value.diag.constraint_name == "crawl_pages_crawl_id_url_hash_key"
        (h,) = conn.execute("SELECT url_hash FROM crawl_pages").fetchone()
        assert bytes(h) == hashlib.sha256(b"https://a.test/x").digest()
        arch = ("INSERT INTO archives (task_id, bucket, object_key, source_url, captured_at)"
                " VALUES (%s, 'b', 'k é+ x.wacz', 'https://a.test/', now())")
        conn.execute(arch, (uuid.uuid4(),))
        with pytest.raises(psycopg.errors.UniqueViolation):
            conn.execute(arch, (uuid.uuid4(),))
        with pytest.raises(psycopg.errors.CheckViolation):
            conn.execute("UPDATE crawls SET state = 'canceled' WHERE id = %s", (crawl_id,))
        with pytest.raises(psycopg.errors.CheckViolation):
            conn.execute("INSERT INTO capture_targets (url, org_id) VALUES ('ftp://a.test/', 'acme')")
        conn.execute("INSERT INTO scripts (id, version, phase, source) VALUES ('s', 1, 'behavior', 'é;')")
        assert conn.execute("SELECT sha256 FROM scripts").fetchone()[0] == hashlib.sha256("é;".encode()).hexdigest()


def test_targets_cli(migrated_db_url):
    r = cli(migrated_db_url, "targets", "add", "https://a.test/1#x", "mailto:x@y", "nope", "--org", "acme")
    assert r.exit_code == 1 and "'mailto:x@y'" in r.output and "'nope'" in r.output
    assert cli(migrated_db_url, "targets", "list", "--json").output.strip() == "[]"
    r = cli(migrated_db_url, "targets", "add", "https://a.test/ok", "https://a.test/" + "x" * 2100, "--org", "acme")
    assert r.exit_code == 1 and "longer than 2,048 characters" in r.output and "nothing added" in r.output
    assert cli(migrated_db_url, "targets", "list", "--json").output.strip() == "[]"
    r = cli(migrated_db_url, "targets", "add", "https://a.test/ok", "http://user:secretpw@a.test/", "--org", "acme")
    assert r.exit_code == 1 and "remove user:password@" in r.output and "nothing added" in r.output
    assert "secretpw" not in r.output
    assert cli(migrated_db_url, "targets", "list", "--json").output.strip() == "[]"
    r = cli(migrated_db_url, "targets", "add", "-", "--org", "acme",
            input="# saved\nhttps://a.test/1#x\r\n\nhttps://a.test/2\nhttps://a.test/1\n")
    assert r.exit_code == 0 and r.output.count("added:") == 2
    cli(migrated_db_url, "targets", "add", "https://a.test/1", "--org", "other")
    import json
    rows = json.loads(cli(migrated_db_url, "targets", "list", "--org", "acme", "--json").output)
    assert [(t["url"], t["enabled"]) for t in rows] == [("https://a.test/1", True), ("https://a.test/2", True)]
    first = rows[0]["id"]
    r = cli(migrated_db_url, "targets", "disable", str(first), "999", "--org", "acme")
    assert r.exit_code == 1 and "999" in r.output
    assert cli(migrated_db_url, "targets", "disable", str(first), "--org", "acme").exit_code == 0
    r = cli(migrated_db_url, "targets", "add", "https://a.test/1", "--org", "acme")
    assert "re-enabled" in r.output
    assert cli(migrated_db_url, "targets", "rm", str(first), "--org", "acme").exit_code == 0
    rows = json.loads(cli(migrated_db_url, "targets", "list", "--json").output)
    assert [(t["org"], t["url"]) for t in rows] == [("acme", "https://a.test/2"), ("other", "https://a.test/1")]


def test_scripts_cli(migrated_db_url, tmp_path):
    src = tmp_path / "hello.ts"
    src.write_text("__bh.report('hello', 1);\n")
    r = cli(migrated_db_url, "scripts", "add", "hello", "--file", str(src))
    assert r.exit_code == 0 and "hello@1 added" in r.output
    assert "reused" in cli(migrated_db_url, "scripts", "add", "hello", "--file", str(src)).output
    r = cli(migrated_db_url, "scripts", "add", "hello", "--file", "-", "--options", '{"n": 2}', input="2;")
    assert "hello@2 added" in r.output
    assert cli(migrated_db_url, "scripts", "add", "hello", "--file", str(src), "--options", "[1]").exit_code == 1
    assert cli(migrated_db_url, "scripts", "add", "Bad", "--file", str(src)).exit_code == 1
    assert cli(migrated_db_url, "scripts", "load-defaults").exit_code == 0
    assert cli(migrated_db_url, "scripts", "disable", "hello", "--version", "2").exit_code == 0
    r = cli(migrated_db_url, "scripts", "disable", "nope")
    assert r.exit_code == 1 and "nope" in r.output
    import json
    newest = {(s["id"], s["version"], s["enabled"]) for s in json.loads(cli(migrated_db_url, "scripts", "list", "--json").output)}
    assert newest == {("hello", 2, False), ("autoscroll", 1, True)}
    every = json.loads(cli(migrated_db_url, "scripts", "list", "--all", "--json").output)
    assert len(every) == 3


def test_serve_reports_every_missing_setting_at_once(monkeypatch):
    for name in ("S3_ENDPOINT", "S3_BUCKET", "S3_ACCESS_KEY_ID", "S3_SECRET_ACCESS_KEY", "FGA_STORE_ID", "FGA_MODEL_ID"):
        monkeypatch.delenv(f"WAGGLE_{name}", raising=False)
    r = runner.invoke(waggle, ["serve"], env={"WAGGLE_S3_BUCKET": "", "WAGGLE_STATE_DIR": "/nonexistent-waggle"})
    assert r.exit_code == 1
    for name in ("WAGGLE_S3_ENDPOINT", "WAGGLE_S3_BUCKET", "WAGGLE_FGA_STORE_ID", "WAGGLE_FGA_MODEL_ID"):
        assert name in r.output
    assert "waggle fga deploy" in r.output


def test_embedded_postgres_under_the_state_dir(shared_tmp_path):
    """Without WAGGLE_DATABASE_URL the ledger starts pgserver with its data in state_dir/pg."""
    import pgserver

    from ledger.db.embedded import database_url
    from ledger.settings import Settings

    assert database_url(Settings(_env_file=None, database_url="postgresql://h/db")) == "postgresql://h/db"
    url = database_url(Settings(_env_file=None, state_dir=shared_tmp_path))
    try:
        assert (shared_tmp_path / "pg" / "PG_VERSION").exists()
        assert migrate(url)[0] == "001_initial.sql"
        with psycopg.connect(url) as conn:
            assert conn.execute("SELECT count(*) FROM crawls").fetchone() == (0,)
    finally:
        server = pgserver.get_server(str(shared_tmp_path / "pg"))
        server.cleanup_mode = "stop"  # the ledger leaves it running on purpose; the test does not
        server.cleanup()
