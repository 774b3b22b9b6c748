"""What changed between two crawls (issue 27 item 3, docs/decisions/211-what-changed-between-two-crawls.md).

Pages are matched by their URL key (``crawl_pages.url_key``: the dedup key both crawls were
built with). A page is *captured* in a crawl when its state is ``captured``; then:

* ``new`` — captured now, not captured in the earlier crawl (not reached there, or failed or
  skipped: its ``before`` side says which);
* ``gone`` — captured in the earlier crawl, not now (not reached, failed, skipped; ``now`` says);
* ``changed`` / ``unchanged`` — captured in both, the main documents' payload digests
  (``ledger.archive.main_document``) differ / are equal; a revisit record carries its
  original's digest, so an unchanged page stored as a revisit compares equal;
* ``notCompared`` — captured in both but a digest is unknown (archive not admitted yet, not
  viewable by the caller, its index names no record of the page), or captured before and still
  pending in a running crawl, or captured in one crawl and listed but never tried in the other
  because that crawl ended first (stopped or failed: ``not-reached`` / ``not-reached-before``;
  such a page is neither gone nor new). ``why`` says which.

Pages captured in neither crawl are in no list. Each side (``now`` / ``before``) carries a
``replay`` link (the web page's ``#/replay`` inside that crawl's collection, as search hits
open) or, when it cannot be replayed for this caller, ``missing: {why, reason}`` — among them
``original-not-viewable``: the page's document is a revisit whose original is in an archive the
caller may not view (or that is gone); it is never replayed from another organization's archive.
"""

from __future__ import annotations

import uuid
from datetime import timezone
from typing import Any

from ledger.archive.main_document import MainDocument, main_documents
from ledger.crawl.collection import UUID_TEXT
from ledger.crawl.salvage import CLOSED_REASONS
from ledger.search.links import replay_link

LISTED = 1000  # entries per list; the counts are always complete
KINDS = ("new", "changed", "unchanged", "gone", "notCompared")

_PAGES = """
SELECT p.url, p.url_key, p.final_url, p.depth, p.state, p.skip_reason, p.failure_class,
       a.id AS archive_id, a.bucket, a.object_key, a.captured_at
FROM crawl_pages p
LEFT JOIN LATERAL (SELECT * FROM archives a WHERE a.task_id = (CASE WHEN p.task_id ~* %s
                   THEN p.task_id::uuid END) ORDER BY a.created_at LIMIT 1) a ON true
WHERE p.crawl_id = %s
ORDER BY p.depth, p.id
"""

_CRAWL = "SELECT * FROM crawls WHERE id = %s"

# The options that bound which pages a crawl reaches (column → the API's name): two crawls run
# with different ones list as "gone" pages the later one never reached (round 26's trial read
# 15 pages as gone that a --max-pages 5 run had simply not reached).
LIMITS = {"scope": "scope", "max_depth": "maxDepth", "max_pages": "maxPages", "scope_include": "include",
          "scope_exclude": "exclude", "extra_hops": "extraHops", "max_pages_per_host": "maxPagesPerHost",
          "time_limit_s": "timeLimitS", "max_bytes": "maxBytes", "use_sitemap": "useSitemap"}
STOPPED_SHORT = ("max_pages", "time_limit", "size_limit", "stopped", "failed")


def limits_note(crawl: dict, since: dict) -> tuple[list[dict], str | None]:
    """(``[{option, now, before}]`` of the limits the two crawls differ in, a sentence when "gone"
    may hold pages this crawl never reached — different limits or a crawl stopped short — else None)."""
    differ = [{"option": name, "now": crawl.get(col), "before": since.get(col)}
              for col, name in LIMITS.items() if col in crawl and crawl.get(col) != since.get(col)]
    reasons = []
    if differ:
        reasons.append("the crawls ran with different limits (" + ", ".join(
            f"{d['option']} {d['now']!r} now, {d['before']!r} before" for d in differ) + ")")
    if crawl.get("stop_reason") in STOPPED_SHORT:
        reasons.append(f"this crawl stopped short ({crawl['stop_reason']})")
    if not reasons:
        return differ, None
    return differ, ("; ".join(reasons) + ": a page listed as gone may only be one this crawl did not reach"
                    " — it is not necessarily gone from the site")


def _never_tried(row: dict | None, crawl: dict) -> str | None:
    """Why a listed page was never tried because its crawl ended first (stopped or failed), else
    None. A stopped crawl's skipped pages read as "gone" in a trial, then as "new" next run."""
    if row is None:
        return None
    if row["state"] == "skipped" and row["skip_reason"] in CLOSED_REASONS:
        return row["skip_reason"]
    if row["state"] == "pending" and crawl["state"] not in ("running", "paused"):
        return "the crawl ended before this page was captured"
    return None


def _iso(value: Any) -> str | None:
    return None if value is None else value.astimezone(timezone.utc).isoformat(timespec="seconds").replace("+00:00", "Z")


async def _has_workflows(conn: Any) -> bool:
    """True once ``crawls.workflow_id`` exists (issue 27 item 2 adds it; until then seeds decide)."""
    row = await (await conn.execute(
        "SELECT EXISTS (SELECT 1 FROM information_schema.columns WHERE table_schema = current_schema()"
        " AND table_name = 'crawls' AND column_name = 'workflow_id') AS yes")).fetchone()
    return bool(row["yes"])


async def default_since(pool: Any, crawl_id: uuid.UUID) -> tuple[str, str] | None:
    """``(crawl id, how)`` of the crawl to compare ``crawl_id`` with when none is given: the
    latest earlier finished crawl of the same workflow (``how`` = ``"workflow"``) when the crawl
    has one, else the latest earlier finished crawl of its organization with the same set of
    seeds (``"same-seeds"``), one run with the same limits (:data:`LIMITS`) before any other;
    None when there is none."""
    async with pool.connection() as conn:
        crawl = await (await conn.execute(_CRAWL, (crawl_id,))).fetchone()
        if crawl is None:
            return None
        if await _has_workflows(conn):
            row = await (await conn.execute(
                "SELECT b.id FROM crawls c JOIN crawls b ON b.workflow_id = c.workflow_id"
                " WHERE c.id = %s AND b.id <> c.id AND b.started_at < c.started_at AND b.finished_at IS NOT NULL"
                " ORDER BY b.started_at DESC LIMIT 1", (crawl_id,))).fetchone()
            if row is not None:
                return str(row["id"]), "workflow"
        # among them, one run with the same limits first: a deleted workflow's crawls were compared
        # with another deleted workflow's one-page crawl of the same seed (a trial)
        same_limits = " AND ".join(f"b.{col} IS NOT DISTINCT FROM c.{col}" for col in LIMITS if col in crawl)
        row = await (await conn.execute(
            "SELECT b.id FROM crawls b JOIN crawls c ON c.id = %s WHERE b.org_id = c.org_id AND b.id <> c.id"
            " AND b.started_at < c.started_at AND b.finished_at IS NOT NULL"
            " AND (SELECT array_agg(DISTINCT s ORDER BY s) FROM unnest(b.seeds) AS s) = %s::text[]"
            f" ORDER BY ({same_limits or 'true'}) DESC, b.started_at DESC LIMIT 1",
            (crawl_id, sorted(set(crawl["seeds"]))))).fetchone()
    return (str(row["id"]), "same-seeds") if row is not None else None


def _summary(crawl: dict) -> dict:
    return {"crawlId": str(crawl["id"]), "state": crawl["state"], "startedAt": _iso(crawl["started_at"]),
            "finishedAt": _iso(crawl["finished_at"]), "seeds": list(crawl["seeds"])}


async def _originals(pool: Any, org_by_archive: dict[str, str], mains: dict[str, MainDocument]) -> dict[str, str | None]:
    """For each archive whose main document is a revisit: the archive holding its original in
    that archive's organization's own digest index (None: no original is held any more)."""
    asked = {aid: (org_by_archive[aid], m.digest) for aid, m in mains.items() if m.revisit and m.digest}
    if not asked:
        return {}
    async with pool.connection() as conn:
        rows = await (await conn.execute(
            "SELECT org_id, digest, archive_id FROM payload_digests"
            " WHERE (org_id, digest) IN (SELECT * FROM unnest(%s::text[], %s::text[]))",
            ([o for o, _ in asked.values()], [d for _, d in asked.values()]))).fetchall()
    held = {(r["org_id"], r["digest"]): str(r["archive_id"]) for r in rows}
    return {aid: held.get(key) for aid, key in asked.items()}


class _Sides:
    """Builds one crawl's side of each page for one caller."""

    def __init__(self, crawl: dict, viewable: set[str], mains: dict[str, MainDocument],
                 originals: dict[str, str | None], originals_viewable: set[str]):
        self.crawl, self.viewable, self.mains = crawl, viewable, mains
        self.originals, self.originals_viewable = originals, originals_viewable

    def side(self, row: dict | None) -> dict | None:
        if row is None:
            return None
        out: dict[str, Any] = {"url": row["url"], "finalUrl": row["final_url"], "depth": row["depth"],
                               "state": row["state"], "archiveId": None, "capturedAt": None, "httpStatus": None,
                               "digest": None, "revisit": None, "replay": None, "missing": None}
        if row["state"] != "captured":
            out["reason"] = row["skip_reason"] or row["failure_class"]
            return out
        aid = str(row["archive_id"]) if row["archive_id"] is not None else None
        if aid is None:
            out["missing"] = {"why": "not-admitted-yet", "reason": "captured; its archive is not admitted yet"}
            return out
        out["archiveId"], out["capturedAt"] = aid, _iso(row["captured_at"])
        if aid not in self.viewable:
            out["missing"] = {"why": "not-viewable", "reason": "its archive is not shared with you"}
            return out
        main = self.mains.get(aid)
        if main is not None:
            out.update(digest=main.digest, httpStatus=main.http_status, revisit=main.revisit)
        if main is not None and main.revisit:
            original = self.originals.get(aid)
            if original is None or original not in self.originals_viewable:
                out["missing"] = {"why": "original-not-viewable",
                                  "reason": "its document is a revisit record whose original is in an archive"
                                            + (" that is no longer held" if original is None else
                                               " not shared with you")}
                return out
        out["replay"] = replay_link(aid, str(self.crawl["id"]), row["url"], out["capturedAt"])
        return out


def _why_not_compared(now: dict, before: dict) -> dict:
    for side, which in ((now, "this crawl"), (before, "the earlier crawl")):
        if side["missing"] and side["missing"]["why"] in ("not-admitted-yet", "not-viewable"):
            return {"why": side["missing"]["why"], "reason": f"in {which}: {side['missing']['reason']}"}
        if side["digest"] is None:
            return {"why": "digest-unknown", "reason": f"in {which}: its archive's index names no record of the page"}
    return {"why": "digest-unknown", "reason": "unknown"}  # not reached: both digests known compare


async def changes(services: Any, identity: Any, crawl_id: uuid.UUID, since_id: uuid.UUID, how: str) -> dict | None:
    """The pages of crawl ``crawl_id`` compared with crawl ``since_id`` as ``identity`` may see
    them (both crawls already checked to be the caller's organizations'), or None when either
    crawl does not exist. Shape: ``{crawl, since, sinceChosen, limitsDiffer: [{option, now, before}],
    goneNote: str | null (:func:`limits_note`; null too when every gone page was reached and
    failed, skipped or blocked here), counts: {new, changed, unchanged,
    gone, notCompared}, new: [...], ..., notCompared: [...], listed}`` — each entry ``{url, now,
    before}`` (a side: ``{url, finalUrl, depth, state, archiveId, capturedAt, httpStatus, digest,
    revisit, replay, missing}`` or null); ``notCompared`` entries add ``why`` and ``reason``.
    Each list holds at most :data:`LISTED` entries; ``counts`` are complete."""
    pool = services.pool
    async with pool.connection() as conn:
        crawl = await (await conn.execute(_CRAWL, (crawl_id,))).fetchone()
        since = await (await conn.execute(_CRAWL, (since_id,))).fetchone()
        if crawl is None or since is None:
            return None
        now_rows = await (await conn.execute(_PAGES, (UUID_TEXT, crawl_id))).fetchall()
        before_rows = await (await conn.execute(_PAGES, (UUID_TEXT, since_id))).fetchall()
    org_by_archive = {str(r["archive_id"]): c["org_id"] for rows, c in ((now_rows, crawl), (before_rows, since))
                      for r in rows if r["archive_id"] is not None and r["state"] == "captured"}
    viewable = await services.authz.viewable(identity, list(org_by_archive)) if org_by_archive else set()
    readable = [r for r in now_rows + before_rows if r["archive_id"] is not None and str(r["archive_id"]) in viewable]
    mains = await main_documents(pool, services.s3, readable)
    originals = await _originals(pool, org_by_archive, mains)
    wanted = [a for a in set(originals.values()) if a]
    originals_viewable = await services.authz.viewable(identity, wanted) if wanted else set()
    now_side = _Sides(crawl, viewable, mains, originals, originals_viewable)
    before_side = _Sides(since, viewable, mains, originals, originals_viewable)

    now_by_key = {r["url_key"]: r for r in now_rows}
    before_by_key = {r["url_key"]: r for r in before_rows}
    lists: dict[str, list[dict]] = {k: [] for k in KINDS}
    running = crawl["state"] in ("running", "paused")
    unreached = 0
    for key in list(now_by_key) + [k for k in before_by_key if k not in now_by_key]:
        n_row, b_row = now_by_key.get(key), before_by_key.get(key)
        n_cap = n_row is not None and n_row["state"] == "captured"
        b_cap = b_row is not None and b_row["state"] == "captured"
        if not n_cap and not b_cap:
            continue
        now, before = now_side.side(n_row), before_side.side(b_row)
        entry: dict[str, Any] = {"url": (n_row or b_row)["url"], "now": now, "before": before}
        if n_cap and not b_cap:
            if why := _never_tried(b_row, since):
                kind = "notCompared"
                entry.update(why="not-reached-before", reason=f"in the earlier crawl: {why}")
            else:
                kind = "new"
        elif not n_cap:
            if running and n_row is not None and n_row["state"] == "pending":
                kind = "notCompared"
                entry.update(why="not-captured-yet", reason="this crawl has not captured it yet")
            elif why := _never_tried(n_row, crawl):
                kind = "notCompared"
                entry.update(why="not-reached", reason=f"in this crawl: {why}")
            else:
                kind = "gone"
                unreached += n_row is None  # a page this crawl reached and failed is gone for sure
        elif now["digest"] and before["digest"]:  # known only for archives the caller may view
            kind = "changed" if now["digest"] != before["digest"] else "unchanged"
        else:
            kind = "notCompared"
            entry.update(_why_not_compared(now, before))
        lists[kind].append(entry)
    differ, note = limits_note(crawl, since)
    if not unreached:  # every gone page was reached and answered otherwise: no doubt to state
        note = None
    return {
        "crawl": _summary(crawl),
        "since": _summary(since),
        "sinceChosen": how,
        "limitsDiffer": differ,
        "goneNote": note,
        "counts": {k: len(v) for k, v in lists.items()},
        **{k: v[:LISTED] for k, v in lists.items()},
        "listed": LISTED,
    }
