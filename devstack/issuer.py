"""Dev OIDC issuer (loopback only): signs RS256 JWTs for tests and the local stack
(reference/ledger.md §3.1).

* a fresh RSA key at every start; ``kid`` = RFC 7638 thumbprint of the public JWK;
* ``GET /.well-known/openid-configuration`` → ``{issuer, jwks_uri, token_endpoint,
  id_token_signing_alg_values_supported}``;
* ``GET /.well-known/jwks.json`` → ``{keys: [public JWK + kid, alg RS256, use sig]}``;
* ``POST /token`` ``{subject, organizations?, expiresIn?}`` (``expiresIn``: seconds, or a span
  like ``1h``/``30m``/``-1h``; default 1 h) → ``{access_token, token_type: "Bearer",
  expires_in}``; no subject → 400 ``{"error":"subject is required"}``.

Run: ``python -m devstack.issuer --host 127.0.0.1 --port 9099 [--issuer URL] [--audience waggle]``.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import logging
import re
import time
from typing import Any

import jwt
from cryptography.hazmat.primitives.asymmetric import rsa
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

log = logging.getLogger("waggle.issuer")

LOOPBACK = ("127.0.0.1", "localhost", "::1")
_SPAN = re.compile(r"^(-?\d+)\s*([smhd]?)$")
_UNIT_S = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_span(value: Any, default_s: int = 3600) -> int:
    """Seconds from ``3600``, ``"1h"``, ``"30m"``, ``"-1h"``, ``"45s"``, ``"2d"``; None → default.

    Raises ``ValueError`` for anything else.
    """
    if value is None:
        return default_s
    if isinstance(value, bool):
        raise ValueError("expiresIn must be seconds or a span like 1h, 30m, -1h")
    if isinstance(value, int):
        return value
    match = _SPAN.match(str(value).strip())
    if not match:
        raise ValueError("expiresIn must be seconds or a span like 1h, 30m, -1h")
    return int(match.group(1)) * _UNIT_S[match.group(2)]


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


class SigningKey:
    """An in-memory RSA key with its public JWK and RFC 7638 ``kid``."""

    def __init__(self) -> None:
        self.private = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        numbers = self.private.public_key().public_numbers()
        e = _b64(numbers.e.to_bytes((numbers.e.bit_length() + 7) // 8, "big"))
        n = _b64(numbers.n.to_bytes((numbers.n.bit_length() + 7) // 8, "big"))
        thumb = json.dumps({"e": e, "kty": "RSA", "n": n}, separators=(",", ":"), sort_keys=True)
        self.kid = _b64(hashlib.sha256(thumb.encode()).digest())
        self.jwk = {"kty": "RSA", "n": n, "e": e, "kid": self.kid, "alg": "RS256", "use": "sig"}

    def sign(self, claims: dict) -> str:
        return jwt.encode(claims, self.private, algorithm="RS256", headers={"kid": self.kid})


def create_app(issuer: str, audience: str = "waggle", key: SigningKey | None = None) -> FastAPI:
    """The issuer app for ``issuer`` (e.g. ``http://127.0.0.1:9099``) and ``audience``."""
    key = key or SigningKey()
    issuer = issuer.rstrip("/")
    app = FastAPI(title="waggle dev issuer", docs_url=None, redoc_url=None)
    app.state.key = key

    @app.get("/.well-known/openid-configuration")
    async def discovery() -> dict:
        return {
            "issuer": issuer,
            "jwks_uri": issuer + "/.well-known/jwks.json",
            "token_endpoint": issuer + "/token",
            "id_token_signing_alg_values_supported": ["RS256"],
        }

    @app.get("/.well-known/jwks.json")
    async def jwks() -> dict:
        return {"keys": [key.jwk]}

    @app.get("/healthz")
    async def healthz() -> dict:
        return {"status": "ok", "issuer": issuer}

    @app.post("/token")
    async def token(request: Request) -> JSONResponse:
        try:
            body = await request.json()
        except ValueError:
            body = None
        if not isinstance(body, dict):
            return JSONResponse({"error": "the body must be a JSON object {subject, organizations?, expiresIn?}"}, 400)
        subject = body.get("subject")
        subject = subject.strip() if isinstance(subject, str) else ""
        if not subject:
            return JSONResponse({"error": "subject is required"}, 400)
        orgs = body.get("organizations") or []
        if not isinstance(orgs, list):
            return JSONResponse({"error": "organizations must be a list of strings"}, 400)
        try:
            expires_s = parse_span(body.get("expiresIn"))
        except ValueError as exc:
            return JSONResponse({"error": str(exc)}, 400)
        now = int(time.time())
        claims = {
            "sub": subject,
            "organizations": [o for o in orgs if isinstance(o, str) and o],
            "iss": issuer,
            "aud": audience,
            "iat": now,
            "exp": now + expires_s,
        }
        return JSONResponse({"access_token": key.sign(claims), "token_type": "Bearer", "expires_in": expires_s})

    return app


def run(host: str = "127.0.0.1", port: int = 9099, issuer: str | None = None, audience: str = "waggle",
        ready_file: str | None = None) -> None:
    """Serve the issuer on ``host:port`` (loopback only; port 0 = OS-chosen) until interrupted.

    ``issuer`` defaults to ``http://<host>:<bound port>``. Raises ``ValueError`` for a
    non-loopback host: this issuer signs anything for anyone.
    """
    import socket

    import uvicorn

    if host not in LOOPBACK:
        raise ValueError(f"the dev issuer listens on loopback only (127.0.0.1, localhost, ::1), not {host!r}")
    from devstack.serving import listen_socket

    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = listen_socket(host, port)
    bound = sock.getsockname()[1]
    shown = f"[{host}]" if family == socket.AF_INET6 else host
    issuer = issuer or f"http://{shown}:{bound}"
    log.warning("DEV ISSUER on %s:%d — signs tokens for any subject; never expose it. issuer=%s audience=%s",
                host, bound, issuer, audience)
    app = create_app(issuer, audience)
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
    if ready_file:
        from pathlib import Path

        original = server.startup

        async def startup(sockets=None):  # type: ignore[no-untyped-def]
            await original(sockets=sockets)
            tmp = Path(ready_file + ".tmp")
            tmp.write_text(json.dumps({"url": f"http://{shown}:{bound}", "issuer": issuer}))
            tmp.replace(ready_file)

        server.startup = startup  # type: ignore[method-assign]
    server.run(sockets=[sock])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m devstack.issuer", description="waggle dev OIDC issuer")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=9099)
    parser.add_argument("--issuer", default=None, help="issuer string (default http://host:port)")
    parser.add_argument("--audience", default="waggle")
    parser.add_argument("--ready-file", default=None, help="write {url, issuer} here once listening")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        run(args.host, args.port, args.issuer, args.audience, args.ready_file)
    except ValueError as exc:
        parser.exit(2, f"devstack.issuer: {exc}\n")


if __name__ == "__main__":
    main()
