"""The next level's rows in ``crawl_pages`` (issue 14: cheap at 1,000,000 pages held).

:func:`insert_rows` writes candidates in one ``INSERT … SELECT FROM unnest(…) ON CONFLICT
(crawl_id, url_hash) DO NOTHING`` and returns the hashes that landed (read as plain tuples: no
dict per row — that alone was 1.4 s of 100,000 rows under load).

:func:`insert_then_screen` is the level report's path when every candidate fits the page
budget: the insert runs in Postgres while this process computes each candidate's trap reason
in a worker thread, so the two costs overlap instead of adding up; the rows the screen then
drops (traps, per-host cap) are deleted again in the same transaction. The outcome is the one
``ledger.crawl.budget.plan_next_level`` gives over the candidates that were new.

Dedup stays exact: the unique key is the SHA-256 of the WHATWG dedup key (``url_hash``); the
measured alternatives (64-bit hash keys, fillfactor, staging by COPY) are in
tests/bench/README.md "Frontier insert".
"""

from __future__ import annotations

import asyncio
import hashlib
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from psycopg.rows import tuple_row

from ledger.crawl.budget import LevelPlan, plan_budget
from ledger.crawl.traps import MAX_PAGES_PER_HOST, trap_reason
from ledger.crawl.urls import ParsedUrl


def url_hash(key: str) -> bytes:
    """``crawl_pages.url_hash`` of a dedup key: SHA-256 of its UTF-8 bytes (migration 001)."""
    return hashlib.sha256(key.encode("utf-8")).digest()


async def insert_rows(conn: Any, crawl_id: Any, depth: int, urls: Sequence[ParsedUrl]) -> set[bytes]:
    """Insert ``urls`` as pending pages of ``depth`` (``ON CONFLICT DO NOTHING``), ids in
    discovery order; returns the ``url_hash`` of the rows that landed. (Sending them in hash
    order saved < 10 %, within noise, and would give ids out of discovery order.)"""
    async with conn.cursor(row_factory=tuple_row) as cur:
        await cur.execute(
            "INSERT INTO crawl_pages (crawl_id, url, url_key, depth, host)"
            " SELECT %s, u.url, u.url_key, %s, u.host"
            " FROM unnest(%s::text[], %s::text[], %s::text[]) WITH ORDINALITY AS u(url, url_key, host, n)"
            " ORDER BY u.n ON CONFLICT (crawl_id, url_hash) DO NOTHING RETURNING url_hash",
            (crawl_id, depth, [p.url for p in urls], [p.key for p in urls], [p.host for p in urls]),
        )
        return {bytes(r[0]) for r in await cur.fetchall()}


def _reasons(candidates: Sequence[ParsedUrl]) -> list[str | None]:
    """The trap reason (or None) of each candidate; pure CPU, run in a worker thread."""
    return [trap_reason(c.url, c.key) for c in candidates]


async def insert_then_screen(conn: Any, crawl: dict, next_depth: int, candidates: list[ParsedUrl], *,
                             known: int, known_per_host: Mapping[str, int],
                             max_pages_per_host: int | None) -> tuple[LevelPlan, list[ParsedUrl]]:
    """Insert every candidate, screen the ones that were new, delete what the screen drops.

    Only for ``len(candidates) <= max_pages - known`` (the budget cannot cut). Returns the plan
    (as ``plan_next_level`` over the new candidates) and the URLs of the rows that stay.
    """
    hashes = [url_hash(c.key) for c in candidates]
    insert = asyncio.ensure_future(insert_rows(conn, crawl["id"], next_depth, candidates))
    try:  # trap reasons are computed while Postgres inserts (a worker thread; ada/regex/unquote)
        reasons = await asyncio.to_thread(_reasons, candidates)
    except BaseException:
        await asyncio.gather(insert, return_exceptions=True)  # never leave the statement running
        raise
    landed = await insert
    cap = max_pages_per_host if max_pages_per_host and max_pages_per_host > 0 else None
    kept: list[ParsedUrl] = []
    gone: list[bytes] = []
    drops: Counter[str] = Counter()
    per_host: Counter[str] = Counter()
    for c, h, reason in zip(candidates, hashes, reasons):
        if h not in landed:
            continue
        if reason is None and cap is not None and known_per_host.get(c.host, 0) + per_host[c.host] >= cap:
            reason = MAX_PAGES_PER_HOST
        if reason is not None:
            drops[reason] += 1
            gone.append(h)
            continue
        per_host[c.host] += 1
        kept.append(c)
    urls, stop = plan_budget(kept, next_depth=next_depth, max_depth=crawl["max_depth"],
                             max_pages=crawl["max_pages"], known=known)
    if gone:
        await conn.execute("DELETE FROM crawl_pages WHERE crawl_id = %s AND depth = %s AND url_hash = ANY(%s::bytea[])",
                           (crawl["id"], next_depth, gone))
    return LevelPlan(urls, stop, dict(drops)), urls
