"""Who is calling (reference/ledger.md §3): JWT, dev header, or deny — chosen once at start-up.

* **jwt** when ``WAGGLE_OIDC_ISSUER`` is set (wins over the dev header): ``Authorization:
  Bearer <token>`` (exact prefix), RS256 only, signature checked against the issuer's
  ``/.well-known/jwks.json`` (PyJWT ``PyJWKClient``: cached; an unknown ``kid`` refetches at most every 10 s),
  ``iss`` equal, ``aud`` containing ``WAGGLE_OIDC_AUDIENCE``, ``exp`` required and not passed,
  ``sub`` a non-empty string; ``organizations`` = the claim's non-empty strings (else ``[]``).
* **header** when ``WAGGLE_DEV_IDENTITY=1`` and no issuer: ``X-Waggle-Subject`` (not trimmed;
  empty → nobody), ``X-Waggle-Organizations`` (comma list, trimmed, empties dropped).
* **deny** otherwise: nobody.

A caller without identity gets 401 ``{"error":"unauthenticated"}``; the reason is logged (never
the token or claim values), not returned.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import anyio
import jwt
from fastapi import Request

from ledger.settings import Settings

log = logging.getLogger("waggle.identity")

SUBJECT_HEADER = "X-Waggle-Subject"
ORGANIZATIONS_HEADER = "X-Waggle-Organizations"


@dataclass(frozen=True)
class Identity:
    """An authenticated caller: ``subject`` and the organizations they claim membership of."""

    subject: str
    organizations: list[str] = field(default_factory=list)


def organizations_from_claim(value: Any) -> list[str]:
    """Keep the non-empty strings of a list claim; anything else → ``[]``."""
    if not isinstance(value, list):
        return []
    return [v for v in value if isinstance(v, str) and v]


def organizations_from_header(value: str | None) -> list[str]:
    """Split a comma list, trim each entry, drop empties (``" a , ,b"`` → ``["a", "b"]``)."""
    if not value:
        return []
    return [part.strip() for part in value.split(",") if part.strip()]


class Unauthenticated(Exception):
    """Raised by :func:`authenticate`; answered 401 ``{"error":"unauthenticated"}``."""


class DenyResolver:
    mode = "deny"
    label = "none"

    async def resolve(self, request: Request) -> Identity | None:
        return None


class HeaderResolver:
    mode = "header"
    label = "dev header"

    async def resolve(self, request: Request) -> Identity | None:
        subject = request.headers.get(SUBJECT_HEADER)
        if not subject:
            return None
        return Identity(subject, organizations_from_header(request.headers.get(ORGANIZATIONS_HEADER)))


class JwtResolver:
    mode = "jwt"
    REFETCH_COOLDOWN_S = 10.0

    def __init__(self, issuer: str, audience: str, *, jwks_url: str | None = None):
        self.issuer = issuer
        self.audience = audience
        self.label = f"JWT ({issuer})"
        self._refetch_lock = threading.Lock()
        self._last_refetch = float("-inf")
        self.jwks = jwt.PyJWKClient(jwks_url or issuer.rstrip("/") + "/.well-known/jwks.json", cache_keys=True,
                                    lifespan=600, timeout=10)

    def _key_for(self, kid: object) -> Any:
        """The issuer's key for ``kid``. An unknown kid refetches the JWKS at most once per
        ``REFETCH_COOLDOWN_S`` (so forged kids cannot make us hammer the issuer)."""
        if not isinstance(kid, str) or not kid:
            raise jwt.PyJWKClientError("the token has no kid")
        key = self.jwks.match_kid(self.jwks.get_signing_keys(), kid)
        if key is None:
            with self._refetch_lock:
                now = time.monotonic()
                if now - self._last_refetch >= self.REFETCH_COOLDOWN_S:
                    self._last_refetch = now
                    key = self.jwks.match_kid(self.jwks.get_signing_keys(refresh=True), kid)
        if key is None:
            raise jwt.PyJWKClientError(f"unknown kid {kid!r}")
        return key

    def verify(self, token: str) -> Identity | None:
        """Verify ``token`` (blocking: may fetch the JWKS); None when it does not pass."""
        try:
            header = jwt.get_unverified_header(token)
            if header.get("alg") != "RS256":
                raise jwt.InvalidAlgorithmError(f"alg {header.get('alg')!r} is not RS256")
            key = self._key_for(header.get("kid"))
            claims = jwt.decode(
                token,
                key.key,
                algorithms=["RS256"],
                audience=self.audience,
                issuer=self.issuer,
                options={"require": ["exp", "iss", "aud", "sub"]},
            )
        except (jwt.PyJWTError, ValueError) as exc:
            log.info("JWT rejected: %s", type(exc).__name__)
            return None
        subject = claims.get("sub")
        if not isinstance(subject, str) or not subject:
            log.info("JWT rejected: no sub")
            return None
        return Identity(subject, organizations_from_claim(claims.get("organizations")))

    async def resolve(self, request: Request) -> Identity | None:
        value = request.headers.get("authorization") or ""
        if not value.startswith("Bearer "):
            return None
        token = value[len("Bearer "):]
        if not token:
            return None
        return await anyio.to_thread.run_sync(self.verify, token)


def choose_resolver(settings: Settings) -> JwtResolver | HeaderResolver | DenyResolver:
    """JWT if an issuer is configured, else the dev header if ``WAGGLE_DEV_IDENTITY=1``, else deny."""
    if settings.oidc_issuer:
        return JwtResolver(settings.oidc_issuer, settings.oidc_audience)
    if settings.dev_identity:
        return HeaderResolver()
    return DenyResolver()


def startup_notes(settings: Settings, resolver: Any, host: str, port: int) -> list[tuple[int, str]]:
    """Start-up log lines ``(level, text)`` naming the identity mode (ledger.md §2.3, our names)."""
    notes: list[tuple[int, str]] = []
    loopback = host in ("127.0.0.1", "localhost", "::1")
    if resolver.mode == "header":
        notes.append((logging.WARNING, "WAGGLE_DEV_IDENTITY=1 — callers are trusted on the X-Waggle-Subject header."
                                       " Never enable this outside local development."))
        if not loopback:
            notes.append((logging.WARNING, f"The dev header is trusted on {host}:{port} — anyone who can reach this"
                                           " port can act as any user. Set WAGGLE_API_HOST=127.0.0.1,"
                                           " or set WAGGLE_OIDC_ISSUER"))
    elif resolver.mode == "deny":
        notes.append((logging.WARNING, "No identity is configured — every request is refused (401)."
                                       " Set WAGGLE_OIDC_ISSUER (JWT) or WAGGLE_DEV_IDENTITY=1 (dev header)"))
    elif settings.dev_identity:
        notes.append((logging.INFO, "WAGGLE_DEV_IDENTITY=1 is ignored — WAGGLE_OIDC_ISSUER takes precedence"))
    blocked = False
    if settings.crawls_enabled and resolver.mode != "jwt":
        blocked = True
        notes.append((logging.WARNING, "Crawl level reports will be refused (401): the flow reports with a Bearer"
                                       f" JWT, but identity is {resolver.label}. Set WAGGLE_OIDC_ISSUER"))
    reports = "off" if not settings.crawls_enabled else ("blocked" if blocked else "ready")
    notes.append((logging.INFO, f"waggle ledger listening on {host}:{port} — identity: {resolver.label};"
                                f" crawl level reports: {reports}"))
    return notes


async def authenticate(request: Request) -> Identity:
    """The caller's identity via the app's resolver, else (JWT mode, no ``Authorization``) the web
    page's session cookie (``ledger.web.auth``); raises :class:`Unauthenticated`, or
    ``CsrfRefused`` for an unsafe session call without its CSRF token."""
    identity = await request.app.state.identity.resolve(request)
    if identity is None and request.app.state.identity.mode == "jwt":
        from ledger.web.auth import session_identity

        identity = await session_identity(request)
    if identity is None:
        raise Unauthenticated()
    return identity
