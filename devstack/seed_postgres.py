"""The stack's databases: embedded Postgres started, the ledger's migrated with the default page
scripts loaded, and OpenFGA's own (``openfga``) created and migrated by ``openfga migrate``."""

from __future__ import annotations

import asyncio

from devstack import postgres
from devstack.layout import StackConfig
from devstack.services import ledger_env, run_waggle


def start(config: StackConfig) -> str:
    """Start (or reuse) pgserver under ``state_dir/pg``; returns its database URL."""
    return postgres.start(config.state_dir / "pg")


OPENFGA_DATABASE = "openfga"


def openfga_database(database_url: str) -> str:
    """Create database ``openfga`` next to the ledger's (once) and bring its schema to the pinned
    server's (``openfga migrate``); returns its URL in the form OpenFGA reads."""
    import psycopg

    from devstack import openfga_server

    with psycopg.connect(database_url, autocommit=True) as conn:
        if conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (OPENFGA_DATABASE,)).fetchone() is None:
            conn.execute(f"CREATE DATABASE {OPENFGA_DATABASE}")
    base, _, query = database_url.partition("?")
    uri = openfga_server.datastore_uri(f"{base.rpartition('/')[0]}/{OPENFGA_DATABASE}" + (f"?{query}" if query else ""))
    openfga_server.migrate(uri)
    return uri


def migrate(config: StackConfig, database_url: str) -> None:
    run_waggle("db", "migrate", env=ledger_env(config, database_url))


def load_default_scripts(config: StackConfig, database_url: str) -> None:
    run_waggle("scripts", "load-defaults", env=ledger_env(config, database_url))


def default_scripts(database_url: str) -> list[dict]:
    """The default page-script set as the crawl webhook sends it (``webhook_item`` shape, nulls dropped)."""
    import psycopg
    from psycopg.rows import dict_row

    from ledger.crawl.scripts import default_set, webhook_item

    async def read() -> list[dict]:
        async with await psycopg.AsyncConnection.connect(database_url, row_factory=dict_row) as conn:
            return await default_set(conn)

    return [{k: v for k, v in webhook_item(s).items() if v is not None} for s in asyncio.run(read())]
