"""Replay tickets: a read-only capability for one crawl's collection JSON (``collection_tickets``).

The replay page runs on its own origin, where no session is honoured (archived pages run their
scripts there), yet ReplayWeb.page's service worker must fetch the collection again whenever a
member's signed URL expires. A ticket is a random token (32 bytes, URL-safe) in the collection
URL; the ledger keeps only its SHA-256 with the identity that asked for it (subject and
organizations) and an expiry. Using it authorizes nothing by itself: every use runs the same
checks as a signed-in caller's request (``can_submit``, the crawl's organization, one batched
``can_view`` over the members).
"""

from __future__ import annotations

import hashlib
import secrets
import uuid
from datetime import datetime, timedelta, timezone
from typing import Any

from ledger.api.identity import Identity


def _hash(token: str) -> bytes:
    return hashlib.sha256(token.encode()).digest()


async def issue(pool: Any, crawl_id: uuid.UUID, identity: Identity, ttl_s: int) -> tuple[str, datetime]:
    """A new ticket for ``crawl_id`` held by ``identity`` → ``(token, expires_at)``; expired
    tickets are deleted on the way."""
    token = secrets.token_urlsafe(32)
    expires = datetime.now(timezone.utc) + timedelta(seconds=ttl_s)
    async with pool.connection() as conn:
        await conn.execute("DELETE FROM collection_tickets WHERE expires_at < now()")
        await conn.execute(
            "INSERT INTO collection_tickets (token_hash, crawl_id, subject, organizations, expires_at)"
            " VALUES (%s, %s, %s, %s, %s)",
            (_hash(token), crawl_id, identity.subject, list(identity.organizations), expires))
    return token, expires


async def holder(pool: Any, crawl_id: uuid.UUID, token: str) -> Identity | None:
    """The identity a live ticket for ``crawl_id`` was issued to, or None (unknown, another
    crawl's, or expired)."""
    if not token or len(token) > 200:
        return None
    async with pool.connection() as conn:
        row = await (await conn.execute(
            "SELECT subject, organizations FROM collection_tickets"
            " WHERE token_hash = %s AND crawl_id = %s AND expires_at > now()", (_hash(token), crawl_id))).fetchone()
    return None if row is None else Identity(row["subject"], list(row["organizations"]))
