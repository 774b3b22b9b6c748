"""What the routes and background tasks share: ``Services`` (docs/internals.md, "The ledger is
async"). Routes reach it as ``request.app.state.services``."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import httpx
from psycopg_pool import AsyncConnectionPool

from ledger.settings import Settings

log = logging.getLogger(__name__)


@dataclass
class Services:
    """``settings``; ``pool`` (psycopg AsyncConnectionPool, dict rows); ``authz``
    (``ledger.authz.fga.Authz`` or anything with ``async can_submit(identity) -> bool``);
    ``s3`` (``ledger.s3.S3Store`` or None when S3 is not configured); ``http`` (httpx.AsyncClient
    for the webhook)."""

    settings: Settings
    pool: AsyncConnectionPool
    authz: Any
    s3: Any
    http: httpx.AsyncClient

    async def close(self) -> None:
        """Close the HTTP client, the pool and the authz client (when it has ``close``)."""
        await self.http.aclose()
        await self.pool.close()
        closer = getattr(self.authz, "close", None)
        if closer is not None:
            result = closer()
            if hasattr(result, "__await__"):
                await result


def build_authz(settings: Settings) -> Any:
    """The OpenFGA client from ``WAGGLE_FGA_*``; raises ``MissingSettings`` for missing ids."""
    from ledger.authz.fga import Authz

    settings.require("fga_store_id", "fga_model_id")
    return Authz(settings.fga_api_url, settings.fga_store_id, settings.fga_model_id, settings.fga_api_token)


def build_s3(settings: Settings) -> Any:
    """The S3 store from ``WAGGLE_S3_*``; raises ``MissingSettings`` for missing settings."""
    from ledger.s3 import S3Store

    return S3Store.from_settings(settings)


def check_required(settings: Settings) -> None:
    """Report every missing required setting at once (``MissingSettings``): the OpenFGA store
    and model ids and the four S3 settings."""
    settings.require(
        "s3_endpoint", "s3_bucket", "s3_access_key_id", "s3_secret_access_key", "fga_store_id", "fga_model_id"
    )


async def build_services(settings: Settings, *, database_url: str | None = None) -> Services:
    """Open the pool (``database_url`` or the configured/embedded one), OpenFGA, S3 and HTTP.

    Raises ``MissingSettings`` listing every missing required setting together.
    """
    from ledger.db.embedded import database_url as resolve_url
    from ledger.db.pool import open_pool

    check_required(settings)
    authz = build_authz(settings)
    s3 = build_s3(settings)
    pool = await open_pool(database_url or resolve_url(settings))
    return Services(settings=settings, pool=pool, authz=authz, s3=s3, http=httpx.AsyncClient())
