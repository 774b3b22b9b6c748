"""The per-organization payload digest index behind revisit records (decision 181, issue 27 item 1).

* :func:`record_digests` — at admission (level report or reconciler): the archive's response
  digests enter ``payload_digests`` (the first capture of a digest per organization is kept),
  its revisit digests ``archive_revisits``, its revisit count and bytes saved its row.
* :func:`held` — the capture server's question through ``POST /api/crawls/{id}/digests``:
  which of these digests does the crawl's organization already hold (original URI and date)?
* :func:`written` — within one crawl (decision 321): which ``(uri, digest)`` pairs an earlier
  capture of the crawl already wrote (``crawl_resources``, filled by :func:`record_digests`).
* :func:`referred_archives` — the archives a crawl's revisits refer to, same organization only:
  what the crawl's collection must include so every page of a recrawl replays in full.

Every query names the organization: a revisit never reveals nor depends on another's archive.
Digests are compared in a normal form (algorithm lower-case, base32 upper-case, ``=`` padding
dropped) because BrowserHive drops the padding and our capture server keeps it (contracts §B.5).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from psycopg.types.json import Jsonb

from ledger.archive.cdxj import IndexedDigests

DIGESTS_MAX = 5000  # one capture's responses; more is not a page
URI_MAX = 2000  # a longer URL is not indexed per crawl (the capture server stores it again)


def normal(digest: str) -> str:
    """``sha256:abc=`` → ``sha256:ABC``: the form stored and compared."""
    algo, sep, value = digest.strip().partition(":")
    if not sep:
        return digest.strip().rstrip("=").upper()
    return f"{algo.lower()}:{value.rstrip('=').upper()}"


async def record_digests(conn: Any, org_id: str, archive_id: str, found: IndexedDigests, bytes_saved: int = 0) -> None:
    """Index the registered archive ``archive_id`` of ``org_id`` (on ``conn``'s transaction)."""
    if found.responses:
        rows = [{"d": normal(r.digest), "u": r.uri, "t": r.date.isoformat()} for r in found.responses]
        await conn.execute(
            "INSERT INTO payload_digests (org_id, digest, uri, captured_at, archive_id)"
            " SELECT %s, v.d, v.u, v.t, %s FROM jsonb_to_recordset(%s::jsonb) AS v(d text, u text, t timestamptz)"
            " ON CONFLICT (org_id, digest) DO NOTHING", (org_id, archive_id, Jsonb(rows)))
    pairs = [{"u": u, "d": normal(d)} for u, d in found.resources if len(u) <= URI_MAX]
    if pairs:  # only an archive of a crawl (correlation id = the crawl's id) holds pairs for one
        await conn.execute(
            "INSERT INTO crawl_resources (crawl_id, uri, digest, archive_id)"
            " SELECT c.id, v.u, v.d, a.id FROM archives a JOIN crawls c ON c.id::text = a.correlation_id,"
            " jsonb_to_recordset(%s::jsonb) AS v(u text, d text) WHERE a.id = %s"
            " ON CONFLICT DO NOTHING", (Jsonb(pairs), archive_id))
    if found.revisits:
        await conn.execute(
            "INSERT INTO archive_revisits (archive_id, digest) SELECT %s, d FROM unnest(%s::text[]) AS d"
            " ON CONFLICT DO NOTHING", (archive_id, sorted({normal(d) for d in found.revisits})))
        await conn.execute("UPDATE archives SET revisit_count = %s, revisit_bytes_saved = %s WHERE id = %s",
                           (len(found.revisits), max(0, bytes_saved), archive_id))


async def held(pool: Any, org_id: str, digests: list[str]) -> dict[str, dict[str, str]]:
    """Of ``digests`` (as the caller wrote them), those ``org_id`` holds → ``{digest: {"uri",
    "date", "container"}}`` (``date``: the original's WARC-Date, ISO 8601 UTC, seconds;
    ``container``: ``<archive id>.wacz``, the original's member name in a crawl collection —
    the revisit record names it in ``WARC-Refers-To-Container`` so ReplayWeb.page opens that
    member for an original at another URL; decision 322)."""
    by_normal: dict[str, list[str]] = {}
    for d in digests:
        by_normal.setdefault(normal(d), []).append(d)
    async with pool.connection() as conn:
        rows = await (await conn.execute(
            "SELECT digest, uri, captured_at, archive_id FROM payload_digests WHERE org_id = %s AND digest = ANY(%s)",
            (org_id, list(by_normal)))).fetchall()
    out: dict[str, dict[str, str]] = {}
    for row in rows:
        date: datetime = row["captured_at"]
        for asked in by_normal[row["digest"]]:
            out[asked] = {"uri": row["uri"], "date": date.strftime("%Y-%m-%dT%H:%M:%SZ"),
                          "container": f"{row['archive_id']}.wacz"}
    return out


async def written(pool: Any, crawl_id: str, pairs: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """Of ``pairs`` ``(uri, digest as the caller wrote it)``, those an admitted, complete archive
    of crawl ``crawl_id`` already holds (a 200 response or revisit, or a behavior source). Each
    such row is marked ``shared``: the caller leaves it out, so its archive becomes one the
    crawl's collection preloads (decision 421)."""
    asked: dict[tuple[str, str], list[tuple[str, str]]] = {}
    for uri, digest in pairs:
        asked.setdefault((uri, normal(digest)), []).append((uri, digest))
    if not asked:
        return []
    async with pool.connection() as conn:
        rows = await (await conn.execute(
            "WITH found AS (SELECT r.uri, r.digest, r.shared FROM crawl_resources r"
            "   JOIN jsonb_to_recordset(%s::jsonb) AS v(u text, d text) ON r.uri = v.u AND r.digest = v.d"
            "   WHERE r.crawl_id = %s),"
            # rows locked in one order (uri, digest) whoever asks: two captures of the crawl
            # marking overlapping resources in their own orders could otherwise deadlock
            " target AS (SELECT r.ctid AS row_id FROM crawl_resources r JOIN found f"
            "   ON r.uri = f.uri AND r.digest = f.digest WHERE r.crawl_id = %s AND NOT f.shared"
            "   ORDER BY r.uri, r.digest FOR UPDATE OF r),"
            " mark AS (UPDATE crawl_resources r SET shared = true FROM target t WHERE r.ctid = t.row_id)"
            " SELECT uri, digest FROM found",
            (Jsonb([{"u": u, "d": d} for u, d in asked]), crawl_id, crawl_id))).fetchall()
    return [p for row in rows for p in asked.get((row["uri"], row["digest"]), [])]


async def shared_archives(pool: Any, crawl_id: str) -> set[str]:
    """Ids of the crawl's archives holding a resource a later capture of the crawl left out."""
    async with pool.connection() as conn:
        rows = await (await conn.execute(
            "SELECT DISTINCT archive_id FROM crawl_resources WHERE crawl_id = %s AND shared",
            (crawl_id,))).fetchall()
    return {str(r["archive_id"]) for r in rows}


async def referred_archives(pool: Any, crawl_id: str) -> list[str]:
    """The archive ids (sorted) that hold the originals of the crawl's revisit records, within
    the crawl's organization, other than the crawl's own archives. Unknown crawl → []."""
    async with pool.connection() as conn:
        rows = await (await conn.execute(
            "SELECT DISTINCT pd.archive_id FROM crawls c"
            " JOIN archives a ON a.correlation_id = c.id::text"
            " JOIN archive_revisits r ON r.archive_id = a.id"
            " JOIN payload_digests pd ON pd.org_id = c.org_id AND pd.digest = r.digest"
            " WHERE c.id = %s AND pd.archive_id NOT IN"
            "   (SELECT id FROM archives WHERE correlation_id = c.id::text)"
            " ORDER BY pd.archive_id", (crawl_id,))).fetchall()
    return [str(r["archive_id"]) for r in rows]
