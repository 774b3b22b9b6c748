"""Frontier insert alternatives (issue 14 item 2): 100,000 discovered links (90 % new) into a
crawl already holding 1,000,000 pages, one statement per variant, each on a fresh copy of the
same database (``CREATE DATABASE … TEMPLATE``). No target: it says which store to keep.

Variants (the SQL the level report would run):

* ``sha256-app-hash (shipped)``: unique ``(crawl_id, url_hash bytea)``, the hash computed by the
  ledger and inserted (migration 071; exact through the probe chain of ``ledger.crawl.frontier``),
  arrays sent and rows read in binary, foreign keys checked per statement (migration 101);
  ``… text parameters``: the same with the arrays sent as text (before issue 14's second round);
  ``… row foreign keys``: the same with the two row-by-row foreign keys of 001 put back.
* ``sha256-unique``: the same index, ``url_hash`` filled in SQL (the trigger of migration 071,
  as the generated column of 001 did); ``INSERT … SELECT FROM unnest(…) ON CONFLICT DO NOTHING``.
* ``sha256-unique-sorted``: the same rows sent in ``url_hash`` order (index pages touched in order).
* ``sha256-fillfactor-70``: the same index rebuilt with fillfactor 70 (room for inserts).
* ``copy-staging``: COPY into a temporary table, then one ``INSERT … SELECT … ON CONFLICT``.
* ``hash64-key-unique``: a ``bigint`` 64-bit hash and unique ``(crawl_id, url_hash64, url_key)``
  (no sha256 column): a collision lands as a second row because the key differs (but a key
  over ~2,700 bytes cannot be indexed at all).
* ``hash64-recheck``: non-unique ``(crawl_id, url_hash64)`` plus an exact ``url_key`` recheck
  in ``NOT EXISTS`` (dedup relies on the crawl row lock serializing inserts).
"""

from __future__ import annotations

import hashlib
import io
import time

import psycopg

from tests.bench import infra
from tests.bench.harness import Context
from tests.bench.ledger_scale import HOSTS, _load_crawl, _migrate, _site


def h64(key: str) -> int:
    """First 8 bytes of SHA-256 as a signed 64-bit integer (``ledger.crawl.frontier.hash64``)."""
    return int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "big", signed=True)


def _links(pages: int, n: int, depth: int) -> list[tuple[str, str]]:
    """(url, host): 10 % already held pages, 90 % new."""
    out = []
    for k in range(n):
        host_i = k % HOSTS
        if k % 10 == 0:
            m = HOSTS + (k * 7919) % (pages // 2)
            m = m - m % HOSTS + host_i
            out.append((f"{_site(host_i)}/d{1 if m < (pages - 1000) // 3 else 2}/p{m}", f"h{host_i:02d}.bench-site.example"))
        else:
            out.append((f"{_site(host_i)}/d{depth}/r{k // 100}/l{k}", f"h{host_i:02d}.bench-site.example"))
    return out


PREP = {
    "sha256-app-hash (shipped)": [],
    "sha256-app-hash, text parameters": [],
    "sha256-app-hash, row foreign keys": [
        "DROP TRIGGER crawl_pages_crawl_exists_ins ON crawl_pages",
        "ALTER TABLE crawl_pages DROP CONSTRAINT crawl_pages_discovered_from_unused",
        "ALTER TABLE crawl_pages ADD CONSTRAINT crawl_pages_crawl_id_fkey FOREIGN KEY (crawl_id) REFERENCES crawls (id)"
        " ON DELETE CASCADE",
        "ALTER TABLE crawl_pages ADD CONSTRAINT crawl_pages_discovered_from_fkey FOREIGN KEY (discovered_from)"
        " REFERENCES crawl_pages (id)"],
    "sha256-unique": [],
    "sha256-unique-sorted": [],
    "sha256-fillfactor-70": ["ALTER INDEX crawl_pages_crawl_id_url_hash_key SET (fillfactor = 70)",
                             "REINDEX INDEX crawl_pages_crawl_id_url_hash_key"],
    "copy-staging": [],
    "hash64-key-unique": [
        "DROP TRIGGER crawl_pages_url_hash ON crawl_pages",  # migration 071's, on url_hash
        "ALTER TABLE crawl_pages ADD COLUMN url_hash64 bigint",
        "UPDATE crawl_pages SET url_hash64 = ('x' || left(encode(url_hash, 'hex'), 16))::bit(64)::bigint",
        "DROP INDEX crawl_pages_crawl_id_url_hash_key",
        "ALTER TABLE crawl_pages DROP COLUMN url_hash",
        "CREATE UNIQUE INDEX crawl_pages_key64 ON crawl_pages (crawl_id, url_hash64, url_key)",
        "VACUUM ANALYZE crawl_pages"],
    "hash64-recheck": [
        "DROP TRIGGER crawl_pages_url_hash ON crawl_pages",  # migration 071's, on url_hash
        "ALTER TABLE crawl_pages ADD COLUMN url_hash64 bigint",
        "UPDATE crawl_pages SET url_hash64 = ('x' || left(encode(url_hash, 'hex'), 16))::bit(64)::bigint",
        "DROP INDEX crawl_pages_crawl_id_url_hash_key",
        "ALTER TABLE crawl_pages DROP COLUMN url_hash",
        "CREATE INDEX crawl_pages_hash64 ON crawl_pages (crawl_id, url_hash64)",
        "VACUUM ANALYZE crawl_pages"],
}


def _run(conn: psycopg.Connection, variant: str, crawl_id: str, depth: int, links: list[tuple[str, str]]) -> int:
    urls = [u for u, _ in links]
    hosts = [h for _, h in links]
    if variant == "sha256-unique-sorted":
        order = sorted(range(len(urls)), key=lambda i: hashlib.sha256(urls[i].encode()).digest())
        urls, hosts = [urls[i] for i in order], [hosts[i] for i in order]
    if variant.startswith("sha256-app-hash"):
        hashes = [hashlib.sha256(u.encode()).digest() for u in urls]
        p = "%s" if "text parameters" in variant else "%b"
        cur = conn.cursor(binary=p == "%b")
        cur.execute(
            "INSERT INTO crawl_pages (crawl_id, url, url_key, url_hash, depth, host) SELECT %s, u.url, u.url, u.h, %s, u.host"
            f" FROM unnest({p}::text[], {p}::bytea[], {p}::text[]) AS u(url, h, host)"
            " ON CONFLICT (crawl_id, url_hash) DO NOTHING RETURNING url_key, url_hash", (crawl_id, depth, urls, hashes, hosts))
        return len(cur.fetchall())
    if variant.startswith("sha256"):
        cur = conn.execute(
            "INSERT INTO crawl_pages (crawl_id, url, url_key, depth, host) SELECT %s, u.url, u.url, %s, u.host"
            " FROM unnest(%s::text[], %s::text[]) AS u(url, host)"
            " ON CONFLICT (crawl_id, url_hash) DO NOTHING RETURNING url_hash", (crawl_id, depth, urls, hosts))
        return len(cur.fetchall())
    if variant == "copy-staging":
        conn.execute("CREATE TEMP TABLE stage (url text, host text) ON COMMIT DROP")
        with conn.cursor().copy("COPY stage (url, host) FROM STDIN") as copy:
            buf = io.StringIO()
            for u, h in zip(urls, hosts):
                buf.write(f"{u}\t{h}\n")
            copy.write(buf.getvalue())
        cur = conn.execute(
            "INSERT INTO crawl_pages (crawl_id, url, url_key, depth, host) SELECT %s, url, url, %s, host FROM stage"
            " ON CONFLICT (crawl_id, url_hash) DO NOTHING RETURNING url_hash", (crawl_id, depth))
        return len(cur.fetchall())
    hashes = [h64(u) for u in urls]
    if variant == "hash64-key-unique":
        cur = conn.execute(
            "INSERT INTO crawl_pages (crawl_id, url, url_key, url_hash64, depth, host)"
            " SELECT %s, u.url, u.url, u.h, %s, u.host FROM unnest(%s::text[], %s::bigint[], %s::text[]) AS u(url, h, host)"
            " ON CONFLICT (crawl_id, url_hash64, url_key) DO NOTHING RETURNING url_hash64",
            (crawl_id, depth, urls, hashes, hosts))
        return len(cur.fetchall())
    cur = conn.execute(
        "INSERT INTO crawl_pages (crawl_id, url, url_key, url_hash64, depth, host)"
        " SELECT %s, u.url, u.url, u.h, %s, u.host FROM unnest(%s::text[], %s::bigint[], %s::text[]) AS u(url, h, host)"
        " WHERE NOT EXISTS (SELECT 1 FROM crawl_pages p WHERE p.crawl_id = %s AND p.url_hash64 = u.h"
        " AND p.url_key = u.url) RETURNING url_hash64", (crawl_id, depth, urls, hashes, hosts, crawl_id))
    return len(cur.fetchall())


def frontier_insert(ctx: Context) -> None:
    """One INSERT of 100,000 links (90 % new) into 1,000,000 pages held, per store variant."""
    pages = 100_000 if ctx.quick else 1_000_000
    n_links = 100_000
    depth = 3
    links = _links(pages, n_links, depth + 1)
    with infra.postgres() as pg:
        template = pg.new_db()
        _migrate(template)
        crawl_id, _ = _load_crawl(template, pages=pages, pending=1000, depth=depth)
        name = pg.db_name(template)
        for variant, prep in PREP.items():
            db = pg.new_db(template=name)
            with psycopg.connect(db, autocommit=True) as conn:
                for stmt in prep:
                    conn.execute(stmt)
                conn.execute("CHECKPOINT")
            with psycopg.connect(db) as conn:
                t = time.monotonic()
                landed = _run(conn, variant, crawl_id, depth + 1, links)
                conn.commit()
                secs = time.monotonic() - t
            ctx.detail(variant, {"seconds": round(secs, 3), "landed": landed})
            ctx.metric(f"insert: {variant}", secs, "s", note=f"{landed:,} of {n_links:,} landed, {pages:,} held")
            with psycopg.connect(pg.admin_url, autocommit=True) as conn:
                conn.execute(f"DROP DATABASE {pg.db_name(db)}")


BENCHMARKS = {"frontier-insert": frontier_insert}
