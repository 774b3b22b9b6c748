"""The runner's ``u/admin/*`` variables: the flow's JWT minted from the dev issuer, service URLs."""

from __future__ import annotations

import httpx

from devstack.layout import FLOW_SUBJECT, WORKSPACE, StackConfig
from devstack.supervisor import StackError

ALLOW_PRIVATE_VARIABLE = "u/admin/waggle_allow_private_hosts"  # optional 6th variable of the flow
FLOW_TOKEN_LIFETIME = "30d"  # re-minted on every `up`: the issuer's key changes at each start


def mint(config: StackConfig, subject: str, organizations: list[str], expires_in: str) -> str:
    """A JWT for ``subject`` from the stack's dev issuer. Raises StackError when it refuses."""
    resp = httpx.post(
        f"{config.url('issuer')}/token",
        json={"subject": subject, "organizations": organizations, "expiresIn": expires_in},
        timeout=10.0,
    )
    if not resp.is_success:
        raise StackError(f"the dev issuer refused a token: {resp.status_code} {resp.text[:200]}")
    return resp.json()["access_token"]


def set_variables(config: StackConfig, flow_token: str) -> None:
    """Upsert the five ``u/admin/*`` variables in the runner (scheduler.md §3), as scripts/windmill-variables does."""
    from ledger.client import windmill_vars as wv

    try:
        values = wv.build_values(
            flow_token=flow_token,
            api_url=config.url("ledger"),
            endpoints=[config.url(n) for n in config.capture_names()],
            tls_ca="",  # plain HTTP on loopback; written on purpose
            ts_compile_url=config.url("tscompile"),
        )
        # the flow's robots.txt fetch goes through the private-host guard; local sites need it open
        values[ALLOW_PRIVATE_VARIABLE] = "1"
        wv.write_variables(config.url("windmill"), config.secret("windmill_token"), WORKSPACE, values)
    except (wv.VariableError, wv.WindmillError) as exc:
        raise StackError(f"setting the Windmill variables failed: {exc}") from exc


def seed(config: StackConfig) -> None:
    """Mint the flow's token (subject ``waggle-flow``) and write every variable."""
    set_variables(config, mint(config, FLOW_SUBJECT, [config.organization], FLOW_TOKEN_LIFETIME))
