"""The crawl's counts per URL shape (table ``crawl_url_shapes``, migration 062) for the
parameter- and path-walk trap rules of ``ledger.crawl.param_traps``: :func:`load` before a
level is planned, :func:`save` for the URLs it kept. Only keys with a query, ``;`` or a numeric
path segment are looked at, so a level without any costs nothing. Kind ``path_walk``
(migration 170): shape = key with numeric path segments masked; depths = levels holding it."""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Sequence
from typing import Any

from ledger.crawl.param_traps import PATH_WALK_LEVELS_DEFAULT, ShapeCounts, counted, needs_counts, path_walk_of, shapes_of


def _h(text: str) -> bytes:
    return hashlib.sha256(text.encode("utf-8")).digest()


async def load(conn: Any, crawl_id: Any, keys: Sequence[str], *, next_depth: int, walk_levels: int,
               query_variants: int, held_up_to: int | None = None,
               path_walk_levels: int = PATH_WALK_LEVELS_DEFAULT) -> ShapeCounts | None:
    """The counts that concern ``keys`` (candidates' dedup keys), or None when no key can meet a
    parameter rule. Two indexed lookups: the shapes table, and ``crawl_pages`` for the
    sessionless forms of session URLs (a page the crawl holds without a session id; only rows
    with ``id <= held_up_to`` when given — the counts as they were before the rows the level
    report has just inserted, which the plan has not screened yet)."""
    if not needs_counts(keys):
        return None
    counts = ShapeCounts(next_depth=next_depth, walk_levels=walk_levels, query_variants=query_variants,
                         path_walk_levels=path_walk_levels)
    wanted: set[str] = set()
    sessionless: set[str] = set()
    for key in keys:
        if "?" not in key and ";" not in key:
            wanted.add(key)  # held as the session-less form of a session page?
            walk = path_walk_of(key) if path_walk_levels > 0 else None
            if walk:
                wanted.add(walk)
            continue
        s = shapes_of(key)
        wanted.update(x for x in (s.path, s.walk, s.sessionless, s.path_walk) if x)
        if s.sessionless:
            sessionless.add(s.sessionless)
    if not wanted:
        return counts
    cur = await conn.execute(
        "SELECT kind, shape, variants, depths FROM crawl_url_shapes WHERE crawl_id = %s AND shape_hash = ANY(%s::bytea[])",
        (crawl_id, [_h(w) for w in wanted]),
    )
    for row in await cur.fetchall():
        if row["kind"] == "path":
            counts.variants[row["shape"]] = row["variants"]
        elif row["kind"] == "walk":
            counts.walk_depths[row["shape"]] = set(row["depths"])
        elif row["kind"] == "path_walk":
            counts.path_walk_depths[row["shape"]] = set(row["depths"])
        else:
            counts.sessionless.add(row["shape"])
    if sessionless:
        cur = await conn.execute(
            "SELECT url_key FROM crawl_pages WHERE crawl_id = %s AND url_hash = ANY(%s::bytea[])"
            " AND (%s::bigint IS NULL OR id <= %s::bigint)",
            (crawl_id, [_h(s) for s in sessionless], held_up_to, held_up_to),
        )
        counts.sessionless.update(r["url_key"] for r in await cur.fetchall())
    return counts


async def save(conn: Any, crawl_id: Any, kept_keys: Sequence[str], *, depth: int) -> None:
    """Add the URLs kept for level ``depth`` to the crawl's shape counts (one upsert)."""
    variants: Counter[str] = Counter()
    walks: set[str] = set()
    path_walks: set[str] = set()
    sessions: set[str] = set()
    for key in kept_keys:
        if not counted(key):
            continue
        s = shapes_of(key)
        if s.path_walk:
            path_walks.add(s.path_walk)
        if s.path:
            variants[s.path] += 1
        if s.walk:
            walks.add(s.walk)
        if s.sessionless:
            sessions.add(s.sessionless)
    rows = ([("path", p, n) for p, n in variants.items()] + [("walk", w, 0) for w in walks]
            + [("session", s, 0) for s in sessions] + [("path_walk", w, 0) for w in path_walks])
    if not rows:
        return
    kinds, shapes, counts = (list(c) for c in zip(*rows))
    await conn.execute(
        "INSERT INTO crawl_url_shapes AS s (crawl_id, kind, shape, variants, depths)"
        " SELECT %s, v.kind, v.shape, v.n, CASE WHEN v.kind IN ('walk', 'path_walk') THEN ARRAY[%s::int] ELSE '{}' END"
        " FROM unnest(%s::text[], %s::text[], %s::int[]) AS v(kind, shape, n)"
        " ON CONFLICT (crawl_id, kind, shape_hash) DO UPDATE SET variants = s.variants + EXCLUDED.variants,"
        " depths = CASE WHEN EXCLUDED.depths <@ s.depths THEN s.depths ELSE s.depths || EXCLUDED.depths END",
        (crawl_id, depth, kinds, shapes, counts),
    )
