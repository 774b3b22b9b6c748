"""``waggle targets …`` and ``waggle scripts …``: direct database access, no authorization
(operator tools, ledger.md §8.4 and §11). ``waggle grant|revoke`` live in ``ledger/authz/cli.py``."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Optional

import typer


def _db_url() -> str:
    from ledger.db.embedded import database_url
    from ledger.settings import Settings

    return database_url(Settings())


def _fail(message: str) -> None:
    typer.echo(message, err=True)
    raise typer.Exit(1)


def _targets_app() -> typer.Typer:
    app = typer.Typer(help="Saved seed URLs of an organization (used by fromTargets crawls).", no_args_is_help=True)

    @app.command("add")
    def add(
        urls: list[str] = typer.Argument(..., help="http(s) URLs, or - to read one per line from stdin"),
        org: str = typer.Option(..., "--org", help="organization the targets belong to"),
        label: list[str] = typer.Option([], "--label", help="label for new rows (repeatable)"),
    ) -> None:
        """Add targets (unreadable URLs are named and nothing is added)."""
        import psycopg

        from ledger.crawl.targets import TargetsError, add as add_targets

        if "-" in urls:
            if len(urls) > 1:
                _fail("use either - (stdin) or URLs as arguments, not both")
            urls = [line.strip() for line in sys.stdin.read().splitlines()
                    if line.strip() and not line.strip().startswith("#")]
            if not urls:
                _fail("no URLs on stdin")
        try:
            with psycopg.connect(_db_url()) as conn:
                result = add_targets(conn, org, urls, label)
        except TargetsError as exc:
            _fail(str(exc))
        for key, verb in (("added", "added"), ("enabled", "re-enabled"), ("kept", "already there")):
            for target_id, url in result[key]:
                typer.echo(f"{verb}: {target_id} {url}")

    @app.command("list")
    def list_(org: Optional[str] = typer.Option(None, "--org"), as_json: bool = typer.Option(False, "--json")) -> None:
        """List targets (of one organization with --org)."""
        import psycopg

        from ledger.crawl.targets import list_targets

        with psycopg.connect(_db_url()) as conn:
            rows = list_targets(conn, org)
        if as_json:
            typer.echo(json.dumps(rows))
            return
        for r in rows:
            typer.echo(f"{r['id']}\t{r['org']}\t{'enabled' if r['enabled'] else 'disabled'}\t{r['url']}")

    def _change(ids: list[int], org: str, what: str) -> None:
        import psycopg

        from ledger.crawl.targets import TargetsError, remove, set_enabled

        try:
            with psycopg.connect(_db_url()) as conn:
                n = remove(conn, org, ids) if what == "rm" else set_enabled(conn, org, ids, what == "enable")
        except TargetsError as exc:
            _fail(str(exc))
        typer.echo(f"{what}: {n} changed")

    @app.command("enable")
    def enable(ids: list[int] = typer.Argument(...), org: str = typer.Option(..., "--org")) -> None:
        """Enable targets by id."""
        _change(ids, org, "enable")

    @app.command("disable")
    def disable(ids: list[int] = typer.Argument(...), org: str = typer.Option(..., "--org")) -> None:
        """Disable targets by id."""
        _change(ids, org, "disable")

    @app.command("rm")
    def rm(ids: list[int] = typer.Argument(...), org: str = typer.Option(..., "--org")) -> None:
        """Delete targets by id."""
        _change(ids, org, "rm")

    return app


async def _with_conn(fn):  # type: ignore[no-untyped-def]
    from psycopg import AsyncConnection
    from psycopg.rows import dict_row

    async with await AsyncConnection.connect(_db_url(), row_factory=dict_row) as conn:
        async with conn.transaction():
            return await fn(conn)


def _scripts_app() -> typer.Typer:
    app = typer.Typer(help="The page-script catalogue (TypeScript run in the page by BrowserHive).",
                      no_args_is_help=True)

    @app.command("add")
    def add(
        script_id: str = typer.Argument(..., help="lowercase id, e.g. autoscroll"),
        file: str = typer.Option(..., "--file", help="TypeScript source file, or - for stdin"),
        phase: str = typer.Option("behavior", "--phase", help="behavior | preload"),
        options: Optional[str] = typer.Option(None, "--options", help="JSON object passed as __bh.opts[id]"),
    ) -> None:
        """Append a version (re-adding the newest source reuses that version)."""
        from ledger.crawl.scripts import add_script

        try:
            source = sys.stdin.read() if file == "-" else Path(file).read_text(encoding="utf-8")
        except OSError as exc:
            _fail(f"cannot read {file}: {exc.strerror}")
        opts = None
        if options is not None:
            try:
                opts = json.loads(options)
            except ValueError:
                opts = None
            if not isinstance(opts, dict):
                _fail("--options must be a JSON object")
        try:
            version, created = asyncio.run(
                _with_conn(lambda c: add_script(c, script_id, source, phase=phase, options=opts)))
        except ValueError as exc:
            _fail(str(exc))
        typer.echo(f"{script_id}@{version} {'added' if created else 'reused (same source)'}")

    @app.command("list")
    def list_(all_versions: bool = typer.Option(False, "--all"), as_json: bool = typer.Option(False, "--json")) -> None:
        """The newest version of each id (every version with --all)."""

        async def rows(conn):  # type: ignore[no-untyped-def]
            sql = ("SELECT id, version, phase, sha256, enabled, octet_length(source) AS bytes FROM scripts"
                   + ("" if all_versions else " s WHERE version = (SELECT max(version) FROM scripts WHERE id = s.id)")
                   + " ORDER BY id, version")
            return [dict(r) for r in await (await conn.execute(sql)).fetchall()]

        found = asyncio.run(_with_conn(rows))
        if as_json:
            typer.echo(json.dumps(found))
            return
        for r in found:
            typer.echo(f"{r['id']}@{r['version']}\t{r['phase']}\t{'enabled' if r['enabled'] else 'disabled'}"
                       f"\t{r['bytes']} B\t{r['sha256'][:12]}")

    def _toggle(ids: list[str], version: Optional[int], enabled: bool) -> None:
        async def run(conn):  # type: ignore[no-untyped-def]
            cur = await conn.execute("SELECT DISTINCT id FROM scripts WHERE id = ANY(%s)"
                                     + (" AND version = %s" if version else ""),
                                     (ids, version) if version else (ids,))
            found = {r["id"] for r in await cur.fetchall()}
            missing = [i for i in ids if i not in found]
            if missing:
                return missing
            await conn.execute("UPDATE scripts SET enabled = %s WHERE id = ANY(%s)"
                               + (" AND version = %s" if version else ""),
                               (enabled, ids, version) if version else (enabled, ids))
            return []

        missing = asyncio.run(_with_conn(run))
        if missing:
            _fail("no such scripts, nothing changed: " + ", ".join(missing))
        typer.echo(f"{'enabled' if enabled else 'disabled'}: {', '.join(ids)}")

    @app.command("enable")
    def enable(ids: list[str] = typer.Argument(...), version: Optional[int] = typer.Option(None, "--version")) -> None:
        """Put scripts in the default set (all versions unless --version)."""
        _toggle(ids, version, True)

    @app.command("disable")
    def disable(ids: list[str] = typer.Argument(...), version: Optional[int] = typer.Option(None, "--version")) -> None:
        """Take scripts out of the default set (they still run when named explicitly)."""
        _toggle(ids, version, False)

    @app.command("load-defaults")
    def load_defaults_cmd() -> None:
        """Add the scripts the project ships (ledger/crawl/catalogue), idempotently."""
        from ledger.crawl.scripts import load_defaults

        for script_id, version, created in asyncio.run(_with_conn(load_defaults)):
            typer.echo(f"{script_id}@{version} {'added' if created else 'already there'}")

    return app


def register(app: typer.Typer) -> None:
    """Add ``waggle targets …`` and ``waggle scripts …`` to ``app``."""
    app.add_typer(_targets_app(), name="targets")
    app.add_typer(_scripts_app(), name="scripts")
