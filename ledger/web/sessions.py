"""Server-side sessions of the web page (``web_sessions``) and pending logins (``web_logins``).

The browser holds ``waggle_session`` = an opaque random id (HttpOnly, SameSite=Lax, Secure on
https); the table keys its SHA-256, holds the access token, the session's CSRF token and the
token's expiry. A pending login (OIDC ``state`` → PKCE verifier, nonce, redirect URI) lives
10 minutes and is taken once.
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from datetime import datetime
from typing import Any

SESSION_COOKIE = "waggle_session"
LOGIN_COOKIE = "waggle_login"
LOGIN_TTL_S = 600


@dataclass(frozen=True)
class Session:
    """A live session: the stored access token and the CSRF token unsafe calls must echo."""

    access_token: str
    csrf_token: str
    subject: str
    expires_at: datetime


def _hash(session_id: str) -> str:
    return hashlib.sha256(session_id.encode()).hexdigest()


async def begin_login(pool: Any, code_verifier: str, nonce: str, redirect_uri: str) -> str:
    """Store a pending login; returns its ``state`` (also dropping logins older than 10 min)."""
    state = secrets.token_urlsafe(24)
    async with pool.connection() as conn:
        await conn.execute("DELETE FROM web_logins WHERE created_at < now() - make_interval(secs => %s)",
                           (LOGIN_TTL_S,))
        await conn.execute("INSERT INTO web_logins (state, code_verifier, nonce, redirect_uri) VALUES (%s, %s, %s, %s)",
                           (state, code_verifier, nonce, redirect_uri))
    return state


async def take_login(pool: Any, state: str) -> dict | None:
    """The pending login of ``state`` (deleted: single use), or None when unknown or stale."""
    async with pool.connection() as conn:
        row = await (await conn.execute(
            "DELETE FROM web_logins WHERE state = %s RETURNING code_verifier, nonce, redirect_uri,"
            " created_at > now() - make_interval(secs => %s) AS fresh", (state, LOGIN_TTL_S))).fetchone()
    return dict(row) if row and row["fresh"] else None


async def create(pool: Any, access_token: str, subject: str, expires_at: datetime) -> tuple[str, str]:
    """A new session → ``(session id for the cookie, csrf token)``; drops expired sessions."""
    session_id, csrf = secrets.token_urlsafe(32), secrets.token_urlsafe(24)
    async with pool.connection() as conn:
        await conn.execute("DELETE FROM web_sessions WHERE expires_at < now()")
        await conn.execute(
            "INSERT INTO web_sessions (id_hash, access_token, csrf_token, subject, expires_at)"
            " VALUES (%s, %s, %s, %s, %s)", (_hash(session_id), access_token, csrf, subject, expires_at))
    return session_id, csrf


async def find(pool: Any, session_id: str) -> Session | None:
    """The unexpired session of ``session_id``, or None."""
    async with pool.connection() as conn:
        row = await (await conn.execute(
            "SELECT access_token, csrf_token, subject, expires_at FROM web_sessions"
            " WHERE id_hash = %s AND expires_at > now()", (_hash(session_id),))).fetchone()
    return Session(**row) if row else None


async def end(pool: Any, session_id: str) -> None:
    """Forget the session (sign-out)."""
    async with pool.connection() as conn:
        await conn.execute("DELETE FROM web_sessions WHERE id_hash = %s", (_hash(session_id),))
