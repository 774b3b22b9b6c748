"""``GET /api/health`` with real Postgres, the real OpenFGA server and the S3 stand-in."""

from __future__ import annotations

import socket
import uuid

import psycopg
import pytest
from psycopg_pool import AsyncConnectionPool

from ledger.api import health
from ledger.s3 import S3Store
from tests.fixtures.ledger import ledger_settings, open_ledger
from tests.guard.helpers import insert_crawl, run


def _dead_url() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}"


def _store(s3_server, endpoint: str | None = None) -> S3Store:
    return S3Store(endpoint or s3_server.endpoint, s3_server.bucket, s3_server.region,
                   s3_server.access_key_id, s3_server.secret_access_key, connect_timeout_s=1, read_timeout_s=2)


def _get_health(settings, s3, pool_swap=None):
    async def go():
        async with open_ledger(settings, s3=s3) as ledger:
            if pool_swap is not None:
                real = ledger.services.pool
                ledger.services.pool = await pool_swap()
            try:
                r = await ledger.client.get("/api/health")  # no identity headers: probes need none
                return r.status_code, r.json()
            finally:
                if pool_swap is not None:
                    await ledger.services.pool.close()
                    ledger.services.pool = real

    return run(go())


def test_all_dependencies_answer(migrated_db_url, ledger_fga, s3_server):
    with psycopg.connect(migrated_db_url, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO fga_outbox (payload, created_at) VALUES ('{}', now() - interval '40 seconds'),"
            " ('{}', now() - interval '5 seconds'), ('{}', now() - interval '1 hour')"
        )
        conn.execute("UPDATE fga_outbox SET processed_at = now() WHERE created_at < now() - interval '30 minutes'")
        crawl_id = insert_crawl(conn, job_id=str(uuid.uuid4()), depth=1, job_depth=1, idle_s=12)
        conn.execute("UPDATE crawls SET started_at = now() - interval '100 seconds' WHERE id = %s", (crawl_id,))
    settings = ledger_settings(migrated_db_url, ledger_fga, None, max_pages=250, max_pages_per_host=40)
    status, body = _get_health(settings, _store(s3_server))
    assert status == 200, body
    assert body["status"] == "ok" and body["degraded"] == []
    health.HealthAnswer.model_validate(body)  # the body the OpenAPI schema documents
    assert body["privateHostsBlocked"] is True
    assert body["identity"] == "header"
    assert body["maxPages"] == 250 and body["maxPagesPerHost"] == 40
    for part in ("database", "openfga", "s3"):
        assert body[part]["ok"] is True and body[part]["latencyMs"] >= 0 and "error" not in body[part]
    assert body["outbox"]["pending"] == 2
    assert 39 <= body["outbox"]["oldestPendingAgeS"] < 100
    rc = body["runningCrawl"]
    assert rc["crawlId"] == str(crawl_id) and rc["currentDepth"] == 1
    assert 99 <= rc["ageS"] < 200 and 11 <= rc["idleS"] < 100
    assert rc["startedAt"].endswith("Z")


def test_empty_ledger_and_opt_out(migrated_db_url, ledger_fga, s3_server):
    settings = ledger_settings(migrated_db_url, ledger_fga, None, allow_private_hosts=True)
    status, body = _get_health(settings, _store(s3_server))
    assert status == 200
    assert body["privateHostsBlocked"] is False
    assert body["outbox"] == {"pending": 0, "oldestPendingAgeS": None}
    assert body["runningCrawl"] is None


def test_openfga_down_is_503(migrated_db_url, ledger_fga, s3_server):
    settings = ledger_settings(migrated_db_url, ledger_fga, None)
    settings.fga_api_url = _dead_url()
    status, body = _get_health(settings, _store(s3_server))
    assert status == 503 and body["status"] == "degraded" and body["degraded"] == ["openfga"]
    health.HealthAnswer.model_validate(body)
    assert body["openfga"]["ok"] is False and "Connect" in body["openfga"]["error"]
    assert body["database"]["ok"] is True and body["s3"]["ok"] is True


def test_wrong_openfga_model_is_503(migrated_db_url, ledger_fga, s3_server):
    """A model id the store does not hold, and one that is no model id at all (the real server
    checks the ULID form first): 503 with the server's reason."""
    for model_id, reason in (("01JN0000000000000000000000", "not_found"), ("01JNOSUCHMODEL0000000000000", "validation_error")):
        settings = ledger_settings(migrated_db_url, ledger_fga, None, fga_model_id=model_id)
        status, body = _get_health(settings, _store(s3_server))
        error = body["openfga"]["error"]
        assert status == 503 and body["openfga"]["ok"] is False
        assert reason in error, error


def test_s3_down_and_missing_bucket_are_503(migrated_db_url, ledger_fga, s3_server):
    settings = ledger_settings(migrated_db_url, ledger_fga, None)
    status, body = _get_health(settings, _store(s3_server, _dead_url()))
    assert status == 503 and body["s3"]["ok"] is False and body["s3"]["error"]
    assert body["degraded"] == ["s3"]
    assert body["openfga"]["ok"] is True
    missing = S3Store(s3_server.endpoint, "no-such-bucket", s3_server.region, s3_server.access_key_id,
                      s3_server.secret_access_key)
    status, body = _get_health(settings, missing)
    assert status == 503 and body["s3"]["ok"] is False
    status, body = _get_health(settings, None)
    assert status == 503 and "not configured" in body["s3"]["error"]


def test_database_down_is_503_within_the_check_timeout(migrated_db_url, ledger_fga, s3_server, monkeypatch):
    # 1.5 s, not 0.5: at load 8-10 the healthy S3 check alone once took longer than 0.5 s
    monkeypatch.setattr(health, "CHECK_TIMEOUT_S", 1.5)
    base, _, query = migrated_db_url.partition("?")
    nowhere = base.rpartition("/")[0] + "/no_such_database" + (f"?{query}" if query else "")

    async def broken_pool():
        pool = AsyncConnectionPool(nowhere, min_size=1, open=False, reconnect_timeout=1)
        await pool.open(wait=False)
        return pool

    settings = ledger_settings(migrated_db_url, ledger_fga, None)
    status, body = _get_health(settings, _store(s3_server), pool_swap=broken_pool)
    assert status == 503 and body["degraded"] == ["database"]
    health.HealthAnswer.model_validate(body)
    assert body["database"]["ok"] is False and body["database"]["latencyMs"] < 2500  # the timeout, not the pool's
    assert body["outbox"] is None and body["runningCrawl"] is None
    assert body["openfga"]["ok"] is True and body["s3"]["ok"] is True


def test_policy_notes_state_host_policy_identity_and_caps(migrated_db_url, ledger_fga):
    notes = health.policy_notes(ledger_settings(migrated_db_url, ledger_fga, None, max_pages_per_host=7))
    text = "\n".join(notes)
    assert "private hosts blocked" in text and "dev headers" in text and "per host 7" in text
    notes = health.policy_notes(ledger_settings(migrated_db_url, ledger_fga, None, allow_private_hosts=True,
                                                oidc_issuer="http://127.0.0.1:1"))
    text = "\n".join(notes)
    assert "ALLOWED" in text and "JWT from http://127.0.0.1:1" in text and "no cap" in text


@pytest.mark.parametrize("path", ["/api/health", "/api/health?x=1"])
def test_health_needs_no_identity_and_never_500(migrated_db_url, ledger_fga, path):
    async def go():
        settings = ledger_settings(migrated_db_url, ledger_fga, None, dev_identity=False)
        async with open_ledger(settings, s3=None) as ledger:
            r = await ledger.client.get(path)
            return r.status_code, r.json()

    status, body = run(go())
    assert status == 503 and body["identity"] == "deny"
