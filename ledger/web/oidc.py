"""OIDC authorization-code flow with PKCE (RFC 6749 §4.1, RFC 7636 S256) against
``WAGGLE_OIDC_ISSUER``: discovery (``/.well-known/openid-configuration``, cached), the
authorize URL, and the code exchange at the token endpoint.

The ledger then verifies the returned ``access_token`` exactly as it verifies a Bearer token
(RS256, JWKS, ``iss``, ``aud`` = ``WAGGLE_OIDC_AUDIENCE``): the issuer must give the web
client JWT access tokens for that audience, as it does for the CLI.
"""

from __future__ import annotations

import base64
import hashlib
import secrets
from typing import Any
from urllib.parse import urlencode

import httpx


class OidcError(Exception):
    """The issuer could not be used or refused the exchange; ``str()`` says what to fix."""


def pkce_pair() -> tuple[str, str]:
    """``(code_verifier, code_challenge)``: 43 random URL-safe characters and their S256."""
    verifier = secrets.token_urlsafe(32)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
    return verifier, challenge


class OidcClient:
    """The web page's client of one issuer. ``discover()`` is cached after the first success."""

    def __init__(self, issuer: str, client_id: str, client_secret: str | None, scopes: str, timeout_s: float = 10):
        self.issuer, self.client_id, self.client_secret = issuer.rstrip("/"), client_id, client_secret
        self.scopes, self.timeout_s = scopes, timeout_s
        self._config: dict[str, Any] | None = None

    async def discover(self) -> dict[str, Any]:
        """The discovery document; raises :class:`OidcError` when unreachable or lacking endpoints."""
        if self._config is None:
            url = self.issuer + "/.well-known/openid-configuration"
            try:
                async with httpx.AsyncClient(timeout=self.timeout_s) as client:
                    resp = await client.get(url)
                resp.raise_for_status()
                config = resp.json()
            except (httpx.HTTPError, ValueError) as exc:
                raise OidcError(f"the identity provider's discovery document ({url}) could not be read:"
                                f" {type(exc).__name__}") from None
            if not isinstance(config, dict) or not config.get("authorization_endpoint") or not config.get("token_endpoint"):
                raise OidcError(f"{url} names no authorization_endpoint/token_endpoint: the issuer does not"
                                " offer the authorization-code flow")
            self._config = config
        return self._config

    async def authorize_url(self, redirect_uri: str, state: str, challenge: str, nonce: str,
                            prompt: str | None = None) -> str:
        """Where to send the browser to sign in."""
        config = await self.discover()
        params = {"response_type": "code", "client_id": self.client_id, "redirect_uri": redirect_uri,
                  "scope": self.scopes, "state": state, "nonce": nonce, "code_challenge": challenge,
                  "code_challenge_method": "S256"}
        if prompt:
            params["prompt"] = prompt
        sep = "&" if "?" in config["authorization_endpoint"] else "?"
        return config["authorization_endpoint"] + sep + urlencode(params)

    async def exchange(self, code: str, redirect_uri: str, verifier: str) -> dict[str, Any]:
        """Trade ``code`` for tokens → the token response; raises :class:`OidcError`."""
        config = await self.discover()
        form = {"grant_type": "authorization_code", "code": code, "redirect_uri": redirect_uri,
                "client_id": self.client_id, "code_verifier": verifier}
        auth = (self.client_id, self.client_secret) if self.client_secret else None
        try:
            async with httpx.AsyncClient(timeout=self.timeout_s) as client:
                resp = await client.post(config["token_endpoint"], data=form, auth=auth)
            body = resp.json()
        except (httpx.HTTPError, ValueError) as exc:
            raise OidcError(f"the token endpoint did not answer: {type(exc).__name__}") from None
        if resp.status_code != 200 or not isinstance(body, dict) or not body.get("access_token"):
            what = body.get("error_description") or body.get("error") if isinstance(body, dict) else None
            raise OidcError(f"the identity provider refused the sign-in ({resp.status_code}: {what or 'no reason'})")
        return body
