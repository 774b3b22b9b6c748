"""Read tokens of one crawl for capture servers (decision 405; table ``crawl_read_tokens``).

A capture server reads three ledger routes while it captures a crawl's pages: ``POST
/api/crawls/{id}/digests`` (extension revisit), ``POST /api/crawls/{id}/previous`` (extension
conditional) and ``GET /api/crawls/{id}/politeness`` (extension holdAdmission). It used to be
handed the flow's own token, which may also report levels, fail crawls and start new ones. The
flow now asks ``POST /api/crawls/{id}/read-token`` (with its own token) for a token that only
those three routes accept, for that crawl only, until the crawl ends or the token expires
(:data:`TTL_S`): once the crawl has ended its tokens are refused, and deleted at the next issue.

A token is :data:`PREFIX` + 32 random bytes (URL-safe); the ledger keeps its SHA-256 only, so
a database read gives nobody a usable token. It is no JWT: every other route answers 401 to it.
"""

from __future__ import annotations

import hashlib
import secrets
import uuid
from datetime import datetime, timedelta, timezone
from typing import Any

from ledger.crawl.workflows import ACTIVE  # the states in which a crawl has not ended

PREFIX = "wgr_"  # tells a read token from a JWT before any lookup
# a backstop only: the crawl's end is what ends a token. A crawl_host job (a level of one host)
# may run past a day (150 pages at the 600 s delay cap is 25 h); a new job asks again
TTL_S = 7 * 24 * 3600
TOKEN_MAX = 100


def _hash(token: str) -> bytes:
    return hashlib.sha256(token.encode()).digest()


def looks_like(token: str | None) -> bool:
    """Whether ``token`` has the read-token form (not whether it is valid)."""
    return bool(token) and token.startswith(PREFIX) and len(token) <= TOKEN_MAX  # type: ignore[union-attr]


async def issue(pool: Any, crawl_id: uuid.UUID, issued_to: str, ttl_s: int = TTL_S) -> tuple[str, datetime]:
    """A new read token of ``crawl_id`` → ``(token, expires_at)``; expired ones are deleted on the
    way. ``issued_to``: the subject that asked (the flow's), for the record."""
    token = PREFIX + secrets.token_urlsafe(32)
    expires = datetime.now(timezone.utc) + timedelta(seconds=ttl_s)
    async with pool.connection() as conn:
        await conn.execute("DELETE FROM crawl_read_tokens t WHERE t.expires_at < now() OR EXISTS"
                           " (SELECT 1 FROM crawls c WHERE c.id = t.crawl_id AND c.state <> ALL(%s))", (list(ACTIVE),))
        await conn.execute("INSERT INTO crawl_read_tokens (token_hash, crawl_id, issued_to, expires_at)"
                           " VALUES (%s, %s, %s, %s)", (_hash(token), crawl_id, issued_to[:200], expires))
    return token, expires


async def organization_of(pool: Any, crawl_id: uuid.UUID, token: str) -> str | None:
    """The organization of ``crawl_id`` when ``token`` is a live read token of that crawl and the
    crawl is running, else None (unknown, another crawl's, expired, or the crawl has ended)."""
    if not looks_like(token):
        return None
    async with pool.connection() as conn:
        row = await (await conn.execute(
            "SELECT c.org_id FROM crawl_read_tokens t JOIN crawls c ON c.id = t.crawl_id"
            " WHERE t.token_hash = %s AND t.crawl_id = %s AND t.expires_at > now() AND c.state = ANY(%s)",
            (_hash(token), crawl_id, list(ACTIVE)))).fetchone()
    return None if row is None else row["org_id"]
