"""Schema migrations: ``ledger/db/migrations/NNN_name.sql`` applied in order, once each.

Applied versions are recorded in ``schema_migrations``; a session-level advisory lock makes
concurrent ``migrate`` runs (two ledgers starting together) safe. Each file runs in its own
transaction, so a failing file leaves nothing half-applied.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from importlib import resources

import psycopg

_NAME = re.compile(r"^(\d{3})_[a-z0-9_]+\.sql$")
_LOCK_KEY = 0x7761676C  # "wagl": advisory lock id shared by every migrate run


@dataclass(frozen=True)
class Migration:
    """One migration file: ``version`` is the 3-digit prefix, ``name`` the file name."""

    version: str
    name: str
    sql: str


def available() -> list[Migration]:
    """Every migration shipped in ``ledger/db/migrations``, sorted by version.

    Raises ``RuntimeError`` when two files share a version number.
    """
    found: dict[str, Migration] = {}
    for entry in resources.files("ledger.db.migrations").iterdir():
        match = _NAME.match(entry.name)
        if not match:
            continue
        version = match.group(1)
        if version in found:
            raise RuntimeError(f"two migrations share version {version}: {found[version].name}, {entry.name}")
        found[version] = Migration(version, entry.name, entry.read_text(encoding="utf-8"))
    return [found[v] for v in sorted(found)]


def migrate(database_url: str, until: str | None = None) -> list[str]:
    """Apply every pending migration to ``database_url``; returns the file names applied now.

    ``until`` (a version such as ``"100"``) stops before that version: the schema as it was
    before it, for checking that a later migration keeps existing data. Idempotent: a second
    run applies nothing and returns ``[]``.
    """
    applied_now: list[str] = []
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute("SELECT pg_advisory_lock(%s)", (_LOCK_KEY,))
        try:
            conn.execute(
                "CREATE TABLE IF NOT EXISTS schema_migrations ("
                " version text PRIMARY KEY, name text NOT NULL,"
                " applied_at timestamptz NOT NULL DEFAULT now())"
            )
            done = {row[0] for row in conn.execute("SELECT version FROM schema_migrations")}
            for migration in available():
                if until is not None and migration.version >= until:
                    break
                if migration.version in done:
                    continue
                with conn.transaction():
                    conn.execute(migration.sql)  # type: ignore[arg-type]  (trusted file content)
                    conn.execute(
                        "INSERT INTO schema_migrations (version, name) VALUES (%s, %s)",
                        (migration.version, migration.name),
                    )
                applied_now.append(migration.name)
        finally:
            conn.execute("SELECT pg_advisory_unlock(%s)", (_LOCK_KEY,))
    return applied_now
