"""Sitemap URLs of a crawl's seed hosts (issue 29 item 2; docs/decisions/221).

A crawl with ``useSitemap`` (migration 300) sends level 0 with the flow input ``sitemap``
(:func:`flow_input`); plan_level reads each seed host's sitemaps after its robots.txt, each
request keeping the host's gap (f/waggle/sitemaps.py), and the level report carries them as
``sitemaps: [{host, urls, files, found, older, notes, lastRequestAt}]``. :func:`queue` then, in
the report's transaction and after the pages' own links:

* scopes the URLs like links (the crawl's scope type, include/exclude, the private-host guard),
  but **in scope only** — extra hops never take a sitemap URL, it was linked from no page;
* plans and inserts them into the next level (``depth + 1``: after the seeds) through the same
  planner as links (known pages, traps, page budget, pages per host);
* keeps each host's ``lastRequestAt`` as the host's last request (``ledger.crawl.hosts``), so the
  next level's first capture waits the gap after a sitemap fetch even when no page of the host
  was captured after it;
* adds what the sitemaps gave to ``crawls.sitemap_counts``: files read, URLs found, ``older``
  (left out by ``sitemapLastmodAfter``), ``queued``, ``outOfScope`` (scope or an exclude),
  ``notQueued`` (the rest: known already, listed twice, over the budget, traps, unusable URLs),
  and the flow's notes (what could not be read, and why).
"""

from __future__ import annotations

import dataclasses
import json
from collections import Counter
from datetime import datetime, timedelta, timezone
from typing import Any

from ledger.crawl import hosts, redirects
from ledger.crawl.errors import Refused
from ledger.crawl.scope import LinkFilter, Scope
from ledger.crawl.times import iso_ms
from ledger.crawl.urls import ParsedUrl

MAX_URLS_PER_REPORT = 500_000  # sitemap URLs one level report may carry (the flow keeps ≤ maxPages per host)
MAX_NOTES = 20  # notes kept on the crawl
FUTURE_SLACK = timedelta(minutes=5)  # as the robots.txt cache: worker and ledger clocks may differ this much
OUT_OF_SCOPE = ("out_of_scope", "excluded")


def check_spec(use_sitemap: bool, lastmod_after: datetime | None, max_depth: int) -> None:
    """Raises :class:`Refused` 400 for options that cannot work together: a lastmod date without
    ``useSitemap``, or ``useSitemap`` with ``maxDepth`` 0 (the sitemaps' URLs enter level 1)."""
    if lastmod_after is not None and not use_sitemap:
        why = "sitemapLastmodAfter filters sitemap URLs: it needs useSitemap true"
        raise Refused(400, why, fields={"sitemapLastmodAfter": why})
    if use_sitemap and max_depth < 1:
        why = "useSitemap queues the sitemaps' URLs at level 1, after the seeds: maxDepth must be at least 1"
        raise Refused(400, why, fields={"useSitemap": why})


def as_moment(value: Any) -> datetime | None:
    """The API's ``sitemapLastmodAfter`` (a date → midnight UTC, or an aware datetime) as an
    aware UTC datetime; None stays None."""
    if value is None:
        return None
    if isinstance(value, datetime):
        return value.astimezone(timezone.utc)
    return datetime(value.year, value.month, value.day, tzinfo=timezone.utc)


def view(crawl: dict) -> dict:
    """The crawl view's sitemap fields: ``useSitemap``, ``sitemapLastmodAfter`` (ISO or None) and
    ``sitemap`` (the counts of :func:`queue`, None until a level reported sitemaps)."""
    return {"useSitemap": bool(crawl.get("use_sitemap")),
            "sitemapLastmodAfter": iso_ms(crawl.get("sitemap_lastmod_after")),
            "sitemap": crawl.get("sitemap_counts")}


def flow_input(crawl: dict, depth: int) -> dict | None:
    """The webhook's ``sitemap`` for level ``depth`` of ``crawl``: ``{lastmodAfter, maxUrls}`` at
    level 0 of a crawl with ``use_sitemap`` (``maxUrls`` = the page budget: no more could be
    queued), else None (not sent)."""
    if depth != 0 or not crawl.get("use_sitemap"):
        return None
    return {"lastmodAfter": iso_ms(crawl.get("sitemap_lastmod_after")), "maxUrls": int(crawl["max_pages"])}


def check_entries(entries: list[dict]) -> None:
    """The report's ``sitemaps`` as a whole: each host once, ``lastRequestAt`` not in the future
    (a gap start dated ahead would hold the host for nothing), at most
    :data:`MAX_URLS_PER_REPORT` URLs. Raises ``ValueError`` naming the entry (400)."""
    seen: set[str] = set()
    latest = datetime.now(timezone.utc) + FUTURE_SLACK
    total = 0
    for index, entry in enumerate(entries):
        if entry["host"] in seen:
            raise ValueError(f"sitemaps.{index}.host {entry['host']!r} is listed twice")
        seen.add(entry["host"])
        at = entry.get("lastRequestAt")
        if at is not None and at > latest:
            raise ValueError(f"sitemaps.{index}.lastRequestAt lies in the future; it is when the host's last"
                             " sitemap request ended")
        total += len(entry.get("urls") or [])
    if total > MAX_URLS_PER_REPORT:
        raise ValueError(f"sitemaps carry {total} URLs, more than {MAX_URLS_PER_REPORT} in one report")


async def queue(conn: Any, crawl: dict, depth: int, seeds: list[ParsedUrl], crawl_scope: Scope,
                entries: list[dict], cap: int | None, settings: Any, *, guarded: Any,
                plan_and_insert: Any) -> tuple[Any, list[dict], int]:
    """Queue the reported sitemap URLs in scope at ``depth + 1`` (module doc) in the caller's
    transaction; returns ``(plan, inserted [{url, host}], URLs in scope)``. ``guarded`` and
    ``plan_and_insert`` are the level report's own link guard and planner (ledger.crawl.levels,
    passed in: levels imports this module)."""

    screen = LinkFilter(seeds, dataclasses.replace(crawl_scope, extra_hops=0))  # in scope only
    links = [{"href": url} for entry in entries for url in entry.get("urls") or []]
    drops: Counter = Counter()
    candidates = guarded(screen, links, {}, drops, settings)
    candidates = await redirects.drop_known_finals(conn, crawl["id"], candidates)
    plan, landed = await plan_and_insert(conn, crawl, depth + 1, candidates, cap, settings)
    await hosts.record_captures(conn, crawl, [{"url": f"http://{e['host']}/", "gapFrom": e["lastRequestAt"]}
                                              for e in entries if e.get("lastRequestAt")])
    found = sum(int(e.get("found") or 0) for e in entries)
    older = sum(int(e.get("older") or 0) for e in entries)
    outside = sum(screen.drops.get(k, 0) for k in OUT_OF_SCOPE)
    before = crawl.get("sitemap_counts") or {}
    counts = {
        "files": sum(int(e.get("files") or 0) for e in entries),
        "found": found,
        "older": older,
        "queued": len(landed),
        "outOfScope": outside,
        "notQueued": max(0, found - older - outside - len(landed)),
    }
    merged: dict[str, Any] = {k: int(before.get(k) or 0) + v for k, v in counts.items()}
    notes = list(before.get("notes") or []) + [n for e in entries for n in e.get("notes") or []]
    merged["notes"] = notes[:MAX_NOTES]
    await conn.execute("UPDATE crawls SET sitemap_counts = %s::jsonb WHERE id = %s", (json.dumps(merged), crawl["id"]))
    return plan, landed, screen.accepted
