"""``waggle db migrate``: apply the ledger's schema migrations."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    """Add ``waggle db …`` to ``app``."""
    db = typer.Typer(help="The ledger's Postgres database.", no_args_is_help=True)

    @db.command("migrate")
    def migrate_cmd() -> None:
        """Apply pending migrations (idempotent; recorded in table schema_migrations)."""
        from ledger.db.embedded import database_url
        from ledger.db.migrate import migrate
        from ledger.settings import Settings

        applied = migrate(database_url(Settings()))
        if applied:
            for name in applied:
                typer.echo(f"applied {name}")
        else:
            typer.echo("database is up to date")

    app.add_typer(db, name="db")
