"""Why a running crawl's hosts are not being captured right now (``GET /api/crawls/{id}``
``waiting``; the web page and ``waggle crawl`` show it).

One item per host of the level in flight that has pages left and no capture running, oldest
reason first, at most :data:`LIMIT`:

* ``turn`` — another crawl's level holds the host (``host_leases``; this crawl waits for it in
  ``host_waits``): ``crawlId`` names it when the caller may see it (below). With nobody holding
  it, a waiting level is sent by the lease loop next, and pages carried past a level sent
  meanwhile go with this crawl's next level.
* ``robots`` — the level was sent and the host's robots.txt is read first (level 0, or no cached
  copy: ``crawl_robots``), before any page.
* ``delay`` — the host's gap runs: ``until`` = its last capture (``hosts.last_capture_at``, or a
  later ``done`` of this level) + the effective delay, the largest of this crawl's delay, the
  host's Crawl-delay (cached robots.txt, capped at 120 s as ``plan_level`` does) and another running
  crawl's delay for the host (``ledger.crawl.hosts.politeness``); ``source`` says which, and
  names the other crawl (``crawlId``: the one that captured the host last, or one with pages
  pending on it) when the caller may see it.

Another crawl is named (its id's first 8 characters in ``reason``, the whole id in ``crawlId``)
only when it belongs to one of the caller's organizations (``orgs``, as ``GET /api/crawls/{id}``
authorizes); any other is "another crawl", without its id or level.

Items: ``{host, kind, reason, crawlId?, until?, delayMs?, source?}`` (``until`` ISO-8601 UTC ms).
Read in the caller's connection: one query over the level's hosts and its progress events (each
read once, as ``levelProgress`` does), the politeness query for at most 20 hosts and one query
for the named crawls' organizations.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from typing import Any

from ledger.crawl import hosts as host_politeness
from ledger.crawl.times import iso_ms

LIMIT = 20
CRAWL_DELAY_CAP_MS = 120_000  # f/waggle/plan_level.py's cap
_CRAWL_DELAY = re.compile(r"(?im)^\s*crawl-delay\s*:\s*([0-9]+(?:\.[0-9]+)?)")

_HOSTS = """
WITH g AS (SELECT q.host, max(g.at) FILTER (WHERE g.phase = 'done') AS last_done,
                  bool_or(g.phase IN ('queued', 'started')) AS capturing
           FROM crawl_progress g JOIN crawl_pages q ON q.id = g.page_id
           WHERE g.crawl_id = %(crawl)s AND g.depth = %(depth)s GROUP BY q.host)
SELECT p.host, l.crawl_id AS holder, l.depth AS holder_depth, l.by_server, w.since AS waits_since, g.last_done,
       coalesce(g.capturing, false) AS capturing, r.body AS robots_body, r.host IS NOT NULL AS robots_cached
FROM (SELECT DISTINCT host FROM crawl_pages WHERE crawl_id = %(crawl)s AND state = 'pending'
      AND coalesce(level, depth) IN (%(depth)s, %(depth)s + 1)) p
LEFT JOIN g ON g.host = p.host
LEFT JOIN host_servers s ON s.host = p.host
LEFT JOIN LATERAL (SELECT h.crawl_id, h.depth, h.host <> p.host AS by_server FROM host_leases h
                   WHERE h.host = p.host OR h.host = ANY(s.keys)  -- its server's keys (decision 241)
                   ORDER BY h.host = p.host DESC, h.crawl_id = %(crawl)s DESC LIMIT 1) l ON true
LEFT JOIN host_waits w ON w.host = p.host AND w.crawl_id = %(crawl)s
LEFT JOIN crawl_robots r ON r.crawl_id = %(crawl)s AND r.host = p.host
WHERE NOT coalesce(g.capturing, false)
ORDER BY w.since NULLS LAST, p.host
LIMIT %(limit)s
"""


def crawl_delay_ms(body: str | None) -> int | None:
    """The Crawl-delay of a cached robots.txt body (the groups that apply to waggle), in ms,
    capped at :data:`CRAWL_DELAY_CAP_MS`; None when it names none."""
    found = _CRAWL_DELAY.search(body or "")
    return min(round(float(found.group(1)) * 1000), CRAWL_DELAY_CAP_MS) if found else None


def _short(crawl_id: Any) -> str:
    return str(crawl_id)[:8]


async def _visible(conn: Any, ids: set, orgs: list[str]) -> set:
    """The ids among ``ids`` of crawls that belong to one of ``orgs``."""
    ids = {i for i in ids if i is not None}
    if not ids or not orgs:
        return set()
    cur = await conn.execute("SELECT id FROM crawls WHERE id = ANY(%s) AND org_id = ANY(%s)", (list(ids), list(orgs)))
    return {r["id"] for r in await cur.fetchall()}


async def waiting(conn: Any, crawl: dict, now: datetime, orgs: list[str]) -> list[dict]:
    """The crawl's waiting hosts (see the module docstring); ``[]`` unless it runs. ``orgs``: the
    caller's organizations (another crawl is named only when it is in one of them)."""
    if crawl["state"] != "running":
        return []
    me, depth = crawl["id"], crawl["current_depth"]
    cur = await conn.execute(_HOSTS, {"crawl": me, "depth": depth, "limit": LIMIT})
    rows = await cur.fetchall()
    mine = [r for r in rows if r["holder"] == me]
    live = crawl["level_state"] == "dispatched"
    polite = await host_politeness.politeness(conn, crawl, [r["host"] for r in mine], who=True) if mine and live else {}
    named = {r["holder"] for r in rows if r["holder"] != me} | {
        (p["setBy"] or {}).get("crawlId") for p in polite.values()}
    seen = await _visible(conn, named, orgs)
    out: list[dict] = []
    for r in rows:
        if r["holder"] == me:
            continue
        what = "another name of this host's server" if r["by_server"] else "the host"
        if r["holder"] in seen:
            out.append({"host": r["host"], "kind": "turn", "crawlId": str(r["holder"]),
                        "reason": f"{r['host']}: waiting for crawl {_short(r['holder'])}'s turn"
                                  f" (its level {r['holder_depth']} holds {what})"})
        elif r["holder"] is not None:
            out.append({"host": r["host"], "kind": "turn",
                        "reason": f"{r['host']}: waiting for another crawl's turn (its level holds {what})"})
        elif crawl["level_state"] == "waiting":
            out.append({"host": r["host"], "kind": "turn",
                        "reason": f"{r['host']}: waiting for its turn (the host is free; the lease loop sends it next)"})
        elif r["waits_since"] is not None:  # carried: another crawl held it when this level was sent
            out.append({"host": r["host"], "kind": "turn",
                        "reason": f"{r['host']}: waiting for this crawl's next level (another crawl held the host"
                                  " when this level was sent)"})
    for r in mine if live else []:
        host = r["host"]
        if r["last_done"] is None and (depth == 0 or not r["robots_cached"]):
            out.append({"host": host, "kind": "robots",
                        "reason": f"{host}: reading robots.txt first (it waits its turn like a page)"})
            continue
        own, shared, by = crawl["per_host_delay_ms"], polite[host]["hostDelayMs"], polite[host]["setBy"]
        asked = crawl_delay_ms(r["robots_body"])
        delay = max(own, shared, asked or 0)
        other = None
        if asked is not None and asked == delay and asked > own:
            source = f"Crawl-delay {asked / 1000:g} s (robots.txt)"
        elif shared == delay and shared > own:
            source, other = _shared_source(shared, by, seen)
        else:
            source = f"this crawl's delay {own} ms"
        last = max((t for t in (r["last_done"], _when(polite[host]["lastFinishedAt"])) if t is not None), default=None)
        if last is None or last + timedelta(milliseconds=delay) <= now:
            continue
        until = last + timedelta(milliseconds=delay)
        out.append({"host": host, "kind": "delay", "until": iso_ms(until), "delayMs": delay, "source": source,
                    **({"crawlId": other} if other else {}),
                    "reason": f"{host}: waiting {source} until {iso_ms(until)}"})
    return out


def _shared_source(delay: int, by: dict | None, seen: set) -> tuple[str, str | None]:
    """(the words for another crawl's delay, its id when the caller may see it)."""
    why = "which captured the host last" if by and by["capturedLast"] else "which shares the host"
    if by and by["crawlId"] in seen:
        return f"the delay {delay} ms of crawl {_short(by['crawlId'])}, {why}", str(by["crawlId"])
    return f"the delay {delay} ms of another crawl, {why}", None


def _when(value: str | None) -> datetime | None:
    return datetime.fromisoformat(value.replace("Z", "+00:00")) if value else None
