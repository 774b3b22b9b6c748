"""``waggle reconcile [--since-days N]``: admit captures whose manifest arrived late;
``waggle verify FILE.wacz``: check a downloaded WACZ offline (:mod:`ledger.archive.offline`)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Optional

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
                                wacz_hash_max_bytes=settings.wacz_hash_max_bytes,
                                trusted_roots=settings.signing_trusted_roots)).as_dict()
    finally:
        await pool.close()


def register(app: typer.Typer) -> None:
    """Add ``reconcile`` and ``verify`` to ``app``."""

    @app.command("verify")
    def verify_cmd(
        file: Path = typer.Argument(..., help="A downloaded WACZ file.", dir_okay=False),
        trusted_roots: Optional[str] = typer.Option(
            None, "--trusted-roots", help="authsign roots YAML (SHA-256 fingerprints) the signature must chain to"
            " (default: $WAGGLE_SIGNING_TRUSTED_ROOTS, then the local stack's, then authsign's public roots)"),
    ) -> None:
        """Check a WACZ offline: its wacz-auth signature and every file's hash (a crawl's combined
        WACZ: each member's carried signature over its WARC files). Exit 0 verified, 1 does not
        verify (says why), 2 not signed (hashes checked; a combined file: not every member signed)."""
        from ledger.archive.offline import default_trusted_roots, verify_file

        verdict = verify_file(file, trusted_roots or default_trusted_roots())
        for line in verdict.lines:
            typer.echo(line)
        raise typer.Exit(verdict.code)

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
