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
    """``put(key, obj)``: upload ``obj`` as JSON at exactly ``key`` in the session bucket."""
    from tests.archive.helpers import put_json

    return lambda key, data: put_json(s3_server, key, data)
