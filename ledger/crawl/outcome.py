"""A finished crawl's honest outcome (docs/internals.md "Inputs and outcomes (round 20)").

A crawl whose frontier ran out ends ``succeeded`` — unless nothing at all was captured and every
page was skipped because its host's robots.txt could not be fetched (``robots-unreachable``:
a network error, a timeout, a 5xx or 429 answer). Then no seed host could be reached, and the
crawl ends ``failed`` with :func:`unreached_error` as its ``error``. A crawl that captured
anything, or whose pages failed for other reasons (HTTP errors, robots.txt refusals), keeps
``succeeded``.
"""

from __future__ import annotations

from typing import Any

ROBOTS_UNREACHABLE = "robots-unreachable"  # plan_level's skip reason, stored as crawl_pages.skip_reason
NO_HOST_REACHED = "no seed host could be reached"
HOSTS_NAMED = 5


def unreached_error(hosts: list[str]) -> str:
    """The failed crawl's ``error``: :data:`NO_HOST_REACHED`, the hosts (at most
    :data:`HOSTS_NAMED` named, then how many more) and what to do."""
    named = ", ".join(hosts[:HOSTS_NAMED]) + (f" and {len(hosts) - HOSTS_NAMED} more" if len(hosts) > HOSTS_NAMED else "")
    return (f"{NO_HOST_REACHED}: robots.txt of {named} could not be fetched (a network error, a timeout"
            " or a 5xx/429 answer), so nothing was captured; check the seeds' host names, or retry later")


async def unreached(conn: Any, crawl_id: Any) -> str | None:
    """:func:`unreached_error` when every page of crawl ``crawl_id`` (as recorded in this
    transaction) is skipped ``robots-unreachable``, else None. The caller asks only when the
    crawl ends with nothing captured: one aggregate over the crawl's pages."""
    cur = await conn.execute(
        "SELECT count(*) AS total,"
        " count(*) FILTER (WHERE state = 'skipped' AND skip_reason = %s) AS unreachable,"
        " array_agg(DISTINCT host ORDER BY host) AS hosts"
        " FROM crawl_pages WHERE crawl_id = %s",
        (ROBOTS_UNREACHABLE, crawl_id),
    )
    row = await cur.fetchone()
    if not row["total"] or row["unreachable"] != row["total"]:
        return None
    return unreached_error(list(row["hosts"]))
