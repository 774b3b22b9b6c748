"""``waggle reconcile [--since-days N]``: admit captures whose manifest arrived late."""

from __future__ import annotations

import asyncio
import json

import typer


async def _reconcile(settings, since_days: int | None) -> dict:
    from ledger.archive.reconciler import reconcile
    from ledger.db.embedded import database_url
    from ledger.db.pool import open_pool
    from ledger.s3 import S3Store

    s3 = S3Store.from_settings(settings)
    pool = await open_pool(database_url(settings), max_size=2)
    try:
        return (await reconcile(pool, s3, since_days=since_days,
                                wacz_hash_max_bytes=settings.wacz_hash_max_bytes)).as_dict()
    finally:
        await pool.close()


def register(app: typer.Typer) -> None:
    """Add ``reconcile`` to ``app``."""

    @app.command("reconcile")
    def reconcile_cmd(
        since_days: int = typer.Option(None, "--since-days", min=1,
                                       help="only captures submitted in the last N days (default: all)"),
    ) -> None:
        """Read again the manifests of reported captures that have no archive yet; prints counts as JSON
        (pending / registered / skipped / missing / errors)."""
        from ledger.settings import MissingSettings, Settings

        try:
            result = asyncio.run(_reconcile(Settings(), since_days))
        except MissingSettings as exc:
            typer.echo(str(exc), err=True)
            raise typer.Exit(1) from None
        typer.echo(json.dumps(result))
