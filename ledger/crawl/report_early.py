"""Links from progress: a page's outlinks into the frontier as the page finishes (issue 14,
docs/internals.md "Links from progress").

A captured page's ``done`` progress event may carry the page's links (the capped list its
level-report result carries). :func:`land` scopes and inserts them as pending rows of the next
depth during the level, under the crawl's row lock (so dedup and the probe chain stay exact
across concurrent hosts and replicas), and the event's ``crawl_progress`` row records their
:func:`digest`. The level report stays the authority: a result whose links have the recorded
digest is not inserted again (:func:`skipped`), the rest is; the plan (traps, parameter rules,
per-host cap) is made once over everything new for the level, early rows included
(:func:`read`), in the report's discovery order. When the report does not carry a landed page's
links unchanged, or the page budget could cut, the early rows are deleted (:func:`drop`) and the
report runs alone, as without progress: a lost or odd event costs time, never a link.

Early rows are the crawl's pending rows of ``level + 1`` marked ``from_progress`` (migration
130) and not carried (``level IS NULL``).
"""

from __future__ import annotations

import hashlib
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import orjson
from psycopg.rows import tuple_row

from ledger.crawl import frontier
from ledger.crawl.guard import refusal
from ledger.crawl.scope import LinkFilter
from ledger.crawl.urls import InvalidUrl, parse_http_url

_EARLY = ("FROM crawl_pages WHERE crawl_id = %s AND coalesce(level, depth) = %s AND state = 'pending'"
          " AND level IS NULL AND from_progress")  # the pending-level index (migration 100) serves it


# pending pages per (crawl, level), for the budget guess; per process (a replica counts once too)
_PENDING: dict[tuple[Any, int], int] = {}
_PENDING_MAX = 4096


def digest(links: list) -> bytes:
    """SHA-256 (32 bytes) of a link list as ``[[href, rel], …]`` in order (``rel`` None when
    absent): the same list in a progress event and in a report result gives the same digest."""
    return hashlib.sha256(orjson.dumps([[item.get("href"), item.get("rel")] for item in links])).digest()


@dataclass
class Early:
    """The early rows of one level: ``{url_key: url_hash}``, pages per host (when asked), and
    the smallest id (every row of the crawl inserted before the level has a smaller one)."""

    keys: dict[str, bytes] = field(default_factory=dict)
    hosts: Counter = field(default_factory=Counter)
    first_id: int | None = None


async def budget_safe(conn: Any, crawl: dict, links: int) -> bool:
    """True when a level may follow and ``links`` links for every pending page of the level fit
    in ``max_pages`` beside what the crawl can hold (seeds + ``pages_discovered``: every
    inserted row was counted there as discovered). A guess (pages differ): the level report
    checks the real count and, when the budget could cut, deletes the early rows and decides
    alone — time, never a link. The level's pending pages are counted once per level and
    process (they stay pending until the report)."""
    if crawl["current_depth"] + 1 > crawl["max_depth"]:
        return False
    level = (crawl["id"], crawl["current_depth"])
    pending = _PENDING.get(level)
    if pending is None:  # the level's pages stay pending until its report: counted once a level
        cur = await conn.execute("SELECT count(*) AS n FROM crawl_pages WHERE crawl_id = %s"
                                 " AND coalesce(level, depth) = %s AND state = 'pending'", level)
        pending = (await cur.fetchone())["n"]
        if len(_PENDING) >= _PENDING_MAX:
            _PENDING.clear()
        _PENDING[level] = pending
    return len(crawl["seeds"]) + crawl["pages_discovered"] + links * pending <= crawl["max_pages"]


async def land(conn: Any, crawl: dict, links: list, settings: Any) -> int:
    """Scope (nofollow, in-event dedup), guard and insert ``links`` as pending rows of the next
    depth, on ``conn``'s transaction (the caller holds the crawl's row lock). Exact dedup:
    ``frontier.insert_rows`` (probe chain). Returns the rows that landed."""
    try:
        seeds = [parse_http_url(s) for s in crawl["seeds"]]
    except InvalidUrl:
        return 0
    verdicts: dict[str, str | None] = {}
    candidates = []
    for p in LinkFilter(seeds, crawl["scope"]).accept(links):
        if p.host not in verdicts:
            verdicts[p.host] = refusal(p.url, settings.allow_private_hosts)
        if not verdicts[p.host]:
            candidates.append(p)
    if not candidates:
        return 0
    return len(await frontier.insert_rows(conn, crawl["id"], crawl["current_depth"] + 1, candidates, early=True))


async def landed_pages(conn: Any, crawl_id: Any, depth: int) -> dict[bytes, bytes]:
    """``{page url_hash: links digest}`` of the level's pages whose links landed from progress."""
    async with conn.cursor(row_factory=tuple_row, binary=True) as cur:
        await cur.execute("SELECT p.url_hash, g.links_sha256 FROM crawl_progress g JOIN crawl_pages p ON p.id = g.page_id"
                          " WHERE g.crawl_id = %s AND g.depth = %s AND g.links_sha256 IS NOT NULL", (crawl_id, depth))
        return {bytes(h): bytes(d) for h, d in await cur.fetchall()}


async def read(conn: Any, crawl_id: Any, level: int, per_host: bool = False) -> Early:
    """The early rows of ``level`` (the next depth of the level being reported); their hosts
    only with ``per_host`` (the per-host cap needs them)."""
    early = Early()
    cur = await conn.execute(f"SELECT min(id) AS first {_EARLY}", (crawl_id, level))
    early.first_id = (await cur.fetchone())["first"]
    if early.first_id is None:
        return early
    async with conn.cursor(row_factory=tuple_row, binary=True) as cur:
        if per_host:
            await cur.execute(f"SELECT url_key, url_hash, host {_EARLY}", (crawl_id, level))
            for key, h, host in await cur.fetchall():
                early.keys[key] = h
                early.hosts[host] += 1
        else:
            await cur.execute(f"SELECT url_key, url_hash {_EARLY}", (crawl_id, level))
            early.keys = dict(await cur.fetchall())
    return early


async def drop(conn: Any, crawl_id: Any, level: int) -> None:
    """Delete the early rows of ``level`` (the report then inserts its links as without progress)."""
    await conn.execute(f"DELETE {_EARLY}", (crawl_id, level))


def skipped(results: list[dict], hashes: list[bytes | None], landed: dict[bytes, bytes]) -> set[int] | None:
    """Positions of the results whose inline links landed from progress (their page's digest
    equals the result's), or None when some landed page has no result carrying its links
    unchanged (a re-run level, a different capture): the early rows are then not trusted."""
    out: set[int] = set()
    covered: set[bytes] = set()
    for i, (r, h) in enumerate(zip(results, hashes)):
        if h is not None and h in landed and r.get("links") is not None and digest(r["links"]) == landed[h]:
            out.add(i)
            covered.add(h)
    return out if len(covered) == len(landed) else None
