"""Fixtures of the archive tests: the S3 store, a pool on a fresh migrated database, manifests."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from ledger.db.pool import open_pool
from ledger.s3 import S3Store


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def s3store(s3_server) -> S3Store:
    return S3Store(s3_server.endpoint, s3_server.bucket, s3_server.region, s3_server.access_key_id,
                   s3_server.secret_access_key)


@pytest.fixture
async def pool(migrated_db_url: str) -> AsyncIterator[Any]:
    p = await open_pool(migrated_db_url, max_size=4)
    try:
        yield p
    finally:
        await p.close()



@pytest.fixture
def s3server_put(s3_server):
    """``put(key, obj)``: upload ``obj`` as JSON at exactly ``key`` in the session bucket; a
    manifest's WACZ (``artifacts.wacz``) is uploaded too, whole, unless ``wacz=False``."""
    from tests.archive.helpers import put_json, put_wacz

    def put(key: str, data: Any, wacz: bool = True) -> None:
        put_json(s3_server, key, data)
        location = (data.get("artifacts") or {}).get("wacz") if isinstance(data, dict) else None
        if wacz and isinstance(location, str) and location.startswith("s3://"):
            put_wacz(s3_server, location)

    return put


@pytest.fixture(scope="session")
def archive_ledger(create_database, migrated_template, fga_server, s3_server):
    """A real ledger (uvicorn on loopback, dev-header identity, periodic outbox worker) over a
    database holding four admitted archives whose tuples the worker delivered to OpenFGA.
    See :mod:`tests.archive.ledger_stack`."""
    from tests.archive.ledger_stack import start_archive_ledger

    stack = start_archive_ledger(create_database(template=migrated_template), fga_server.new_store(), s3_server)
    try:
        yield stack
    finally:
        stack.stop()
