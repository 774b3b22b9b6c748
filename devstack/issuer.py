"""Dev OIDC issuer (loopback only): signs RS256 JWTs for tests and the local stack
(reference/ledger.md §3.1).

* a fresh RSA key at every start; ``kid`` = RFC 7638 thumbprint of the public JWK;
* ``GET /.well-known/openid-configuration`` → ``{issuer, jwks_uri, token_endpoint,
  id_token_signing_alg_values_supported}``;
* ``GET /.well-known/jwks.json`` → ``{keys: [public JWK + kid, alg RS256, use sig]}``;
* ``POST /token`` ``{subject, organizations?, expiresIn?}`` (``expiresIn``: seconds, or a span
  like ``1h``/``30m``/``-1h``; default 1 h) → ``{access_token, token_type: "Bearer",
  expires_in}``; no subject → 400 ``{"error":"subject is required"}``;
* the OIDC authorization-code flow with PKCE (S256 only), for the ledger's web page:
  ``GET /authorize`` (``response_type=code``, ``client_id``, ``redirect_uri`` on a loopback
  host, ``state``, ``code_challenge``, ``code_challenge_method=S256``, ``nonce?``, ``prompt?``)
  → 302 to ``redirect_uri?code=…&state=…`` at once for the issuer's ``--user`` (the local
  stack's user: one click), or a sign-in form (any subject) without ``--user`` or with
  ``prompt=login``; ``POST /authorize`` (the form) → the same redirect. ``POST /token`` with a
  form body ``grant_type=authorization_code&code&redirect_uri&client_id&code_verifier`` →
  ``{access_token, id_token, token_type, expires_in}`` (codes: single use, 60 s); errors are
  OAuth's 400 ``{error, error_description}``.

Run: ``python -m devstack.issuer --host 127.0.0.1 --port 9099 [--issuer URL] [--audience waggle]
[--user SUBJECT --organizations ORG,…]``.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import logging
import html
import re
import secrets
import time
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit

import jwt
from cryptography.hazmat.primitives.asymmetric import rsa
from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse

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


CODE_TTL_S = 60
TOKEN_TTL_S = 3600
AUTHORIZE_PARAMS = ("response_type", "client_id", "redirect_uri", "state", "code_challenge",
                    "code_challenge_method", "nonce")


def s256(verifier: str) -> str:
    """PKCE ``code_challenge`` of ``verifier`` (RFC 7636 S256)."""
    return _b64(hashlib.sha256(verifier.encode("ascii")).digest())


def _authorize_problem(params: dict[str, str]) -> str | None:
    """Why an authorize request cannot be answered with a redirect (None when it can)."""
    redirect = params.get("redirect_uri", "")
    parts = urlsplit(redirect)
    if parts.scheme not in ("http", "https") or parts.hostname not in LOOPBACK:
        return "redirect_uri must be an http(s) URL on a loopback host (this is a dev issuer)"
    if params.get("response_type") != "code":
        return "response_type must be code"
    if not params.get("client_id"):
        return "client_id is required"
    if not params.get("code_challenge") or params.get("code_challenge_method") != "S256":
        return "PKCE is required: code_challenge with code_challenge_method=S256"
    return None


def _login_form(params: dict[str, str], subject: str, organizations: str) -> str:
    esc = html.escape
    hidden = "".join(f'<input type="hidden" name="{k}" value="{esc(params.get(k, ""))}">' for k in AUTHORIZE_PARAMS)
    return ("<!doctype html><html lang=en><meta charset=utf-8><title>dev issuer — sign in</title>"
            "<body style='font:15px system-ui;max-width:30rem;margin:3rem auto'>"
            "<h1 style='font-size:1.2rem'>waggle dev issuer</h1><p>Signs anyone in: local development only.</p>"
            f"<form method=post action=authorize>{hidden}"
            f"<p><label>Subject <input name=subject id=subject value='{esc(subject)}' required></label></p>"
            f"<p><label>Organizations (comma list) <input name=organizations id=organizations"
            f" value='{esc(organizations)}'></label></p><button id=signin type=submit>Sign in</button></form>")


def create_app(issuer: str, audience: str = "waggle", key: SigningKey | None = None,
               user: str | None = None, organizations: list[str] | None = None) -> FastAPI:
    """The issuer app for ``issuer`` (e.g. ``http://127.0.0.1:9099``) and ``audience``; ``user``
    (with ``organizations``) is signed in at once by ``GET /authorize`` (no form)."""
    key = key or SigningKey()
    issuer = issuer.rstrip("/")
    app = FastAPI(title="waggle dev issuer", docs_url=None, redoc_url=None)
    app.state.key = key
    codes: dict[str, dict[str, Any]] = {}

    def mint(subject: str, orgs: list[str], expires_s: int, aud: str, nonce: str | None = None) -> str:
        now = int(time.time())
        claims = {"sub": subject, "organizations": [o for o in orgs if isinstance(o, str) and o],
                  "iss": issuer, "aud": aud, "iat": now, "exp": now + expires_s}
        if nonce:
            claims["nonce"] = nonce
        return key.sign(claims)

    def redirect_with_code(params: dict[str, str], subject: str, orgs: list[str]) -> RedirectResponse:
        now = time.monotonic()
        for stale in [c for c, v in codes.items() if v["until"] < now]:
            del codes[stale]
        code = secrets.token_urlsafe(24)
        codes[code] = {"subject": subject, "organizations": orgs, "client_id": params["client_id"],
                       "redirect_uri": params["redirect_uri"], "challenge": params["code_challenge"],
                       "nonce": params.get("nonce") or None, "until": now + CODE_TTL_S}
        query = {"code": code, **({"state": params["state"]} if params.get("state") else {})}
        sep = "&" if "?" in params["redirect_uri"] else "?"
        return RedirectResponse(params["redirect_uri"] + sep + urlencode(query), status_code=302)

    @app.get("/authorize", response_model=None)
    async def authorize(request: Request) -> HTMLResponse | RedirectResponse:
        params = dict(request.query_params)
        problem = _authorize_problem(params)
        if problem:
            return HTMLResponse(f"<p id=error>{html.escape(problem)}</p>", status_code=400)
        if user and params.get("prompt") != "login":
            return redirect_with_code(params, user, list(organizations or []))
        return HTMLResponse(_login_form(params, user or "", ",".join(organizations or [])))

    @app.post("/authorize", response_model=None)
    async def authorize_form(request: Request) -> HTMLResponse | RedirectResponse:
        params = dict(parse_qsl((await request.body()).decode("utf-8", "replace")))
        problem = _authorize_problem(params)
        subject = params.get("subject", "").strip()
        if problem or not subject:
            return HTMLResponse(f"<p id=error>{html.escape(problem or 'subject is required')}</p>", status_code=400)
        orgs = [o.strip() for o in params.get("organizations", "").split(",") if o.strip()]
        return redirect_with_code(params, subject, orgs)

    def grant_error(error: str, description: str) -> JSONResponse:
        return JSONResponse({"error": error, "error_description": description}, 400)

    def code_grant(form: dict[str, str]) -> JSONResponse:
        if form.get("grant_type") != "authorization_code":
            return grant_error("unsupported_grant_type", "grant_type must be authorization_code")
        entry = codes.pop(form.get("code", ""), None)
        if entry is None or entry["until"] < time.monotonic():
            return grant_error("invalid_grant", "unknown, used or expired code")
        if form.get("redirect_uri") != entry["redirect_uri"] or form.get("client_id") != entry["client_id"]:
            return grant_error("invalid_grant", "redirect_uri or client_id differ from the authorize request")
        if not secrets.compare_digest(s256(form.get("code_verifier", "")), entry["challenge"]):
            return grant_error("invalid_grant", "code_verifier does not match the code_challenge")
        subject, orgs = entry["subject"], entry["organizations"]
        return JSONResponse({
            "access_token": mint(subject, orgs, TOKEN_TTL_S, audience),
            "id_token": mint(subject, orgs, TOKEN_TTL_S, entry["client_id"], entry["nonce"]),
            "token_type": "Bearer", "expires_in": TOKEN_TTL_S,
        })

    @app.get("/.well-known/openid-configuration")
    async def discovery() -> dict:
        return {
            "issuer": issuer,
            "jwks_uri": issuer + "/.well-known/jwks.json",
            "token_endpoint": issuer + "/token",
            "authorization_endpoint": issuer + "/authorize",
            "response_types_supported": ["code"],
            "grant_types_supported": ["authorization_code"],
            "code_challenge_methods_supported": ["S256"],
            "subject_types_supported": ["public"],
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
        if request.headers.get("content-type", "").startswith("application/x-www-form-urlencoded"):
            return code_grant(dict(parse_qsl((await request.body()).decode("utf-8", "replace"))))
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
        return JSONResponse({"access_token": mint(subject, orgs, expires_s, audience), "token_type": "Bearer",
                             "expires_in": expires_s})

    return app


def run(host: str = "127.0.0.1", port: int = 9099, issuer: str | None = None, audience: str = "waggle",
        ready_file: str | None = None, user: str | None = None, organizations: list[str] | None = None) -> None:
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
    app = create_app(issuer, audience, user=user, organizations=organizations)
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
    parser.add_argument("--user", default=None, help="subject signed in at once by GET /authorize (one click)")
    parser.add_argument("--organizations", default="", help="comma list: organizations of --user")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        orgs = [o.strip() for o in args.organizations.split(",") if o.strip()]
        run(args.host, args.port, args.issuer, args.audience, args.ready_file, args.user or None, orgs)
    except ValueError as exc:
        parser.exit(2, f"devstack.issuer: {exc}\n")


if __name__ == "__main__":
    main()
