"""The web page's routes (issue 16).

* ``GET /`` (JWT mode) — the app shell ``static/index.html``; it shows no data itself: every
  view calls the API with the session cookie, so it sees exactly what the API allows.
* ``GET /auth/login[?prompt=login]`` — starts the OIDC authorization-code flow with PKCE
  against ``WAGGLE_OIDC_ISSUER`` (303 to its ``authorization_endpoint``; the ``state`` is also
  kept in an HttpOnly cookie so a login started elsewhere cannot finish here).
* ``GET /auth/callback?code&state`` — exchanges the code, verifies the access token as the API
  verifies a Bearer token, opens a server-side session (``waggle_session`` cookie: HttpOnly,
  SameSite=Lax, Secure on https) → 303 to ``/``. Failures → 400/502 HTML saying what to do.
* ``GET /auth/session`` — 200 ``{subject, organizations, canSubmit, csrfToken, expiresAt,
  replayUrl}`` (``replayUrl``: the replay page on the replay origin, or null when replay is off);
  401 ``{"error":"unauthenticated"}`` without a live session.
* ``POST /auth/logout`` (``X-CSRF-Token``) — ends the session → 200 ``{"signedOut": true}``.
* ``GET /favicon.ico`` — the page's icon (``static/favicon.svg``, ``image/svg+xml``): browsers
  ask for it on every load whatever the page links, so it answers rather than 404.
* ``/static/*`` — the page's ES modules and CSS; ``/replay.html?source=<signed URL>&url=<page>``
  — the replay page (outside the service worker's ``/replay/`` scope), served only on the
  **replay origin** (:func:`replay_origin`): archived pages run their own scripts, so they must
  never run on the origin that holds the session; ``/replay/*`` — ReplayWeb.page's files, also on the replay origin only (``WAGGLE_REPLAY_DIR`` or
  ``ledger/web/replay/node_modules/replaywebpage``, resolved at start).

Outside JWT mode ``/auth/*`` answers 404 (sign-in needs an issuer).
"""

from __future__ import annotations

import html
import logging
import secrets
from datetime import datetime, timezone
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import anyio
import jwt
from fastapi import APIRouter, FastAPI, Request
from fastapi.responses import FileResponse, HTMLResponse, JSONResponse, RedirectResponse, Response
from fastapi.staticfiles import StaticFiles

from ledger.api.authorize import may_submit
from ledger.api.errors import NotPermitted
from ledger.api.identity import Unauthenticated
from ledger.web import sessions
from ledger.web.auth import on_replay_origin, session_identity, session_of
from ledger.web.oidc import OidcClient, OidcError, pkce_pair

log = logging.getLogger("waggle.web")
router = APIRouter()
HERE = Path(__file__).resolve().parent
STATIC = HERE / "static"
REPLAY_DEFAULT = HERE / "replay" / "node_modules" / "replaywebpage"


def replay_dir(configured: Path | None) -> Path | None:
    """ReplayWeb.page's directory when it holds ``ui.js`` and ``sw.js``, else None."""
    path = configured or REPLAY_DEFAULT
    return path if (path / "ui.js").is_file() and (path / "sw.js").is_file() else None


def _oidc(request: Request) -> OidcClient:
    resolver = request.app.state.identity
    if getattr(resolver, "mode", "") != "jwt" or on_replay_origin(request):
        raise NotPermitted()  # no sign-in where archived pages run
    client = getattr(request.app.state, "oidc", None)
    if client is None:
        s = request.app.state.settings
        client = request.app.state.oidc = OidcClient(resolver.issuer, s.oidc_client_id, s.oidc_client_secret,
                                                     s.oidc_scopes)
    return client


def _base(request: Request) -> str:
    configured = request.app.state.settings.web_url
    return (configured or str(request.base_url)).rstrip("/")


LOOPBACK_TWIN = {"127.0.0.1": "localhost", "localhost": "127.0.0.1"}


def replay_origin_for(settings: Any) -> str | None:
    """The origin replay runs on: ``WAGGLE_REPLAY_URL``, else on loopback the twin host of the
    page's (``127.0.0.1`` ↔ ``localhost``, same port): another origin and another site, so the
    session cookie and the API's answers stay out of reach of archived scripts. None → off."""
    if settings.replay_url:
        return settings.replay_url.rstrip("/")
    if settings.web_url:
        parts = urlsplit(settings.web_url)
        scheme, host, port = parts.scheme, parts.hostname or "", parts.port
    else:
        scheme, host, port = "http", settings.api_host, settings.api_port
    twin = LOOPBACK_TWIN.get(host)
    return f"{scheme}://{twin}" + (f":{port}" if port else "") if twin else None


def _secure(request: Request) -> bool:
    return _base(request).startswith("https://")


def _problem(status: int, message: str) -> HTMLResponse:
    return HTMLResponse(
        "<!doctype html><html lang=en><meta charset=utf-8><title>waggle — sign-in</title>"
        "<body style='font:15px system-ui;max-width:40rem;margin:3rem auto'>"
        f"<h1 style='font-size:1.2rem'>Sign-in did not work</h1><p id=problem>{html.escape(message)}</p>"
        "<p><a href='/auth/login'>Try again</a> · <a href='/'>Back to waggle</a></p>", status_code=status)


def shell() -> FileResponse:
    """The app shell (no data in it)."""
    return FileResponse(STATIC / "index.html", headers={"Cache-Control": "no-store"})


@router.get("/auth/login", response_model=None, response_class=HTMLResponse)
async def login(request: Request, prompt: str | None = None) -> Response:
    client = _oidc(request)
    if prompt not in (None, "login"):
        return _problem(400, "prompt may only be login")
    verifier, challenge = pkce_pair()
    nonce = secrets.token_urlsafe(16)
    redirect_uri = _base(request) + "/auth/callback"
    try:
        state = await sessions.begin_login(request.app.state.services.pool, verifier, nonce, redirect_uri)
        target = await client.authorize_url(redirect_uri, state, challenge, nonce, prompt)
    except OidcError as exc:
        return _problem(502, str(exc))
    resp = RedirectResponse(target, status_code=303)
    resp.set_cookie(sessions.LOGIN_COOKIE, state, max_age=sessions.LOGIN_TTL_S, path="/auth", httponly=True,
                    samesite="lax", secure=_secure(request))
    return resp


def _check_nonce(request: Request, id_token: str | None, nonce: str) -> bool:
    """True when there is no id_token, or it is the issuer's, for our client, with our nonce."""
    if not id_token:
        return True
    resolver, settings = request.app.state.identity, request.app.state.settings
    try:
        key = resolver._key_for(jwt.get_unverified_header(id_token).get("kid"))
        claims = jwt.decode(id_token, key.key, algorithms=["RS256"], audience=settings.oidc_client_id,
                            issuer=resolver.issuer)
    except (jwt.PyJWTError, ValueError):
        return False
    return secrets.compare_digest(str(claims.get("nonce", "")), nonce)


@router.get("/auth/callback", response_model=None, response_class=HTMLResponse)
async def callback(request: Request, code: str | None = None, state: str | None = None,
                   error: str | None = None, error_description: str | None = None) -> Response:
    client = _oidc(request)
    if error:
        return _problem(400, f"the identity provider said {error}: {error_description or 'no reason given'}")
    cookie = request.cookies.get(sessions.LOGIN_COOKIE, "")
    if not code or not state or not secrets.compare_digest(cookie, state):
        return _problem(400, "this sign-in was not started in this browser (or its cookie expired): start again")
    pending = await sessions.take_login(request.app.state.services.pool, state)
    if pending is None:
        return _problem(400, "this sign-in is unknown or older than 10 minutes: start again")
    try:
        tokens = await client.exchange(code, pending["redirect_uri"], pending["code_verifier"])
    except OidcError as exc:
        return _problem(502, str(exc))
    token = tokens["access_token"]
    identity = await anyio.to_thread.run_sync(request.app.state.identity.verify, token)
    ok_nonce = await anyio.to_thread.run_sync(_check_nonce, request, tokens.get("id_token"), pending["nonce"])
    if identity is None or not ok_nonce:
        return _problem(502, "the identity provider's token does not pass this ledger's checks (issuer, audience"
                             " WAGGLE_OIDC_AUDIENCE, RS256 signature, nonce): see the ledger's log")
    exp = jwt.decode(token, options={"verify_signature": False})["exp"]
    expires_at = datetime.fromtimestamp(exp, timezone.utc)
    session_id, _ = await sessions.create(request.app.state.services.pool, token, identity.subject, expires_at)
    log.info("Web sign-in: %s", identity.subject)
    resp = RedirectResponse("/", status_code=303)
    resp.set_cookie(sessions.SESSION_COOKIE, session_id, max_age=max(0, exp - int(datetime.now(timezone.utc).timestamp())),
                    path="/", httponly=True, samesite="lax", secure=_secure(request))
    resp.delete_cookie(sessions.LOGIN_COOKIE, path="/auth")
    return resp


@router.get("/auth/session")
async def current_session(request: Request) -> dict:
    _oidc(request)
    identity = await session_identity(request)
    session = await session_of(request)
    if identity is None or session is None:
        raise Unauthenticated()
    replay = request.app.state.replay_origin if request.app.state.replay_dir is not None else None
    return {"subject": identity.subject, "organizations": list(identity.organizations),
            "canSubmit": await may_submit(request, identity), "csrfToken": session.csrf_token,
            "replayUrl": replay + "/replay.html" if replay else None,
            "expiresAt": session.expires_at.astimezone(timezone.utc).isoformat().replace("+00:00", "Z")}


@router.post("/auth/logout")
async def logout(request: Request) -> JSONResponse:
    _oidc(request)
    if await session_identity(request) is None:  # raises CsrfRefused without the header
        raise Unauthenticated()
    await sessions.end(request.app.state.services.pool, request.cookies[sessions.SESSION_COOKIE])
    resp = JSONResponse({"signedOut": True})
    resp.delete_cookie(sessions.SESSION_COOKIE, path="/")
    return resp


@router.get("/favicon.ico", include_in_schema=False)
async def favicon() -> FileResponse:
    return FileResponse(STATIC / "favicon.svg", media_type="image/svg+xml",
                        headers={"Cache-Control": "public, max-age=86400"})


@router.get("/replay.html", response_model=None, response_class=HTMLResponse)
async def replay_page(request: Request) -> Response:
    if request.app.state.replay_dir is None:
        return _replay_missing()
    origin = request.app.state.replay_origin
    if origin is None or not on_replay_origin(request):
        return JSONResponse({"error": "replay runs only on the replay origin"
                                      f" ({origin or 'none: set WAGGLE_REPLAY_URL to a separate origin'})"},
                            status_code=404)
    return FileResponse(STATIC / "replay.html", headers={"Cache-Control": "no-store"})


def _replay_missing() -> JSONResponse:
    return JSONResponse({"error": "ReplayWeb.page is not installed on this ledger: run scripts/bootstrap"
                                  " (npm ci in ledger/web/replay) or set WAGGLE_REPLAY_DIR"}, status_code=404)


class ReplayFiles(StaticFiles):
    """ReplayWeb.page's files, served only on the replay origin: its app page would replay any
    ``?source=`` on the origin that holds the session cookie otherwise (404 there, like
    ``/replay.html``)."""

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and not on_replay_origin(Request(scope)):
            origin = scope["app"].state.replay_origin
            refusal = JSONResponse({"error": "ReplayWeb.page is served only on the replay origin"
                                             f" ({origin or 'none: set WAGGLE_REPLAY_URL to a separate origin'})"},
                                   status_code=404)
            await refusal(scope, receive, send)
            return
        await super().__call__(scope, receive, send)


def mount(app: FastAPI) -> None:
    """Add the routes, ``/static`` and ``/replay`` to ``app``."""
    app.state.replay_dir = replay_dir(app.state.settings.replay_dir)
    app.state.replay_origin = replay_origin_for(app.state.settings)
    app.include_router(router)
    app.mount("/static", StaticFiles(directory=STATIC), name="static")
    if app.state.replay_dir is not None:
        app.mount("/replay", ReplayFiles(directory=app.state.replay_dir), name="replay")
    else:
        log.warning("ReplayWeb.page is not installed (ledger/web/replay/node_modules): the page cannot replay")

        @app.get("/replay/{path:path}", include_in_schema=False)
        async def _missing(path: str) -> JSONResponse:
            return _replay_missing()
