"""The ledger's FastAPI app: ``create_app(settings, services=None) -> FastAPI``.

Mounts every router (crawl routes only when the webhook is configured; the archive, picker
and health routers of other parts when their modules exist), installs the error policy, picks
the identity mode once, and in its lifespan opens ``Services`` (unless given) and starts the
periodic tasks: outbox worker, reconciler, watchdog.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import importlib.util
import logging
from collections.abc import AsyncIterator
from typing import Any

from fastapi import FastAPI

from ledger.api import errors
from ledger.api.identity import choose_resolver
from ledger.services import Services, build_services
from ledger.settings import Settings

log = logging.getLogger("waggle.api")

OTHER_ROUTERS = ("ledger.api.archives", "ledger.api.picker", "ledger.api.health")
PERIODIC = ("ledger.authz.outbox", "ledger.archive.reconciler", "ledger.crawl.watchdog")


def _module(name: str) -> Any | None:
    return importlib.import_module(name) if importlib.util.find_spec(name) is not None else None


def create_app(settings: Settings, services: Services | None = None, *, periodic: bool = True) -> FastAPI:
    """The ledger app. ``services`` given → used as is and not closed (tests); else built from
    ``settings`` at start-up (raises ``MissingSettings``). ``periodic`` starts the background
    loops (``run_periodically(services)`` of each module in ``PERIODIC`` that exists)."""

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        owned = services is None
        app.state.services = services if services is not None else await build_services(settings)
        tasks: list[asyncio.Task] = []
        if periodic:
            for name in PERIODIC:
                module = _module(name)
                runner = getattr(module, "run_periodically", None) if module else None
                if runner is not None:
                    tasks.append(asyncio.create_task(runner(app.state.services), name=name))
        try:
            yield
        finally:
            for task in tasks:
                task.cancel()
            for task in tasks:
                with contextlib.suppress(BaseException):
                    await task
            if owned:
                await app.state.services.close()

    app = FastAPI(title="waggle ledger", lifespan=lifespan, docs_url=None, redoc_url=None)
    app.state.settings = settings
    app.state.identity = choose_resolver(settings)
    if services is not None:
        app.state.services = services
    errors.install(app)

    from ledger.api import me, scripts

    app.include_router(me.router)
    app.include_router(scripts.router)
    if settings.crawls_enabled:
        from ledger.api import crawls

        app.include_router(crawls.router)
    else:
        log.info("WAGGLE_CRAWL_WEBHOOK_URL is not set — /api/crawls is not served")
    for name in OTHER_ROUTERS:
        module = _module(name)
        if module is not None and hasattr(module, "router"):
            app.include_router(module.router)
    return app
