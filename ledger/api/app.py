"""The ledger's FastAPI app: ``create_app(settings, services=None) -> FastAPI``.

Mounts every router (crawl routes only when the webhook is configured; the archive, picker
and health routers of the other parts), installs the error policy, picks
the identity mode once, and in its lifespan opens ``Services`` (unless given) and starts the
periodic tasks (``ledger.loops``): outbox worker, reconciler, watchdog, lease loop — each round
on one replica at a time, so several ledger processes may share one database.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from typing import Any

from fastapi import FastAPI

from ledger.api import errors
from ledger.api.identity import choose_resolver
from ledger.services import Services, build_services
from ledger.settings import Settings

log = logging.getLogger("waggle.api")


def _periodic_runners(settings: Settings) -> list[Any]:
    """One runner per background loop (``ledger.loops``): outbox worker (#3), reconciler (#3),
    watchdog (#7), lease loop (#12); each round runs on one replica at a time (advisory lock)."""
    from ledger import loops

    return loops.runners(settings)


def create_app(settings: Settings, services: Services | None = None, *, periodic: bool = True) -> FastAPI:
    """The ledger app. ``services`` given → used as is and not closed (tests); else built from
    ``settings`` at start-up (raises ``MissingSettings``). ``periodic`` starts the background
    loops of ``ledger.loops``: outbox worker, reconciler, watchdog, lease loop."""

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        owned = services is None
        app.state.services = services if services is not None else await build_services(settings)
        tasks: list[asyncio.Task] = []
        # the Public Suffix List (~0.15-0.5 s to load) is read at start-up, off the event loop,
        # not by the first level report that records its hosts' captures (decision 411)
        from ledger.crawl.scope import warm_up

        warmed = asyncio.get_running_loop().run_in_executor(None, warm_up)
        if periodic:
            for runner in _periodic_runners(settings):
                tasks.append(asyncio.create_task(runner(app.state.services), name=runner.__module__))
        try:
            yield
        finally:
            with contextlib.suppress(BaseException):
                await warmed
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

    from ledger.api import archives, health, me, picker, scripts, search

    for module in (me, scripts, health, archives, picker, search):
        app.include_router(module.router)
    from ledger.web import routes as web

    web.mount(app)
    if settings.crawls_enabled:
        from ledger.api import changes, collection, conditional, crawls, read_token, revisits, workflow_grants, workflows

        app.include_router(crawls.router)
        app.include_router(collection.router)
        app.include_router(revisits.router)
        app.include_router(conditional.router)
        app.include_router(read_token.router)
        app.include_router(changes.router)
        app.include_router(workflows.router)
        app.include_router(workflow_grants.router)
    else:
        log.info("WAGGLE_CRAWL_WEBHOOK_URL is not set — /api/crawls is not served")
    return app


def app_from_env() -> FastAPI:
    """The app built from the environment's settings (uvicorn factory of ``waggle serve --workers``)."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    return create_app(Settings())
