"""``waggle fga deploy``, ``grant``/``revoke`` and ``drain`` against the real OpenFGA server over HTTP."""

from __future__ import annotations

import json
import uuid

import psycopg
from psycopg.types.json import Jsonb
from typer.testing import CliRunner

from ledger.cli import app
from tests.fixtures.fga import FgaStore

runner = CliRunner()


def env_for(store: FgaStore, db: str | None = None) -> dict[str, str]:
    env = {"WAGGLE_FGA_API_URL": store.api_url, "WAGGLE_FGA_STORE_ID": store.store_id,
           "WAGGLE_FGA_MODEL_ID": store.model_id}
    if db:
        env["WAGGLE_DATABASE_URL"] = db
    return env


def test_deploy_creates_a_store_whose_model_answers(fga_server) -> None:
    out = runner.invoke(app, ["fga", "deploy", "--api-url", fga_server.api_url])
    assert out.exit_code == 0, out.output
    ids = dict(line.split("=", 1) for line in out.stdout.strip().splitlines())
    store = FgaStore(fga_server.api_url, ids["WAGGLE_FGA_STORE_ID"], ids["WAGGLE_FGA_MODEL_ID"])
    assert store.store_id != fga_server.store_id
    store.write(["user:bob submitter organization:acme"])
    assert store.check("user:bob", "can_submit", "organization:acme")
    assert not store.check("user:carol", "can_submit", "organization:acme",
                           contextual=["user:carol member organization:acme"])


def test_deploy_names_an_unreachable_server() -> None:
    out = runner.invoke(app, ["fga", "deploy", "--api-url", "http://127.0.0.1:9"])
    assert out.exit_code == 1
    assert "127.0.0.1:9" in out.stderr and "Traceback" not in out.output


def test_grant_then_revoke_reports_the_rechecked_answer(fga_store, monkeypatch) -> None:
    for k, v in env_for(fga_store).items():
        monkeypatch.setenv(k, v)
    out = runner.invoke(app, ["grant", "submitter", "bob", "acme"])
    assert out.exit_code == 0, out.output
    assert out.stdout.startswith("bob can start crawls for acme (wrote: user:bob submitter organization:acme)")
    again = runner.invoke(app, ["grant", "submitter", "bob", "acme"])
    assert "already there" in again.stdout and "bob can start" in again.stdout
    runner.invoke(app, ["grant", "admin", "bob", "acme"])
    revoked = runner.invoke(app, ["revoke", "submitter", "bob", "acme"])
    assert "bob can start crawls" in revoked.stdout and "still allowed by another relation" in revoked.stdout
    revoked = runner.invoke(app, ["revoke", "admin", "bob", "acme"])
    assert revoked.stdout.startswith("bob cannot start crawls for acme (deleted:")
    assert "already absent" in runner.invoke(app, ["revoke", "admin", "bob", "acme"]).stdout
    member = runner.invoke(app, ["grant", "member", "bob", "acme"])
    assert member.exit_code != 0  # membership is never stored
    assert not fga_store.check("user:bob", "can_submit", "organization:acme")


def test_drain_command(fga_store, migrated_db_url, monkeypatch) -> None:
    for k, v in env_for(fga_store, migrated_db_url).items():
        monkeypatch.setenv(k, v)
    job = f"capture_job:{uuid.uuid4()}"
    with psycopg.connect(migrated_db_url) as conn:
        conn.execute("INSERT INTO fga_outbox (payload) VALUES (%s)",
                     (Jsonb({"writes": [{"user": "organization:acme", "relation": "parent", "object": job}]}),))
    out = runner.invoke(app, ["drain"])
    assert out.exit_code == 0, out.output
    assert json.loads(out.stdout)["delivered"] == 1
    assert {"user": "organization:acme", "relation": "parent", "object": job} in fga_store.read()


def test_missing_ids_are_named(monkeypatch) -> None:
    monkeypatch.delenv("WAGGLE_FGA_STORE_ID", raising=False)
    monkeypatch.delenv("WAGGLE_FGA_MODEL_ID", raising=False)
    monkeypatch.chdir("/tmp")  # no .env
    out = runner.invoke(app, ["grant", "submitter", "bob", "acme"])
    assert out.exit_code == 1
    assert "WAGGLE_FGA_STORE_ID" in out.stderr and "waggle fga deploy" in out.stderr


def test_deploy_grant_and_checks_with_a_preshared_key(monkeypatch) -> None:
    """The local stack runs OpenFGA with a preshared key: deploy, grant and Authz send it as Bearer."""
    import asyncio

    from ledger.authz.fga import Authz
    from tests.fixtures.fga import FgaProcess

    proc = FgaProcess(preshared_key="s3cret").start()
    try:
        monkeypatch.setenv("WAGGLE_FGA_API_TOKEN", "s3cret")
        monkeypatch.setenv("WAGGLE_FGA_API_URL", proc.api_url)
        out = runner.invoke(app, ["fga", "deploy"])
        assert out.exit_code == 0, out.output
        ids = dict(line.split("=", 1) for line in out.stdout.strip().splitlines())
        for k, v in ids.items():
            monkeypatch.setenv(k, v)
        assert runner.invoke(app, ["grant", "admin", "erin", "acme"]).stdout.startswith("erin can start")

        class Who:
            subject, organizations = "erin", ["acme"]

        async def go(token):
            az = Authz(proc.api_url, ids["WAGGLE_FGA_STORE_ID"], ids["WAGGLE_FGA_MODEL_ID"], token)
            try:
                return await az.can_submit(Who())
            finally:
                await az.close()

        assert asyncio.run(go("s3cret")) is True
        monkeypatch.setenv("WAGGLE_FGA_API_TOKEN", "wrong")
        assert runner.invoke(app, ["grant", "admin", "erin", "acme"]).exit_code == 1
    finally:
        proc.stop()
