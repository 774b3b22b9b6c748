"""The ledger's start-up loads the Public Suffix List off the event loop (decision 411), so the
first level report that records its hosts' captures (``ledger.crawl.servers.domain_key``) does
not pay for it."""

from __future__ import annotations

import asyncio
import time

import pytest

from ledger.api.app import create_app
from ledger.crawl import scope
from ledger.settings import Settings

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def test_the_public_suffix_list_is_loaded_at_start_up_not_by_a_request() -> None:
    scope._psl.cache_clear()
    assert scope._psl.cache_info().currsize == 0
    app = create_app(Settings(_env_file=None), services=object(), periodic=False)  # type: ignore[arg-type]
    async with app.router.lifespan_context(app):
        deadline = time.monotonic() + 30
        while scope._psl.cache_info().currsize == 0 and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        assert scope._psl.cache_info().currsize == 1
        calls = scope._psl.cache_info().misses
        assert scope.registered_domain("www.a.example.co.uk") == "example.co.uk"
        assert scope._psl.cache_info().misses == calls  # served from what start-up loaded
