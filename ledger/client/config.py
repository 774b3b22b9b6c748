"""Where the client finds the ledger API and a token.

Order (first match wins):

1. ``WAGGLE_API_URL`` (+ ``WAGGLE_TOKEN``, a Bearer JWT) from the environment;
2. the local stack's ``state_dir/stack.json`` written by ``waggle dev up``
   (``{"services": {"ledger": url, "issuer": url, ...}, "subject", "organization"}``):
   the API URL is ``services.ledger``, the token is minted from the dev issuer with
   ``POST {issuer}/token {"subject", "organizations", "expiresIn"}`` → ``{"access_token"}``.

``WAGGLE_TOKEN`` also wins over the stack's issuer when only the token is set.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import httpx

from ledger.settings import default_state_dir

TOKEN_LIFETIME = "1h"  # a CLI session; the flow's own token is minted elsewhere


class ClientConfigError(RuntimeError):
    """The client cannot tell which API to call or with which token; ``str()`` says what to set."""


@dataclass(frozen=True)
class ClientConfig:
    """API base URL (no trailing slash) and the Bearer token (None = send no Authorization)."""

    api_url: str
    token: str | None
    source: str  # "environment" or the stack.json path, for messages


def _stack_file(env: Mapping[str, str]) -> Path:
    state = env.get("WAGGLE_STATE_DIR")
    return (Path(state).resolve() if state else default_state_dir()) / "stack.json"


def mint_token(issuer_url: str, subject: str, organizations: list[str], expires_in: str = TOKEN_LIFETIME) -> str:
    """Ask the dev issuer for a JWT (``POST {issuer}/token``); raises ClientConfigError when it does not answer."""
    url = issuer_url.rstrip("/") + "/token"
    try:
        resp = httpx.post(
            url,
            json={"subject": subject, "organizations": organizations, "expiresIn": expires_in},
            timeout=10.0,
        )
    except httpx.HTTPError as exc:
        raise ClientConfigError(
            f"the dev issuer at {issuer_url} does not answer ({exc.__class__.__name__}); "
            "start the local stack with `waggle dev up`, or set WAGGLE_API_URL and WAGGLE_TOKEN"
        ) from exc
    if resp.status_code // 100 != 2:
        raise ClientConfigError(f"the dev issuer refused a token: POST {url} → {resp.status_code} {resp.text[:200]}")
    body = resp.json()
    for key in ("access_token", "token", "id_token"):
        if isinstance(body.get(key), str) and body[key]:
            return body[key]
    raise ClientConfigError(f"the dev issuer answered without a token: {resp.text[:200]}")


def resolve_config(env: Mapping[str, str] | None = None) -> ClientConfig:
    """The API URL and token to use; raises ClientConfigError naming what to set when neither source exists."""
    env = os.environ if env is None else env
    api_url = (env.get("WAGGLE_API_URL") or "").strip()
    token = (env.get("WAGGLE_TOKEN") or "").strip() or None
    if api_url:
        return ClientConfig(api_url.rstrip("/"), token, "environment")

    stack_file = _stack_file(env)
    if not stack_file.is_file():
        raise ClientConfigError(
            "no ledger API to talk to: set WAGGLE_API_URL (and WAGGLE_TOKEN), "
            f"or start the local stack with `waggle dev up` (no {stack_file})"
        )
    try:
        stack = json.loads(stack_file.read_text())
        services = stack["services"]
        ledger_url = services.get("ledger") or services["api"]
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise ClientConfigError(f"{stack_file} is not a stack file written by `waggle dev up`: {exc!r}") from exc
    if token is None:
        issuer = services.get("issuer")
        if not issuer:
            raise ClientConfigError(f"{stack_file} names no issuer; set WAGGLE_TOKEN")
        subject = stack.get("subject") or "waggle-user"
        org = stack.get("organization")
        token = mint_token(issuer, subject, [org] if org else [])
    return ClientConfig(str(ledger_url).rstrip("/"), token, str(stack_file))
