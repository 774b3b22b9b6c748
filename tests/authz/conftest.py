"""Fixtures of the authz tests: anyio on asyncio and a pool on a fresh migrated database."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from ledger.db.pool import open_pool


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
async def pool(migrated_db_url: str) -> AsyncIterator[Any]:
    p = await open_pool(migrated_db_url, max_size=6)
    try:
        yield p
    finally:
        await p.close()
