"""Index admitted archives for search (issue 26 item 2): ``POST /api/crawls/{id}/index`` and
the ledger's search sweep (late archives: the reconciler's, or a level whose index call failed).

Claims are ``FOR UPDATE SKIP LOCKED`` batches of ``archives`` rows with ``indexed_at IS NULL``:
two replicas (or the route and the sweep) never read the same WACZ at once, and a row is
marked only in the transaction that writes its ``archive_text``, so a crash leaves it
unindexed for the next call. Idempotent: an indexed archive is never claimed again.
An archive whose WACZ holds no text (no HTML/PDF response, unreadable zip, object missing)
is indexed with an empty tsvector and ``problem`` — done, never retried; one whose store did
not answer (``S3Unavailable``) stays unindexed and is counted as ``deferred``.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from ledger.s3 import S3Unavailable
from ledger.search.extract import PageText
from ledger.search.languages import config_for
from ledger.search.wacz_text import NoText, RevisitOnly, text_from_s3

log = logging.getLogger("waggle.search")

BATCH = 16  # archives claimed per transaction (their WACZ reads run concurrently)
READ_CONCURRENCY = 4

# Set-based writes (decision 311): the batch's texts are COPied into a temporary staging table
# and turned into rows by one INSERT … SELECT, so Postgres builds every tsvector and GIN entry
# in one statement instead of one round trip and plan per page. The row's tsvector is weighted
# (title A, headings B, body C); an unknown configuration falls back to simple; org_id is the
# crawl's organization, else the capture submission's (a candidate filter for queries only).
STAGE_COLUMNS = ("archive_id", "crawl_id", "task_id", "host", "url", "captured_at", "title", "lang", "config",
                 "headings", "body", "problem")
STAGE = """
CREATE TEMP TABLE IF NOT EXISTS archive_text_stage (
    archive_id uuid, crawl_id uuid, task_id uuid, host text, url text, captured_at timestamptz, title text,
    lang text, config text, headings text, body text, problem text)
    WITH (toast_tuple_target = 8160) ON COMMIT DELETE ROWS
"""
# (toast_tuple_target: a staged row up to a page is kept as it came — a value compressed here
# would be copied compressed into archive_text, whose body is stored uncompressed; migration 380.)
INSERT_STAGED = """
INSERT INTO archive_text (archive_id, crawl_id, org_id, host, url, captured_at, title, lang, config, body, problem, tsv)
SELECT s.archive_id, s.crawl_id, COALESCE(c.org_id, cs.org_id), s.host, s.url, s.captured_at, s.title, s.lang, g.cfg,
       s.body, s.problem,
       setweight(to_tsvector(g.cfg, s.title), 'A') || setweight(to_tsvector(g.cfg, s.headings), 'B')
       || setweight(to_tsvector(g.cfg, s.body), 'C')
FROM archive_text_stage s
CROSS JOIN LATERAL (SELECT COALESCE((SELECT oid FROM pg_ts_config WHERE cfgname = s.config LIMIT 1),
                                    'simple'::regconfig)::regconfig AS cfg) g
LEFT JOIN crawls c ON c.id = s.crawl_id
LEFT JOIN capture_submissions cs ON cs.task_id = s.task_id
ON CONFLICT (archive_id) DO NOTHING
RETURNING archive_id::text AS id, config::text AS config
"""


async def insert_texts(conn: Any, rows: list[tuple]) -> dict[str, str]:
    """Insert ``archive_text`` rows on ``conn``'s transaction (one COPY into the staging table,
    one INSERT … SELECT); ``rows`` are tuples in :data:`STAGE_COLUMNS` order. Returns archive
    id → configuration name of the rows inserted now (an archive already indexed is left as it
    is and absent). The staging table is emptied when the transaction commits."""
    if not rows:
        return {}
    await conn.execute(STAGE)
    await conn.execute("TRUNCATE archive_text_stage")  # rows of an earlier statement in this transaction
    # the GIN pending-list cleanup this insert may run merges in work_mem: 64 MB takes the whole
    # 16 MB list (migration 380) in one pass (decision 381: −0.04 ms of CPU per page with it)
    await conn.execute("SET LOCAL work_mem = '64MB'")
    async with conn.cursor() as cur:
        async with cur.copy(f"COPY archive_text_stage ({', '.join(STAGE_COLUMNS)}) FROM STDIN") as cp:
            for r in rows:
                await cp.write_row(r)
        await cur.execute(INSERT_STAGED)
        return {r["id"] if isinstance(r, dict) else r[0]: r["config"] if isinstance(r, dict) else r[1]
                for r in await cur.fetchall()}


def stage_row(row: dict, text: PageText | None, problem: str | None) -> tuple:
    """The staging tuple of an archive ``row`` (``id, source_url, captured_at, correlation_id,
    task_id``) and its extracted ``text`` (None: indexed without text, ``problem`` says why)."""
    text = text or PageText("", "", "", None, None)
    return (row["id"], crawl_uuid(row.get("correlation_id")), row.get("task_id"), host_of(row["source_url"]),
            row["source_url"], row["captured_at"], text.title, text.lang, config_for(text.lang), text.headings,
            text.body, problem)


# A recrawl's unchanged page (its document a revisit record): the original's text, found through
# the organization's digest index (ledger.archive.digests; never another organization's).
COPY_ORIGINAL = """
INSERT INTO archive_text (archive_id, crawl_id, org_id, host, url, captured_at, title, lang, config, body, problem, tsv)
SELECT %(id)s, %(crawl)s, c.org_id, %(host)s, %(url)s, %(captured)s, o.title, o.lang, o.config, o.body, o.problem, o.tsv
FROM payload_digests pd JOIN crawls c ON c.org_id = pd.org_id JOIN archive_text o ON o.archive_id = pd.archive_id
WHERE c.id = %(crawl)s AND pd.digest = ANY(%(digests)s)
LIMIT 1
ON CONFLICT (archive_id) DO NOTHING
RETURNING config
"""
HELD_ORIGINAL = """
SELECT 1 FROM payload_digests pd JOIN crawls c ON c.org_id = pd.org_id
WHERE c.id = %(crawl)s AND pd.digest = ANY(%(digests)s)
"""


async def copy_original_text(conn: Any, row: dict, revisit: RevisitOnly) -> str | bool:
    """Index a revisit page by its original's text: the configuration name when copied, True
    when it cannot be (no original held in the crawl's organization: written without text),
    False when the original is held but not indexed yet (try again later)."""
    base = revisit.digest.rstrip("=")  # BrowserHive drops the base32 padding, we keep it
    args = {"id": row["id"], "crawl": crawl_uuid(row.get("correlation_id")), "host": host_of(row["source_url"]),
            "url": row["source_url"], "captured": row["captured_at"], "digests": [base + "=" * k for k in range(8)]}
    if args["crawl"] is not None:
        got = await (await conn.execute(COPY_ORIGINAL, args)).fetchone()
        if got is not None:
            return str(got["config"])
        if await (await conn.execute(HELD_ORIGINAL, args)).fetchone() is not None:
            return False
    await write_text(conn, row, None, "a revisit of an earlier capture this organization no longer holds")
    return True


@dataclass
class IndexResult:
    """Counts of one call: ``indexed`` archives marked now, of which ``pages`` with text and
    ``without_text`` without; ``deferred`` (store unavailable, left for later);
    ``already`` (indexed before this call), ``remaining`` (still unindexed after it)."""

    indexed: int = 0
    pages: int = 0
    without_text: int = 0
    deferred: int = 0
    already: int = 0
    remaining: int = 0
    problems: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, int]:
        return {"indexed": self.indexed, "pages": self.pages, "withoutText": self.without_text,
                "deferred": self.deferred, "alreadyIndexed": self.already, "remaining": self.remaining}


WAIT_FOR_OTHERS_S = 15  # with the 40 s budget, inside the flow's 60 s timeout


async def _wait_for_others(pool: Any, where: str, crawl: uuid.UUID) -> None:
    """Wait (≤ :data:`WAIT_FOR_OTHERS_S`) until rows of ``crawl`` that another replica or the
    sweep holds are committed, so the answer counts them as indexed, not as remaining: a plain
    ``FOR UPDATE`` waits for their locks and re-reads them afterwards."""
    async with pool.connection() as conn, conn.transaction():
        await conn.execute(f"SET LOCAL lock_timeout = '{WAIT_FOR_OTHERS_S}s'")
        try:
            async with conn.transaction():  # a savepoint: a lock timeout leaves the outer one usable
                await conn.execute(f"SELECT a.id FROM archives a WHERE a.indexed_at IS NULL AND {where}"
                                   " FOR UPDATE OF a", {"crawl": str(crawl)})
        except Exception as exc:  # noqa: BLE001 - lock_timeout: answer with what is known now
            if getattr(exc, "sqlstate", None) != "55P03":
                raise
            log.warning("index: another indexer held rows of the crawl for %s s", WAIT_FOR_OTHERS_S)


def host_of(url: str) -> str:
    try:
        return (urlsplit(url).hostname or "").lower()
    except ValueError:
        return ""


def crawl_uuid(value: Any) -> uuid.UUID | None:
    try:
        return uuid.UUID(str(value)) if value else None
    except ValueError:
        return None


# archives of one crawl: the flow's correlationId is the crawl id; pages name their task ids
_OF_CRAWL = """(a.correlation_id = %(crawl)s::text OR a.task_id::text IN (
    SELECT p.task_id FROM crawl_pages p WHERE p.crawl_id = %(crawl)s::uuid AND p.task_id IS NOT NULL))"""


async def _claim(conn: Any, crawl: uuid.UUID | None, limit: int, grace_s: float) -> list[dict]:
    where = _OF_CRAWL if crawl is not None else "TRUE"
    cur = await conn.execute(
        f"""SELECT a.id, a.bucket, a.object_key, a.source_url, a.captured_at, a.correlation_id, a.task_id
            FROM archives a WHERE a.indexed_at IS NULL AND {where}
              AND a.created_at <= now() - make_interval(secs => %(grace)s)
            ORDER BY a.id LIMIT %(limit)s FOR UPDATE OF a SKIP LOCKED""",
        {"crawl": str(crawl) if crawl else None, "limit": limit, "grace": grace_s})
    return await cur.fetchall()


async def _texts(s3: Any, rows: list[dict]) -> list[PageText | NoText | Exception]:
    gate = asyncio.Semaphore(READ_CONCURRENCY)

    async def one(row: dict) -> PageText | NoText | Exception:
        async with gate:
            try:
                return await text_from_s3(s3, row["bucket"], row["object_key"], row["source_url"])
            except (NoText, S3Unavailable) as exc:
                return exc
            except Exception as exc:  # noqa: BLE001 - a parser fault on one page must not stop the level
                log.warning("text extraction failed", exc_info=True, extra={"archiveId": str(row["id"])})
                return NoText(f"text extraction failed: {type(exc).__name__}")

    return list(await asyncio.gather(*(one(r) for r in rows)))


async def write_text(conn: Any, row: dict, text: PageText | None, problem: str | None) -> str | None:
    """Insert one ``archive_text`` row (on ``conn``'s transaction); returns its configuration
    name, or None when the archive already had one."""
    got = await insert_texts(conn, [stage_row(row, text, problem)])
    return next(iter(got.values()), None)


async def _batch(pool: Any, s3: Any, crawl: uuid.UUID | None, out: IndexResult, grace_s: float) -> bool:
    """One claimed batch; False when there was nothing left to claim."""
    async with pool.connection() as conn, conn.transaction():
        rows = await _claim(conn, crawl, BATCH, grace_s)
        if not rows:
            return False
        texts = await _texts(s3, rows)
        done, configs, staged = [], set(), []
        for row, text in zip(rows, texts):
            if isinstance(text, (S3Unavailable, RevisitOnly)):
                continue
            problem = str(text)[:500] if isinstance(text, Exception) else None
            staged.append(stage_row(row, None if problem else text, problem))  # type: ignore[arg-type]
            done.append(row["id"])
            if problem:
                out.without_text += 1
                out.problems.append(problem)
            else:
                out.pages += 1
        configs.update((await insert_texts(conn, staged)).values())
        # revisit pages after the others: their originals may be in this very batch
        for row, text in zip(rows, texts):
            if isinstance(text, S3Unavailable):
                out.deferred += 1
            elif isinstance(text, RevisitOnly):
                copied = await copy_original_text(conn, row, text)
                if copied is False:  # its original is not indexed yet: a later pass copies it
                    out.deferred += 1
                    continue
                done.append(row["id"])
                if copied is True:
                    out.without_text += 1
                else:
                    configs.add(copied)
                    out.pages += 1
        if done:
            await conn.execute("UPDATE archives SET indexed_at = now() WHERE id = ANY(%s)", (done,))
        for config in configs:
            await conn.execute("INSERT INTO search_configs (config) VALUES (%s::regconfig) ON CONFLICT DO NOTHING",
                               (config,))
        out.indexed += len(done)
        return len(done) > 0  # a batch of deferred rows only: stop, the store is down


async def index_archives(pool: Any, s3: Any, crawl: uuid.UUID | None = None, *, max_batches: int | None = None,
                         grace_s: float = 0.0, budget_s: float | None = None) -> IndexResult:
    """Index the unindexed archives of ``crawl`` (None: of every crawl) admitted at least
    ``grace_s`` seconds ago, at most ``max_batches`` × :data:`BATCH` of them, starting no batch
    after ``budget_s`` seconds (the rest is ``remaining``: the next call or the sweep takes
    it); counts in :class:`IndexResult`."""
    import time

    out = IndexResult()
    batches = 0
    deadline = None if budget_s is None else time.monotonic() + budget_s
    while max_batches is None or batches < max_batches:
        if deadline is not None and time.monotonic() > deadline:
            return await _counted(pool, crawl, out)
        batches += 1
        if not await _batch(pool, s3, crawl, out, grace_s):
            break
    if crawl is not None and not out.deferred:
        await _wait_for_others(pool, _OF_CRAWL, crawl)
    return await _counted(pool, crawl, out)


async def _counted(pool: Any, crawl: uuid.UUID | None, out: IndexResult) -> IndexResult:
    """``out`` with ``remaining`` and ``already`` counted for ``crawl`` (None: every archive)."""
    where = _OF_CRAWL if crawl is not None else "TRUE"
    async with pool.connection() as conn:
        row = await (await conn.execute(
            f"""SELECT count(*) FILTER (WHERE a.indexed_at IS NULL) AS remaining,
                       count(*) FILTER (WHERE a.indexed_at IS NOT NULL) AS indexed
                FROM archives a WHERE {where}""", {"crawl": str(crawl) if crawl else None})).fetchone()
    out.remaining = row["remaining"]
    out.already = max(0, row["indexed"] - out.indexed)
    return out


async def sweep(services: Any) -> None:
    """The search loop's round: index archives any crawl left unindexed (late admissions: the
    reconciler's, a salvaged level's, a level whose index call failed). Archives admitted less
    than ``search_sweep_grace_s`` ago are left to their level's own ``index_level``."""
    settings = services.settings
    if search_enabled(settings) and services.s3 is not None:
        result = await index_archives(services.pool, services.s3, None, max_batches=SWEEP_BATCHES,
                                      grace_s=settings.search_sweep_grace_s)
        if result.indexed or result.deferred:
            log.info("search sweep", extra=result.as_dict())


SWEEP_BATCHES = 64


def search_enabled(settings: Any) -> bool:
    """Search is on unless ``WAGGLE_SEARCH_URL=off`` (:func:`ledger.search.backend.backend_of`)."""
    from ledger.search.backend import backend_of

    return backend_of(getattr(settings, "search_url", None)) == "postgres"
