"""``waggle dev …``: the embedded local stack (every service on 127.0.0.1, state in one directory)."""

from __future__ import annotations

from pathlib import Path

import typer

app = typer.Typer(no_args_is_help=True)

StateDir = typer.Option(
    None, "--state-dir", help="state directory (default: $WAGGLE_STATE_DIR, else the checkout's .waggle when run inside it, else ./.waggle)",
)


def _state_dir(given: Path | None) -> Path:
    from ledger.settings import default_state_dir

    return (given or default_state_dir()).resolve()


@app.command("up")
def up_cmd(
    captures: int = typer.Option(None, "--captures", min=1, max=16, help="capture servers (default 2, or as last time)"),
    state_dir: Path = StateDir,
    hint: bool = typer.Option(True, "--hint/--no-hint", help="end with what to try next (scripts/demo goes on by itself)"),
) -> None:
    """Start the whole stack (idempotent: running services are reused) and write stack.json."""
    from devstack.stack import StackError, config_from_state, up

    sd = _state_dir(state_dir)
    try:
        info = up(config_from_state(sd, captures), echo=typer.echo)
    except StackError as exc:
        typer.secho(f"waggle dev up: {exc}", fg="red", err=True)
        typer.echo(f"logs: {sd / 'logs'}; stop what started with `waggle dev down`.", err=True)
        raise typer.Exit(1) from None
    typer.echo(f"\nledger API: {info['services']['ledger']}  (you are '{info['subject']}' in '{info['organization']}')")
    if not hint:
        return
    typer.echo("next: serve a site on loopback, e.g. the Python docs copy:\n"
               "  python3 -m http.server --bind 127.0.0.1 8600 --directory /usr/share/doc/python3.11/html &\n"
               "  .venv/bin/waggle crawl http://127.0.0.1:8600/index.html --depth 1 --max-pages 5")


@app.command("down")
def down_cmd(state_dir: Path = StateDir) -> None:
    """Stop every service of the stack; its data stays in the state directory."""
    from devstack.stack import down

    stopped = down(_state_dir(state_dir), echo=typer.echo)
    if not stopped:
        typer.echo("nothing was running")


@app.command("status")
def status_cmd(state_dir: Path = StateDir) -> None:
    """List each service with its URL, pid, health and restarts (a capture server that died is
    started again by its keeper); exit 1 when any is down."""
    from rich.console import Console
    from rich.table import Table

    from devstack.stack import status

    sd = _state_dir(state_dir)
    rows = status(sd)
    table = Table("service", "url", "pid", "health", "restarts", title=f"local stack in {sd}", title_justify="left")
    for r in rows:
        health = "[green]ok[/]" if r["healthy"] else ("[yellow]not answering[/]" if r["running"] else "[red]stopped[/]")
        restarts = "" if r.get("restarts") is None else str(r["restarts"])
        table.add_row(r["name"], r["url"], str(r["pid"] or ""), health, restarts)
    Console().print(table)
    if len(rows) <= 1 and not rows[0]["running"]:
        typer.echo(f"no local stack in {sd}: start one with `waggle dev up` (or give --state-dir / $WAGGLE_STATE_DIR)")
    _print_replicas(next((r for r in rows if r["name"] == "ledger" and r["healthy"]), None))
    if not all(r["healthy"] for r in rows) or len(rows) <= 1:
        raise typer.Exit(1)


def _print_replicas(ledger: dict | None) -> None:
    """The ledger processes on the stack's database (``GET /api/health`` ``replicas``) and the
    crawls they run, under the table; nothing when the ledger does not answer."""
    import httpx

    if ledger is None:
        return
    try:
        body = httpx.get(f"{ledger['url']}/api/health", timeout=5).json()
    except (httpx.HTTPError, ValueError):
        return
    replicas = body.get("replicas") or []
    crawls = body.get("crawls") or {}
    typer.echo(f"ledger replicas: {len(replicas)} ({', '.join(r['id'] for r in replicas) or 'none seen'});"
               f" running crawls {crawls.get('running', '?')}, waiting levels {crawls.get('waitingLevels', '?')},"
               f" leased hosts {crawls.get('leasedHosts', '?')}")


@app.command("issuer")
def issuer_cmd(
    host: str = typer.Option("127.0.0.1", "--host"),
    port: int = typer.Option(None, "--port", help="default: WAGGLE_DEV_ISSUER_PORT (9099)"),
) -> None:
    """Run the dev OIDC issuer in the foreground (development only: it signs any subject)."""
    from devstack import issuer
    from ledger.settings import get_settings

    issuer.run(host=host, port=port or get_settings().dev_issuer_port)
