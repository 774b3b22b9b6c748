"""The next level's rows in ``crawl_pages`` (issue 14: cheap at 1,000,000 pages held).

:func:`insert_rows` writes candidates in one ``INSERT … SELECT FROM unnest(…) ON CONFLICT
(crawl_id, url_hash) DO NOTHING`` and returns the hashes that landed (read as plain tuples: no
dict per row — that alone was 1.4 s of 100,000 rows under load).

:func:`insert_then_screen` is the level report's path when every candidate fits the page
budget: insert first (the unique index says which were new), plan over the new ones, delete
what the plan drops — the outcome ``plan_next_level`` gives over the new candidates, without a
separate lookup of 100,000 keys.

Dedup is exact: the unique key is the SHA-256 of the WHATWG dedup key (``url_hash``), and a
distinct key that meets a held hash takes the next position of its probe chain (migration 071);
the measured alternatives (64-bit hash keys, fillfactor, staging by COPY, no foreign key) are
in tests/bench/README.md "Frontier insert".
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from psycopg.rows import tuple_row

from ledger.crawl.budget import LevelPlan
from ledger.crawl.urls import ParsedUrl


def url_hash(key: str) -> bytes:
    """``crawl_pages.url_hash`` of a dedup key: SHA-256 of its UTF-8 bytes (migration 001)."""
    return hashlib.sha256(key.encode("utf-8")).digest()


def probe_hash(key: str, n: int) -> bytes:
    """Position ``n`` of a key's probe chain: ``url_hash(key)`` for 0 (every URL in practice),
    else SHA-256 of ``"<n>\\n<key>"`` — where a distinct URL goes when an earlier position is
    held by another key (a SHA-256 collision; migration 071)."""
    return url_hash(key) if n == 0 else hashlib.sha256(f"{n}\n{key}".encode("utf-8")).digest()


_INSERT = ("INSERT INTO crawl_pages (crawl_id, url, url_key, url_hash, depth, host)"
           " SELECT %s, u.url, u.url_key, u.url_hash, %s, u.host"
           " FROM unnest(%b::text[], %b::text[], %b::bytea[], %b::text[]) WITH ORDINALITY"
           " AS u(url, url_key, url_hash, host, n)"
           " ORDER BY u.n ON CONFLICT (crawl_id, url_hash) DO NOTHING RETURNING url_key, url_hash")
# the same, for links from progress (ledger.crawl.report_early): rows marked from_progress
_INSERT_EARLY = (_INSERT.replace("depth, host)", "depth, host, from_progress)")
                 .replace("u.host FROM", "u.host, true FROM"))


def _insert_params(crawl_id: Any, depth: int, urls: Sequence[ParsedUrl], hashes: Sequence[bytes]) -> tuple:
    return (crawl_id, depth, [p.url for p in urls], [p.key for p in urls], list(hashes), [p.host for p in urls])


async def _insert(conn: Any, crawl_id: Any, depth: int, urls: Sequence[ParsedUrl],
                  hashes: Sequence[bytes], early: bool = False) -> set[tuple[str, bytes]]:
    async with conn.cursor(row_factory=tuple_row, binary=True) as cur:
        await cur.execute(_INSERT_EARLY if early else _INSERT, _insert_params(crawl_id, depth, urls, hashes))
        return set(await cur.fetchall())


async def held_keys(conn: Any, crawl_id: Any, hashes: Sequence[bytes]) -> dict[bytes, str]:
    """``{url_hash: url_key}`` of the crawl's rows at ``hashes``."""
    async with conn.cursor(row_factory=tuple_row, binary=True) as cur:
        await cur.execute("SELECT url_hash, url_key FROM crawl_pages WHERE crawl_id = %s AND url_hash = ANY(%b::bytea[])",
                          (crawl_id, list(hashes)))
        return dict(await cur.fetchall())


async def stored_hashes(conn: Any, crawl_id: Any, keys: Sequence[str | None]) -> list[bytes | None]:
    """The ``url_hash`` each key's row is stored under (None for None): its first hash, unless
    another key holds that one — then the position of its probe chain that holds the key (or
    the first free one, when the crawl does not hold it). One lookup, more only on a collision."""
    out: list[bytes | None] = [url_hash(k) if k is not None else None for k in keys]
    todo = [i for i, k in enumerate(keys) if k is not None]
    n = 0
    while todo:
        held = await held_keys(conn, crawl_id, [out[i] for i in todo])  # type: ignore[misc]
        todo = [i for i in todo if held.get(out[i]) not in (None, keys[i])]  # held by another key
        n += 1
        for i in todo:
            out[i] = probe_hash(keys[i], n)  # type: ignore[arg-type]
    return out


async def insert_rows(conn: Any, crawl_id: Any, depth: int, urls: Sequence[ParsedUrl],
                      first: int = 0, early: bool = False) -> dict[str, bytes]:
    """Insert ``urls`` as pending pages of ``depth`` (ids in discovery order); returns
    ``{key: url_hash}`` of the rows that landed. Exact: a URL whose hash is held by another key
    moves along its probe chain (:func:`probe_hash`, from position ``first``) until it lands or
    meets its own row, so a hash collision never drops a distinct URL. One statement (plus one
    lookup of the rows that did not land) unless something collides. ``early``: the rows are
    links from progress (``crawl_pages.from_progress``, ledger.crawl.report_early)."""
    landed: dict[str, bytes] = {}
    pending = list(urls)
    n = first
    while pending:
        hashes = [probe_hash(p.key, n) for p in pending]
        got = await _insert(conn, crawl_id, depth, pending, hashes, early)
        rest = [(p, h) for p, h in zip(pending, hashes) if (p.key, h) not in got]
        landed.update((p.key, h) for p, h in zip(pending, hashes) if (p.key, h) in got)
        if not rest:
            break
        held = await held_keys(conn, crawl_id, [h for _, h in rest])
        pending = [p for p, h in rest if held.get(h) != p.key]  # held by another key: next position
        n += 1
    return landed


# one chunk of insert_stream: the same insert, answering only which rows did not land (their
# positions, 1-based) — ~10 % of a report's links — instead of a row per landed page
_INSERT_CHUNK = ("WITH u AS (SELECT * FROM unnest(%b::text[], %b::text[], %b::bytea[], %b::text[]) WITH ORDINALITY"
                 " AS u(url, url_key, url_hash, host, n)),"
                 " ins AS (INSERT INTO crawl_pages (crawl_id, url, url_key, url_hash, depth, host)"
                 " SELECT %s, u.url, u.url_key, u.url_hash, %s, u.host FROM u"
                 " ORDER BY u.n ON CONFLICT (crawl_id, url_hash) DO NOTHING RETURNING url_hash)"
                 " SELECT coalesce(array_agg(u.n ORDER BY u.n), '{}')::int4[]"
                 " FROM u WHERE u.url_hash NOT IN (SELECT url_hash FROM ins)")


async def insert_stream(conn: Any, crawl_id: Any, depth: int,
                        chunks: Iterable[list[ParsedUrl]]) -> tuple[list[ParsedUrl], dict[str, bytes]]:
    """:func:`insert_rows` over ``chunks`` (distinct keys, discovery order), overlapping the
    caller's work with Postgres's: each chunk's INSERT is sent in pipeline mode as soon as the
    iterator yields it, and the iterator's next chunk (URL parsing, scope: ledger CPU) is made
    while the server inserts the previous one; results are read after the last chunk is sent.
    Returns ``(every URL of the chunks, {key: url_hash} of the rows that landed)``.

    Each chunk answers only the positions of its rows that did not land. A landed hash is the
    row of the first URL of the report with that first hash (rows go in in order; a later one
    with the same hash conflicts with it), so every other URL sharing a hash is treated as not
    landed. Exact as :func:`insert_rows`: the URLs that did not land are looked up once, and
    those whose hash another key holds go on along their probe chain. Errors surface here
    (the caller's transaction then rolls back everything, chunks already inserted included)."""
    urls: list[ParsedUrl] = []
    hashes: list[bytes] = []
    sent: list[tuple[Any, int, int]] = []  # (cursor, offset of the chunk in urls, its length)
    try:
        async with conn.pipeline():
            for chunk in chunks:
                if not chunk:
                    continue
                chunk_hashes = [url_hash(p.key) for p in chunk]
                cur = conn.cursor(row_factory=tuple_row, binary=True)
                await cur.execute(_INSERT_CHUNK, ([p.url for p in chunk], [p.key for p in chunk], chunk_hashes,
                                                  [p.host for p in chunk], crawl_id, depth))
                sent.append((cur, len(urls), len(chunk)))
                urls += chunk
                hashes += chunk_hashes
        missed: set[int] = set()  # positions in urls of the rows that did not land
        for cur, offset, _ in sent:
            (positions,) = await cur.fetchone()
            missed.update(offset + n - 1 for n in positions)
    finally:
        for cur, _, _ in sent:
            await cur.close()
    landed: dict[str, bytes] = {}
    first: set[bytes] = set()
    rest: list[tuple[ParsedUrl, bytes]] = []
    for i, (p, h) in enumerate(zip(urls, hashes)):
        if i in missed or h in first:  # h in first: a distinct key meeting a hash of this report
            rest.append((p, h))
        else:
            landed[p.key] = h
        first.add(h)
    if rest:
        held = await held_keys(conn, crawl_id, [h for _, h in rest])
        collided = [p for p, h in rest if held.get(h) != p.key]  # held by another key: next position
        if collided:
            landed.update(await insert_rows(conn, crawl_id, depth, collided, first=1))
    return urls, landed


async def insert_then_screen(conn: Any, crawl: dict, next_depth: int, candidates: list[ParsedUrl],
                             plan_over: Callable[[list[ParsedUrl]], LevelPlan]) -> tuple[LevelPlan, list[ParsedUrl]]:
    """Insert every candidate, plan over the ones that were new (``plan_over``: the level
    report's ``plan_next_level`` call — traps, per-host cap, parameter rules, budget), and delete
    the rows the plan drops, all on ``conn``'s transaction. Only for ``len(candidates) <=
    max_pages - known`` (the budget cannot cut). Returns the plan and the URLs that stay."""
    landed = await insert_rows(conn, crawl["id"], next_depth, candidates)
    new = [c for c in candidates if c.key in landed]
    plan = plan_over(new)
    if len(plan.urls) < len(new):
        keep = {p.key for p in plan.urls}
        await conn.execute("DELETE FROM crawl_pages WHERE crawl_id = %s AND depth = %s AND url_hash = ANY(%b::bytea[])",
                           (crawl["id"], next_depth, [landed[c.key] for c in new if c.key not in keep]))
    return plan, plan.urls
