"""Session identity for API calls made by the web page, and its CSRF rule.

A request without an ``Authorization`` header that carries the ``waggle_session`` cookie is
the session's subject — only in JWT mode, and only while the stored access token still passes
the same verification as a Bearer token (so expiry and key rotation apply alike) — and never
on the replay origin, where archived pages run their own scripts. Unsafe
methods (anything but GET/HEAD/OPTIONS) must echo the session's CSRF token in
``X-CSRF-Token``; else 403 :class:`CsrfRefused`. Bearer callers are not affected.
"""

from __future__ import annotations

import secrets
from urllib.parse import urlsplit

import anyio
from fastapi import Request

from ledger.web import sessions

CSRF_HEADER = "X-CSRF-Token"
SAFE_METHODS = ("GET", "HEAD", "OPTIONS")


class CsrfRefused(Exception):
    """An unsafe cookie-authenticated call without the session's CSRF token (answered 403)."""


def on_replay_origin(request: Request) -> bool:
    """True for a request to the replay origin (``ledger.web.routes.replay_origin_for``), where
    archived pages run their scripts: no session is opened or honoured there."""
    origin = getattr(request.app.state, "replay_origin", None)
    return bool(origin) and request.headers.get("host", "") == urlsplit(origin).netloc


async def session_of(request: Request) -> sessions.Session | None:
    """The request's live session (JWT mode only), cached on ``request.state``."""
    if hasattr(request.state, "web_session"):
        return request.state.web_session
    found = None
    sid = request.cookies.get(sessions.SESSION_COOKIE)
    if sid and getattr(request.app.state.identity, "mode", "") == "jwt" and not on_replay_origin(request):
        found = await sessions.find(request.app.state.services.pool, sid)
    request.state.web_session = found
    return found


async def session_identity(request: Request):  # -> Identity | None (import cycle kept out)
    """The session's identity, or None; raises :class:`CsrfRefused` for an unsafe call
    without the right ``X-CSRF-Token``."""
    if request.headers.get("authorization"):
        return None
    session = await session_of(request)
    if session is None:
        return None
    identity = await anyio.to_thread.run_sync(request.app.state.identity.verify, session.access_token)
    if identity is None:
        return None
    if request.method not in SAFE_METHODS and not secrets.compare_digest(
            request.headers.get(CSRF_HEADER, ""), session.csrf_token):
        raise CsrfRefused()
    return identity
