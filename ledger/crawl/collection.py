"""A crawl as one web archive: its admitted WACZ files as a multi-WACZ collection (issue 25,
docs/decisions/151-crawl-collection.md, 371-collection-members-through-the-ledger.md).

The answer is the JSON ReplayWeb.page (wabac.js ``MultiWACZ``, root source type ``json``) loads,
the form Browsertrix serves as ``replay.json``::

    {"profile": "multi-wacz-package", "title", "crawlId", "state", "running", "expiresIn": <s>,
     "resources": [{"name": "<archive id>.wacz", "path": <the member's ledger path>,
                    "hash": "sha256:<hex>" | null, "bytes": <int> | null, "crawlId", "archiveId",
                    "url", "depth", "ts", "title", "httpStatus", "contentType" (null: unknown),
                    "complete", "reason"}],
     "pages": {"total", "inCollection", "missing"},
     "missing": [{"url", "depth", "why", "reason"}],  # the first MISSING_LISTED, seed first
     "missingCount": <int>,
     "preloadResources": [{"name": "<archive id>.wacz"}]}  # decision 421

Members are the archives of the crawl's pages (``crawl_pages.task_id`` → ``archives``) that the
caller may view (one batched ``authz.viewable``). A member's ``path`` is a ledger path
(:func:`member_path`: ``/api/crawls/{crawl}/members/{archive}.wacz``, with a ticket
``/api/crawls/{crawl}/collection/t/{ticket}/members/{archive}.wacz``) that Checks the caller
and answers 302 to an S3 GET signed then for ``expiresIn`` seconds: the answer holds no
signature, never expires, and a player reading a member after any time gets a fresh URL.
``why`` of a missing page: ``failed``, ``skipped``, ``blocked``, ``not-captured-yet`` (a running crawl's
pending page), ``not-admitted-yet`` (captured, archive not yet admitted: the reconciler will),
``not-viewable`` (an archive this caller may not view). A member whose archive is incomplete
is in ``resources`` with ``complete: false`` and ``reason``.

Reuse (decision 371): a finished crawl's members (SQL rows, measured sizes, each member's JSON
encoded once) are kept per crawl while a cheap stamp of its archives is unchanged, at most
``WAGGLE_COLLECTION_CACHE_S``; a caller's decisions over more than ``authz.BATCH_MAX`` members are
kept as long, and only while ``fga_outbox`` is unchanged (every tuple the ledger writes or
deletes goes through it). ``0`` turns both off. Bytes are always behind a live Check.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections import OrderedDict
import itertools
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any
from urllib.parse import urlsplit

import orjson

from ledger.archive.digests import referred_archives, shared_archives
from ledger.archive.facts import FACTS_COLUMNS, FACTS_JOIN, REVISIT_MIME
from ledger.archive.files import measure_missing
from ledger.crawl.pages import incomplete_reason

PROFILE = "multi-wacz-package"
MEASURE_INLINE = 200  # members measured within one answer; more go on in the background
_measuring: dict[str, asyncio.Task] = {}  # crawl id → its background measuring (one at a time)
UUID_TEXT = "^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$"
MISSING_LISTED = 1000
# Members named in preloadResources (decision 421): the player looks in these first for every
# resource, so a few — the pages that first stored what later pages left out — and never all.
PRELOAD_MAX = 20

_MEMBERS = """
SELECT p.id AS page_id, p.url, p.final_url, p.depth, p.state, p.failure_class, p.skip_reason, p.task_id,
       a.id AS archive_id, a.bucket, a.object_key, a.captured_at, a.wacz_complete, a.wacz_problem,
       a.missing_body_count, a.truncated_urls, a.incomplete_reason, a.missing_body_urls,
       f.bytes, f.sha256, f.title, f.http_status, f.content_type, s.manifest_key, """ + FACTS_COLUMNS + """
FROM crawl_pages p
-- the task id as uuid (an index lookup; a text comparison would read every archive per page)
LEFT JOIN LATERAL (SELECT * FROM archives a WHERE a.task_id = (CASE WHEN p.task_id ~* '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$'
                   THEN p.task_id::uuid END) ORDER BY a.created_at LIMIT 1) a ON true
LEFT JOIN archive_files f ON f.archive_id = a.id
LEFT JOIN capture_submissions s ON s.task_id = a.task_id AND f.archive_id IS NULL""" + FACTS_JOIN + """
WHERE p.crawl_id = %s
ORDER BY p.depth, p.id
"""

# Archives of earlier crawls that hold the originals of this crawl's revisit records
# (ledger.archive.digests.referred_archives): members too, so every page of a recrawl replays.
_ORIGINALS = """
SELECT a.id AS archive_id, a.bucket, a.object_key, a.captured_at, a.wacz_complete, a.wacz_problem,
       a.missing_body_count, a.truncated_urls, a.incomplete_reason, a.missing_body_urls, a.source_url AS url,
       f.bytes, f.sha256, f.title, f.http_status, f.content_type, """ + FACTS_COLUMNS + """
FROM archives a LEFT JOIN archive_files f ON f.archive_id = a.id""" + FACTS_JOIN + """
WHERE a.id = ANY(%s::uuid[]) ORDER BY a.captured_at
"""


def _iso(value: datetime) -> str:
    return value.astimezone(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def title_of(crawl: dict) -> str:
    """``<first seed's host> <start date>`` — how people name a crawl (e.g. ``docs.python.org 2026-12-01``)."""
    host = urlsplit(crawl["seeds"][0]).hostname or crawl["seeds"][0]
    return f"{host} {crawl['started_at'].astimezone(timezone.utc).date().isoformat()}"


def _contents(row: dict, measured: dict) -> dict:
    """``title``, ``httpStatus``, ``contentType`` of a member: from admission (decision 341; a
    revisit's type is its original's), else as measured (decision 155), never ``warc/revisit``."""
    if row.get("facts_read"):
        return {"title": row["facts_title"], "httpStatus": row["facts_http_status"],
                "contentType": row["facts_content_type"]}
    ctype = measured["content_type"]
    return {"title": measured["title"], "httpStatus": measured["http_status"],
            "contentType": None if ctype == REVISIT_MIME else ctype}


def _missing(row: dict, running: bool) -> dict | None:
    """The missing-list entry of a page without a member, or None when it has one."""
    state = row["state"]
    if state == "failed":
        why, reason = "failed", row["skip_reason"] or row["failure_class"]
    elif state == "skipped":
        why, reason = "skipped", row["skip_reason"]
    elif state == "blocked":  # the host answered a challenge or block page (decision 231)
        why, reason = "blocked", row["skip_reason"] or "the host was blocked"
    elif state == "pending":
        why = "not-captured-yet" if running else "not-captured"
        reason = "waiting for its capture" if running else "the crawl ended before its capture"
    elif row["archive_id"] is None:
        why, reason = "not-admitted-yet", "captured; its archive is not admitted yet (the reconciler admits it)"
    else:
        return None
    return {"url": row["url"], "depth": row["depth"], "why": why, "reason": reason}


def member_path(crawl_id: str, archive_id: str, ticket: str | None = None) -> str:
    """The ledger path of a member (Check, then 302 to a freshly signed S3 GET)."""
    return f"{_prefix(crawl_id, ticket)}{archive_id}.wacz"


def _prefix(crawl_id: str, ticket: str | None) -> str:
    via = f"collection/t/{ticket}/" if ticket is not None else ""
    return f"/api/crawls/{crawl_id}/{via}members/"


@dataclass(slots=True)
class Member:
    """One member as every caller's answer shows it; ``encoded``: its resource's JSON without
    ``name`` and ``path`` (the two a caller's answer puts first) — kept encoded only, the
    smallest form of a crawl's members held between answers."""

    aid: str
    url: str
    depth: int | None
    original: bool
    bucket: str
    object_key: str
    ts: str
    encoded: bytes
    i: int  # its place in the snapshot's members (a caller's decisions are a mask over them)

    @property
    def resource(self) -> dict:
        """The resource's fields (``hash``, ``complete``, ``reason``, ``title``, …), decoded."""
        return orjson.loads(self.encoded)


@dataclass
class Snapshot:
    """A crawl's members and pages as the database holds them, the same for every caller.
    ``entries`` in answer order: a :class:`Member`, or a page's missing entry (a dict)."""

    crawl: dict
    stamp: tuple | None
    made: float
    entries: list
    members: list[Member]
    pages_total: int
    running: bool
    settled: bool  # every member measured: may be reused
    measured_now: bool = False  # this read measured members (archive_files rows written)
    shared: frozenset = frozenset()  # ids of members holding what other captures left out (decision 421)
    serial: int = field(default_factory=lambda: next(_serials))  # which read this is (decisions refer to it)


_snapshots: OrderedDict[str, Snapshot] = OrderedDict()  # crawl id → its members (finished crawls)
# (crawl, subject, orgs) → (snapshot serial, outbox stamp, made, mask): 1 byte per member each
_decisions: OrderedDict[tuple, tuple] = OrderedDict()
_serials = itertools.count(1)
SNAPSHOTS_KEPT = 4  # crawls (≈ 0.7 kB per member each)
DECISIONS_KEPT = 256

# What changes a finished crawl's members (a late admission, a measure, admission facts, a page
# state) and what changes who may view them (any tuple the ledger writes or deletes): one round trip.
_STAMP = """
SELECT c.state, c.finished_at,
       (SELECT count(*) FROM crawl_pages p WHERE p.crawl_id = c.id) AS pages,
       (SELECT count(p.task_id) FILTER (WHERE p.state = 'captured') FROM crawl_pages p WHERE p.crawl_id = c.id) AS captured,
       (SELECT count(*) FROM archives a WHERE a.correlation_id = c.id::text) AS archives,
       (SELECT count(*) FROM archives a JOIN archive_files f ON f.archive_id = a.id
         WHERE a.correlation_id = c.id::text) AS measured,
       (SELECT count(*) FROM archives a JOIN archive_facts x ON x.archive_id = a.id
         WHERE a.correlation_id = c.id::text) AS facts,
       (SELECT max(id) FROM fga_outbox) AS outbox_last,
       (SELECT count(*) FROM fga_outbox WHERE processed_at IS NULL) AS outbox_pending
FROM crawls c WHERE c.id = %s
"""


def _keep(cache: OrderedDict, key: Any, value: Any, limit: int) -> None:
    cache[key] = value
    cache.move_to_end(key)
    while len(cache) > limit:
        cache.popitem(last=False)


def forget(crawl_id: str) -> None:
    """Drop what is kept of crawl ``crawl_id`` (its members changed here)."""
    _snapshots.pop(str(crawl_id), None)


async def _stamps(pool: Any, crawl_id: uuid.UUID) -> tuple[tuple, tuple] | None:
    """(members' stamp, decisions' stamp) of the crawl, or None for no such crawl."""
    async with pool.connection() as conn:
        r = await (await conn.execute(_STAMP, (crawl_id,))).fetchone()
    if r is None:
        return None
    return ((r["state"], r["finished_at"], r["pages"], r["captured"], r["archives"], r["measured"], r["facts"]),
            (r["outbox_last"], r["outbox_pending"]))


async def snapshot(services: Any, crawl_id: uuid.UUID, stamp: tuple | None = None) -> Snapshot | None:
    """The crawl's members: the kept snapshot when its ``stamp`` is unchanged and it is younger
    than ``WAGGLE_COLLECTION_CACHE_S``, else read (and measured) now. None: no such crawl."""
    key, ttl = str(crawl_id), _cache_s(services)
    kept = _snapshots.get(key)
    if kept is not None and stamp is not None and kept.stamp == stamp and time.monotonic() - kept.made < ttl:
        _snapshots.move_to_end(key)
        return kept
    snap = await _read(services, crawl_id)
    if snap is None:
        return None
    if snap.measured_now and stamp is not None:  # its own measures changed the stamp: kept as it is now
        stamps = await _stamps(services.pool, crawl_id)
        stamp = stamps[0] if stamps is not None else None
    snap.stamp = stamp
    if ttl > 0 and stamp is not None and snap.settled and not snap.running:
        _keep(_snapshots, key, snap, SNAPSHOTS_KEPT)
    else:
        _snapshots.pop(key, None)
    return snap


def _cache_s(services: Any) -> float:
    return float(getattr(services.settings, "collection_cache_s", 0) or 0)


async def _read(services: Any, crawl_id: uuid.UUID) -> Snapshot | None:
    made = time.monotonic()
    async with services.pool.connection() as conn:
        crawl = await (await conn.execute(
            "SELECT id, seeds, state, started_at, finished_at FROM crawls WHERE id = %s", (crawl_id,))).fetchone()
        if crawl is None:
            return None
        rows = await (await conn.execute(_MEMBERS, (crawl_id,))).fetchall()
    referred = await referred_archives(services.pool, str(crawl_id))
    shared = frozenset(await shared_archives(services.pool, str(crawl_id)))
    originals: list[dict] = []
    if referred:
        async with services.pool.connection() as conn:
            originals = [{**r, "page_id": None, "depth": None, "final_url": None, "manifest_key": None}
                         for r in await (await conn.execute(_ORIGINALS, (referred,))).fetchall()]
    for r in rows + originals:  # each id as text once (10,000 UUID.__str__ per use were a tenth of the answer)
        r["aid"] = None if r["archive_id"] is None else str(r["archive_id"])
    running = crawl["state"] == "running"
    with_archive = [r for r in rows if r["aid"] is not None and _missing(r, running) is None] + originals
    unmeasured = [{**r, "url": r["final_url"] or r["url"]} for r in with_archive if r["sha256"] is None]
    gone: set[str] = set()  # objects the store says are missing: measuring again will not find them
    measured = await measure_missing(services.pool, services.s3, unmeasured[:MEASURE_INLINE], gone) if unmeasured else {}
    later = unmeasured[MEASURE_INLINE:]
    key = str(crawl_id)
    if later and key not in _measuring:  # a bounded answer; its next ones carry the rest
        task = asyncio.get_running_loop().create_task(measure_missing(services.pool, services.s3, later))
        _measuring[key] = task
        task.add_done_callback(lambda _t, k=key: (_measuring.pop(k, None), forget(k)))
    crawl_text = str(crawl_id)
    entries: list = []
    members: list[Member] = []
    for r in rows + originals:
        original = r.get("page_id") is None
        entry = None if original else _missing(r, running)
        if entry is not None:
            entries.append(entry)
            continue
        aid = r["aid"]
        facts = measured.get(aid) or r
        size, sha = facts["bytes"], facts["sha256"]
        ts = _iso(r["captured_at"])
        resource = {
            "hash": f"sha256:{sha}" if sha else None,
            "bytes": size,
            "crawlId": crawl_text,
            "archiveId": aid,
            "url": r["url"],
            "depth": r["depth"],
            "ts": ts,
            **_contents(r, facts),
            "complete": r["wacz_complete"],
            "reason": incomplete_reason(r),
            **({"role": "original"} if original else {}),  # an earlier crawl's, for this crawl's revisits
        }
        m = Member(aid, r["url"], r["depth"], original, r["bucket"], r["object_key"], ts, orjson.dumps(resource),
                   len(members))
        entries.append(m)
        members.append(m)
    return Snapshot(crawl=crawl, stamp=None, made=made, entries=entries, members=members, pages_total=len(rows),
                    running=running, settled=not unmeasured or len(unmeasured) <= MEASURE_INLINE and
                    len(measured) + len(gone) == len(unmeasured), measured_now=bool(measured), shared=shared)


def _kept_decisions(services: Any, identity: Any, snap: Snapshot | None, crawl_id: str, stamp: tuple | None) -> bytes | None:
    """The caller's kept mask over ``snap``'s members, when still good (same read of the members,
    ``fga_outbox`` unchanged, younger than ``WAGGLE_COLLECTION_CACHE_S``); else None."""
    from ledger.authz.fga import BATCH_MAX

    ttl = _cache_s(services)
    if snap is None or len(snap.members) <= BATCH_MAX or ttl <= 0 or stamp is None:
        return None
    kept = _decisions.get((crawl_id, identity.subject, tuple(identity.organizations)))
    if kept is not None and kept[0] == snap.serial and kept[1] == stamp and time.monotonic() - kept[2] < ttl:
        return kept[3]
    return None


async def _viewable(services: Any, identity: Any, snap: Snapshot, stamp: tuple | None,
                    listed: Any = None) -> bytes:
    """Which members of ``snap`` the caller may view, as a mask (``mask[m.i]``): OpenFGA's answer
    now, or (more than ``BATCH_MAX`` members, the same snapshot) its answer of less than
    ``WAGGLE_COLLECTION_CACHE_S`` ago while ``fga_outbox`` is unchanged. ``listed``: the
    caller's ListObjects, already asked while the members were read (``Authz.viewable``)."""
    if not snap.members:
        return b""
    from ledger.authz.fga import BATCH_MAX

    key = (str(snap.crawl["id"]), identity.subject, tuple(identity.organizations))
    ttl = _cache_s(services)
    big = len(snap.members) > BATCH_MAX and ttl > 0 and stamp is not None
    kept = _kept_decisions(services, identity, snap, key[0], stamp)
    if kept is not None:
        _decisions.move_to_end(key)
        return kept
    made = time.monotonic()
    ids = [m.aid for m in snap.members]
    allowed = await (services.authz.viewable(identity, ids, listed=listed) if listed is not None
                     else services.authz.viewable(identity, ids))
    mask = bytes(m.aid in allowed for m in snap.members)
    if big:
        _keep(_decisions, key, (snap.serial, stamp, made, mask), DECISIONS_KEPT)
    return mask


def _not_viewable(m: Member) -> dict:
    return {"url": m.url, "depth": m.depth, "why": "original-not-viewable" if m.original else "not-viewable",
            "reason": "the archive holding the original of its revisit records is not shared with you"
                      if m.original else "its archive is not shared with you"}


async def _prepared(services: Any, identity: Any, crawl_id: uuid.UUID) -> tuple[Snapshot, bytes] | None:
    from ledger.authz.fga import BATCH_MAX

    stamps = await _stamps(services.pool, crawl_id)
    if stamps is None:
        return None
    # decisions to ask over many archives: OpenFGA's ListObjects (which needs no ids) runs while
    # the members are read, not after (a cold answer waits for the slower of the two, not both)
    key, listing = str(crawl_id), None
    kept = _snapshots.get(key)
    reusable = kept is not None and kept.stamp == stamps[0] and \
        _kept_decisions(services, identity, kept, key, stamps[1]) is not None
    timed = getattr(services.authz, "timed_list_viewable", None)
    if not reusable and timed is not None and identity.subject and stamps[0][4] > BATCH_MAX:
        listing = asyncio.get_running_loop().create_task(timed(identity))
        listing.add_done_callback(lambda t: t.cancelled() or t.exception())  # an unused one's error: retrieved
    try:
        snap = await snapshot(services, crawl_id, stamps[0])
        if snap is None:
            return None
        mask = await _viewable(services, identity, snap, stamps[1],
                               listing if listing is not None and len(snap.members) > BATCH_MAX else None)
    finally:
        if listing is not None and not listing.done():
            listing.cancel()  # not needed after all (decisions kept, or few members)
    return snap, mask


def _head(snap: Snapshot, expiry_s: int) -> dict:
    crawl = snap.crawl
    return {"profile": PROFILE, "title": title_of(crawl), "crawlId": str(crawl["id"]), "state": crawl["state"],
            "running": snap.running, "expiresIn": expiry_s}


def _split(snap: Snapshot, allowed: bytes) -> tuple[list[Member], list[dict]]:
    members, missing = [], []
    for e in snap.entries:
        if type(e) is dict:
            missing.append(e)
        elif allowed[e.i]:
            members.append(e)
        else:
            missing.append(_not_viewable(e))
    return members, missing


async def viewable_members(services: Any, identity: Any,
                           crawl_id: uuid.UUID) -> tuple[dict, list[Member], list[dict]] | None:
    """``(head, members, missing)`` of the collection as ``identity`` may see it: the answer's
    top-level fields, the viewable :class:`Member` objects in order (shared with the kept
    snapshot: no per-member copy) and every missing entry; None for no such crawl."""
    prepared = await _prepared(services, identity, crawl_id)
    if prepared is None:
        return None
    snap, allowed = prepared
    members, missing = _split(snap, allowed)
    return _head(snap, 0), members, missing


async def collection_json(services: Any, identity: Any, crawl_id: uuid.UUID, *, expiry_s: int,
                          ticket: str | None = None, extra: Any = None) -> bytes | None:
    """The collection (the module docstring's form) as JSON bytes, each member's ``path``
    carrying ``ticket`` when given; ``extra(members)`` → more top-level keys (the
    player's page lookup). Each member's JSON is encoded once per snapshot, not per answer."""
    prepared = await _prepared(services, identity, crawl_id)
    if prepared is None:
        return None
    snap, allowed = prepared
    members, missing = _split(snap, allowed)
    prefix = _prefix(str(crawl_id), ticket).encode()
    parts = [b'{"name":"%s.wacz","path":"%s%s.wacz",%s' % (a, prefix, a, m.encoded[1:])
             for m in members for a in (m.aid.encode(),)]
    # ReplayWeb.page looks for a page's resources in its own member, then in the members of the
    # page the session started from: opened straight at a page that left a style sheet out
    # (decision 321), the sheet's member must be named here or the page shows unstyled
    preload = [{"name": f"{m.aid}.wacz"} for m in members if m.aid in snap.shared][:PRELOAD_MAX]
    tail = {"pages": {"total": snap.pages_total, "inCollection": len(members), "missing": len(missing)},
            "missing": missing[:MISSING_LISTED], "missingCount": len(missing), "preloadResources": preload,
            **(extra(members) if extra is not None else {})}
    return (orjson.dumps(_head(snap, expiry_s))[:-1] + b',"resources":[' + b",".join(parts) + b"],"
            + orjson.dumps(tail)[1:])


async def member_location(services: Any, crawl_id: uuid.UUID, archive_id: str) -> tuple[str, str] | None:
    """``(bucket, object key)`` of archive ``archive_id`` when it is a member of the crawl (an
    archive of one of its pages, or an earlier crawl's holding originals of its revisits); None
    otherwise. Who may view it is not decided here."""
    kept = _snapshots.get(str(crawl_id))
    if kept is not None:
        for m in kept.members:
            if m.aid == archive_id:
                return m.bucket, m.object_key
    async with services.pool.connection() as conn:
        row = await (await conn.execute(
            "SELECT a.bucket, a.object_key FROM archives a WHERE a.id = %s AND EXISTS"
            " (SELECT 1 FROM crawl_pages p WHERE p.crawl_id = %s AND lower(p.task_id) = a.task_id::text)",
            (archive_id, crawl_id))).fetchone()
    if row is None and archive_id in await referred_archives(services.pool, str(crawl_id)):
        async with services.pool.connection() as conn:
            row = await (await conn.execute("SELECT bucket, object_key FROM archives WHERE id = %s",
                                            (archive_id,))).fetchone()
    return (row["bucket"], row["object_key"]) if row else None


async def collection_bytes(pool: Any, crawl_id: uuid.UUID) -> dict:
    """``{"totalBytes", "bytesUnknown"}``: the summed size of the crawl's archives whose size is
    known (from admission, decision 341, or measured) and how many have none yet."""
    async with pool.connection() as conn:
        row = await (await conn.execute(
            "SELECT coalesce(sum(coalesce(f.bytes, x.wacz_bytes)), 0)::bigint AS total,"
            " count(*) FILTER (WHERE f.bytes IS NULL AND x.wacz_bytes IS NULL) AS unknown"
            " FROM crawl_pages p JOIN archives a ON a.task_id = (CASE WHEN p.task_id ~* %s THEN p.task_id::uuid END)"
            " LEFT JOIN archive_files f ON f.archive_id = a.id LEFT JOIN archive_facts x ON x.archive_id = a.id"
            " WHERE p.crawl_id = %s", (UUID_TEXT, crawl_id))).fetchone()
    return {"totalBytes": int(row["total"]), "bytesUnknown": int(row["unknown"])}
