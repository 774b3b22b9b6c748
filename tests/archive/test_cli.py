"""``waggle reconcile`` against real Postgres and S3."""

from __future__ import annotations

import json
import uuid

import psycopg
from typer.testing import CliRunner

from ledger.cli import app
from tests.archive.helpers import manifest, put_json

runner = CliRunner()


def test_reconcile_command(s3_server, migrated_db_url, monkeypatch) -> None:
    for k, v in {"WAGGLE_DATABASE_URL": migrated_db_url, "WAGGLE_S3_ENDPOINT": s3_server.endpoint,
                 "WAGGLE_S3_BUCKET": s3_server.bucket, "WAGGLE_S3_ACCESS_KEY_ID": s3_server.access_key_id,
                 "WAGGLE_S3_SECRET_ACCESS_KEY": s3_server.secret_access_key}.items():
        monkeypatch.setenv(k, v)
    there, absent = str(uuid.uuid4()), str(uuid.uuid4())
    put_json(s3_server, f"{there}_.result.json", manifest(there))
    with psycopg.connect(migrated_db_url) as conn:
        for t in (there, absent):
            conn.execute("INSERT INTO capture_submissions (task_id, org_id, submitted_by, manifest_key)"
                         " VALUES (%s, 'acme', 'alice', %s)", (t, f"{t}_.result.json"))
    out = runner.invoke(app, ["reconcile", "--since-days", "3"])
    assert out.exit_code == 0, out.output
    assert json.loads(out.stdout) == {"pending": 2, "registered": 1, "skipped": 0, "missing": 1, "errors": 0}
    assert runner.invoke(app, ["reconcile", "--since-days", "0"]).exit_code != 0
