"""Blocked hosts: a host paused for the rest of its crawl (issue 29 item 5; decision 231).

The flow's circuit breaker (``f/waggle/breaker.py``) reports a host's pages ``blocked`` once the
host answered with a challenge page (a signature our capture server matched) or with too many
blocked answers in a row. The level report then:

* :func:`record` remembers each such host once per crawl (``crawl_blocked_hosts``, migration
  280) with the reason of the page that tripped it (the earliest submitted blocked page);
* :func:`hold_back` turns the host's pages of the next level ``blocked`` (never dispatched, so
  the host sees no request again, not even for robots.txt) and returns the pages still to go.

:func:`blocked_hosts` lists them for the crawl view, the CLI and the web page.
"""

from __future__ import annotations

from typing import Any

from ledger.crawl.urls import InvalidUrl, parse_http_url

BLOCKED = "blocked"
HELD = "not captured: the host was paused for the rest of the crawl at depth "  # + depth, " after ", reason


def tripping_reasons(results: list[dict]) -> dict[str, str]:
    """``{host: reason}`` for every host with a ``blocked`` result: the skip reason of its earliest
    submitted blocked page (the one whose answer tripped the breaker), else of its first."""
    found: dict[str, tuple[str, str]] = {}  # host → (submittedAt or "~", reason)
    for r in results:
        if r.get("status") != BLOCKED:
            continue
        try:
            host = parse_http_url(r["url"]).host
        except (InvalidUrl, KeyError, TypeError):
            continue
        at = str(r.get("submittedAt") or "~")  # "~" sorts after any ISO time: an unsubmitted page
        reason = str(r.get("skipReason") or "blocked answers").strip() or "blocked answers"
        if host not in found or at < found[host][0]:
            found[host] = (at, reason)
    return {h: reason for h, (_, reason) in found.items()}


async def record(conn: Any, crawl_id: Any, depth: int, results: list[dict]) -> list[str]:
    """Remember the hosts ``results`` report blocked (first reason kept); returns them."""
    reasons = tripping_reasons(results)
    if reasons:
        hosts = sorted(reasons)
        await conn.execute(
            "INSERT INTO crawl_blocked_hosts (crawl_id, host, reason, depth)"
            " SELECT %s, h, r, %s FROM unnest(%s::text[], %s::text[]) AS v(h, r)"
            " ON CONFLICT (crawl_id, host) DO NOTHING",
            (crawl_id, depth, hosts, [reasons[h][:2000] for h in hosts]))
    return sorted(reasons)


async def any_blocked(conn: Any, crawl_id: Any) -> bool:
    """Whether crawl ``crawl_id`` has a blocked host (one probe of the primary key)."""
    cur = await conn.execute("SELECT EXISTS (SELECT 1 FROM crawl_blocked_hosts WHERE crawl_id = %s) AS b", (crawl_id,))
    return bool((await cur.fetchone())["b"])


async def hold_back(conn: Any, crawl_id: Any, level: int, pages: list[dict]) -> list[dict]:
    """Mark the pending pages of ``level`` whose host is blocked ``blocked`` (reason: where and why
    the host was paused) and return ``pages`` (``[{url, host, …}]``) without them."""
    cur = await conn.execute(
        "UPDATE crawl_pages p SET state = 'blocked',"
        " skip_reason = left(%s || b.depth || ' after ' || b.reason, 2000)"
        " FROM crawl_blocked_hosts b"
        " WHERE p.crawl_id = %s AND coalesce(p.level, p.depth) = %s AND p.state = 'pending'"
        " AND b.crawl_id = p.crawl_id AND b.host = p.host"
        " RETURNING p.host",
        (HELD, crawl_id, level))
    held = {r["host"] for r in await cur.fetchall()}
    if not held:
        return pages
    return [p for p in pages if p["host"] not in held]


async def blocked_hosts(conn: Any, crawl_id: Any) -> list[dict]:
    """``[{host, reason, depth, blockedAt, pages}]`` of crawl ``crawl_id``, in the order they were
    paused; ``pages`` = its pages recorded ``blocked``."""
    cur = await conn.execute(
        "SELECT b.host, b.reason, b.depth, b.blocked_at,"
        " (SELECT count(*) FROM crawl_pages p WHERE p.crawl_id = b.crawl_id AND p.host = b.host"
        "  AND p.state = 'blocked') AS pages"
        " FROM crawl_blocked_hosts b WHERE b.crawl_id = %s ORDER BY b.blocked_at, b.host", (crawl_id,))
    return [{"host": r["host"], "reason": r["reason"], "depth": r["depth"],
             "blockedAt": r["blocked_at"].isoformat(), "pages": r["pages"]} for r in await cur.fetchall()]
