"""``waggle fga deploy``, ``waggle drain``, ``waggle grant|revoke submitter|admin USER ORG``.

Settings come from ``WAGGLE_*`` (see :mod:`ledger.settings`). OpenFGA not answering is
reported as one plain sentence on stderr (exit 1), never a stack trace.
"""

from __future__ import annotations

import asyncio
import json
from enum import Enum
from pathlib import Path

import typer

MODEL_JSON = Path(__file__).with_name("model.json")


class GrantRelation(str, Enum):
    submitter = "submitter"
    admin = "admin"


def _fail(message: str) -> None:
    typer.echo(message, err=True)
    raise typer.Exit(1)


async def deploy(api_url: str, *, store_id: str | None, name: str, token: str | None) -> tuple[str, str]:
    """Create the store (unless ``store_id`` is given) and write ``model.json``; returns the ids."""
    from openfga_sdk import OpenFgaClient
    from openfga_sdk.client.configuration import ClientConfiguration
    from openfga_sdk.credentials import CredentialConfiguration, Credentials
    from openfga_sdk.models.create_store_request import CreateStoreRequest

    creds = Credentials(method="api_token", configuration=CredentialConfiguration(api_token=token)) if token else None
    async with OpenFgaClient(ClientConfiguration(api_url=api_url, credentials=creds)) as client:
        if not store_id:
            store_id = (await client.create_store(CreateStoreRequest(name=name))).id
        client.set_store_id(store_id)
        res = await client.write_authorization_model(json.loads(MODEL_JSON.read_text()))
        return store_id, res.authorization_model_id


def describe_grant(user: str, relation: str, org: str, *, grant: bool, changed: bool, allowed: bool) -> str:
    """The one sentence ``grant``/``revoke`` print, built from the re-checked answer."""
    what = ("wrote" if changed else "already there") if grant else ("deleted" if changed else "already absent")
    note = ""
    if grant and not allowed:
        note = " — written, but the Check does not pass: is WAGGLE_FGA_MODEL_ID pointing at an old model?"
    elif not grant and allowed:
        note = " — still allowed by another relation"
    can = "can" if allowed else "cannot"
    return f"{user} {can} start crawls for {org} ({what}: user:{user} {relation} organization:{org}){note}"


async def _grant(settings, relation: str, user: str, org: str, *, grant: bool) -> str:
    from openfga_sdk.exceptions import ApiException

    from ledger.authz.fga import Authz, is_already_in_desired_state

    az = Authz.from_settings(settings)
    t = {"user": f"user:{user}", "relation": relation, "object": f"organization:{org}"}
    try:
        changed = True
        try:
            await (az.write([t]) if grant else az.write(None, [t]))
        except ApiException as exc:
            if not is_already_in_desired_state(exc):
                raise
            changed = False
        allowed = await az.check(f"user:{user}", "can_submit", f"organization:{org}")
        return describe_grant(user, relation, org, grant=grant, changed=changed, allowed=allowed)
    finally:
        await az.close()


async def _drain(settings) -> dict:
    from ledger.authz.fga import Authz
    from ledger.authz.outbox import drain_all
    from ledger.db.embedded import database_url
    from ledger.db.pool import open_pool

    az = Authz.from_settings(settings)
    pool = await open_pool(database_url(settings), max_size=2)
    try:
        return (await drain_all(pool, az)).as_dict()
    finally:
        await pool.close()
        await az.close()


def _run(coro):
    from openfga_sdk.exceptions import ApiException

    from ledger.authz.fga import FgaUnavailable
    from ledger.settings import MissingSettings

    try:
        return asyncio.run(coro)
    except (FgaUnavailable, MissingSettings) as exc:
        _fail(str(exc))
    except ApiException as exc:
        _fail(f"OpenFGA refused: {exc}")


def register(app: typer.Typer) -> None:
    """Add ``fga deploy``, ``drain``, ``grant`` and ``revoke`` to ``app``."""
    fga = typer.Typer(help="OpenFGA store and authorization model.", no_args_is_help=True)

    @fga.command("deploy")
    def deploy_cmd(
        api_url: str = typer.Option(None, help="OpenFGA URL (default WAGGLE_FGA_API_URL)"),
        store_id: str = typer.Option(None, help="write the model into this existing store instead of a new one"),
        name: str = typer.Option("waggle", help="name of the new store"),
    ) -> None:
        """Create the store and write ledger/authz/model.fga; prints WAGGLE_FGA_STORE_ID / _MODEL_ID."""
        from ledger.authz.fga import explain_unreachable
        from ledger.settings import Settings

        settings = Settings()
        url = api_url or settings.fga_api_url
        try:
            sid, mid = asyncio.run(deploy(url, store_id=store_id, name=name, token=settings.fga_api_token))
        except Exception as exc:  # noqa: BLE001 - one sentence, no traceback
            from ledger.authz.fga import is_unreachable
            import aiohttp

            if is_unreachable(exc) or isinstance(exc, aiohttp.ClientError):
                _fail(explain_unreachable(url, exc))
            _fail(f"OpenFGA refused the deployment: {exc}")
        typer.echo(f"WAGGLE_FGA_STORE_ID={sid}")
        typer.echo(f"WAGGLE_FGA_MODEL_ID={mid}")

    app.add_typer(fga, name="fga")

    @app.command("drain")
    def drain_cmd() -> None:
        """Deliver pending fga_outbox rows to OpenFGA now; prints the counts as JSON."""
        from ledger.settings import Settings

        result = _run(_drain(Settings()))
        typer.echo(json.dumps(result))
        if result and result.get("unreachable"):
            raise typer.Exit(1)

    @app.command("grant")
    def grant_cmd(relation: GrantRelation, user: str, org: str) -> None:
        """Let USER start crawls for ORG (stored submitter or admin tuple; membership is never stored)."""
        from ledger.settings import Settings

        typer.echo(_run(_grant(Settings(), relation.value, user, org, grant=True)))

    @app.command("revoke")
    def revoke_cmd(relation: GrantRelation, user: str, org: str) -> None:
        """Delete USER's submitter or admin tuple on ORG."""
        from ledger.settings import Settings

        typer.echo(_run(_grant(Settings(), relation.value, user, org, grant=False)))
