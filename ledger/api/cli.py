"""``waggle serve``: run the ledger API (uvicorn) with migrations applied."""

from __future__ import annotations

import logging

import typer


def register(app: typer.Typer) -> None:
    """Add ``waggle serve`` to ``app``."""

    @app.command("serve")
    def serve(
        host: str = typer.Option(None, help="bind address (default WAGGLE_API_HOST, 127.0.0.1)"),
        port: int = typer.Option(None, help="port (default WAGGLE_API_PORT, 7070)"),
        migrate: bool = typer.Option(True, help="apply pending migrations first"),
        workers: int = typer.Option(1, min=1, max=64, help="worker processes sharing the port (uvicorn workers);"
                                    " several `waggle serve` on one database are safe too"),
    ) -> None:
        """Serve the ledger API. Missing required settings are reported together, then exit 1.

        With ``--workers N`` uvicorn runs N processes on one socket; each builds its app from the
        environment (this command exports the resolved database URL, host and port), and the
        background loops run each round on one process at a time (``ledger.loops``)."""
        import uvicorn

        from ledger.api.app import create_app
        from ledger.api.identity import choose_resolver, startup_notes
        from ledger.db.embedded import database_url
        from ledger.services import check_required
        from ledger.settings import MissingSettings, Settings

        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
        settings = Settings()
        if host:
            settings.api_host = host
        if port is not None:  # 0 = an OS-chosen port (tests)
            settings.api_port = port
        try:
            check_required(settings)
        except MissingSettings as exc:
            typer.echo(str(exc), err=True)
            raise typer.Exit(1) from None
        if bool(settings.crawl_webhook_url) != bool(settings.crawl_webhook_token):
            typer.echo("WAGGLE_CRAWL_WEBHOOK_URL and WAGGLE_CRAWL_WEBHOOK_TOKEN must be set together"
                       " (one without the other cannot dispatch a crawl)", err=True)
            raise typer.Exit(1)
        url = database_url(settings)
        settings.database_url = url
        if migrate:
            from ledger.db.migrate import migrate as apply

            for name in apply(url):
                logging.getLogger("waggle.db").info("applied migration %s", name)
        log = logging.getLogger("waggle.api")
        for level, text in startup_notes(settings, choose_resolver(settings), settings.api_host, settings.api_port):
            log.log(level, text)
        from ledger.api.health import policy_notes  # host policy and caps (issue #7)

        for text in policy_notes(settings):
            log.info(text)
        if workers > 1:
            import os

            os.environ.update({"WAGGLE_DATABASE_URL": url, "WAGGLE_API_HOST": settings.api_host,
                               "WAGGLE_API_PORT": str(settings.api_port)})
            log.info("serving with %d worker processes", workers)
            uvicorn.run("ledger.api.app:app_from_env", factory=True, workers=workers, host=settings.api_host,
                        port=settings.api_port, log_level="info")
            return
        uvicorn.run(create_app(settings), host=settings.api_host, port=settings.api_port, log_level="info")
