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

The event also keeps what the scope said of the links (:class:`Scoped`: accepted URLs in order,
their URL trap verdicts, drop counts; migration 131), so the report does not scope a landed
page's links again (fifth round): it merges the stored verdicts in report order, which gives the
same candidates, drops and answer as scoping the links (scope, nofollow and the trap verdicts
are pure functions of the link and the crawl's fixed seeds and scope).

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
from ledger.crawl.scope import InvalidPattern, LinkFilter, Scope
from ledger.crawl.traps import trap_reason
from ledger.crawl.urls import InvalidUrl, ParsedUrl, parse_http_url

_parsed = ParsedUrl._make  # positional from a tuple: the cheapest way to build one
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
    if crawl.get("extra_hops"):  # a link's fate depends on its page's hops: the report scopes per page
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


@dataclass
class Scoped:
    """What the scope said of one page's links (``LinkFilter.accept`` over them alone):
    ``urls`` accepted, first-seen order (in-page dedup; private hosts not yet guarded),
    ``reasons`` their URL trap verdicts (``traps.trap_reason``), ``drops`` by reason."""

    urls: list[ParsedUrl]
    reasons: list[str | None]
    drops: dict[str, int]

    def encode(self) -> bytes:
        """``crawl_progress.links_scoped``: orjson ``{"v": 1, "origins": [...], "drops": {...},
        "urls": [[url, key or null when = url, origin index, trap reason], …]}``."""
        origins: dict[str, int] = {}
        rows = [[p.url, None if p.key == p.url else p.key, origins.setdefault(p.origin, len(origins)), r]
                for p, r in zip(self.urls, self.reasons)]
        return orjson.dumps({"v": 1, "origins": list(origins), "drops": self.drops, "urls": rows})

    @classmethod
    def decode(cls, blob: bytes | None) -> "Scoped | None":
        """The stored verdicts, or None when absent or not of this version (the report then
        scopes the links itself)."""
        if blob is None:
            return None
        try:
            doc = orjson.loads(blob)
            if doc.get("v") != 1:
                return None
            origins = doc["origins"]
            parts = [(o, o.partition("://")[2]) for o in origins]
            urls, reasons = [], []
            for url, key, o, reason in doc["urls"]:
                origin, host = parts[o]
                urls.append(_parsed((url, key or url, host, origin)))
                reasons.append(reason)
            return cls(urls, reasons, {str(k): int(v) for k, v in doc["drops"].items()})
        except (ValueError, TypeError, KeyError, IndexError, AttributeError):
            return None


def scope(crawl: dict, links: list) -> Scoped | None:
    """:class:`Scoped` of one page's ``links`` under the crawl's seeds and scope (None when a
    stored seed does not parse)."""
    try:
        seeds = [parse_http_url(s) for s in crawl["seeds"]]
        rules = Scope.of_crawl(crawl, seeds)
    except (InvalidUrl, InvalidPattern, ValueError):
        return None
    screen = LinkFilter(seeds, rules)
    urls = screen.accept(links)
    return Scoped(urls, [trap_reason(p.url, p.key) for p in urls], dict(screen.drops))


async def land(conn: Any, crawl: dict, links: list, settings: Any) -> Scoped | None:
    """Scope (nofollow, in-event dedup), guard and insert ``links`` as pending rows of the next
    depth, on ``conn``'s transaction (the caller holds the crawl's row lock). Exact dedup:
    ``frontier.insert_rows`` (probe chain). Returns the scope's verdicts (None: a seed does
    not parse, nothing landed)."""
    scoped = scope(crawl, links)
    if scoped is None:
        return None
    verdicts: dict[str, str | None] = {}
    candidates = []
    for p in scoped.urls:
        if p.host not in verdicts:
            verdicts[p.host] = refusal(p.url, settings.allow_private_hosts)
        if not verdicts[p.host]:
            candidates.append(p)
    if candidates:
        await frontier.insert_rows(conn, crawl["id"], crawl["current_depth"] + 1, candidates, early=True)
    return scoped


async def landed_pages(conn: Any, crawl_id: Any, depth: int) -> dict[bytes, tuple[bytes, bytes | None]]:
    """``{page url_hash: (links digest, stored scope verdicts or None)}`` of the level's pages
    whose links landed from progress (the verdicts: :meth:`Scoped.decode`)."""
    async with conn.cursor(row_factory=tuple_row, binary=True) as cur:
        await cur.execute("SELECT p.url_hash, g.links_sha256, g.links_scoped FROM crawl_progress g"
                          " JOIN crawl_pages p ON p.id = g.page_id"
                          " WHERE g.crawl_id = %s AND g.depth = %s AND g.links_sha256 IS NOT NULL", (crawl_id, depth))
        return {bytes(h): (bytes(d), bytes(s) if s is not None else None) for h, d, s in await cur.fetchall()}


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


def skipped(results: list[dict], hashes: list[bytes | None],
            landed: dict[bytes, tuple[bytes, bytes | None]]) -> set[int] | None:
    """Positions of the results whose inline links landed from progress (their page's digest
    equals the result's), or None when some landed page has no result carrying its links
    unchanged (a re-run level, a different capture): the early rows are then not trusted."""
    out: set[int] = set()
    covered: set[bytes] = set()
    for i, (r, h) in enumerate(zip(results, hashes)):
        if h is not None and h in landed and r.get("links") is not None and digest(r["links"]) == landed[h][0]:
            out.add(i)
            covered.add(h)
    return out if len(covered) == len(landed) else None
