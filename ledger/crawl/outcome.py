"""A finished crawl's honest outcome (docs/internals.md "Inputs and outcomes (round 20)").

A crawl whose frontier ran out ends ``succeeded`` when it captured at least one page. A crawl
that captured no page at all ends ``failed`` (round 21, "Nothing captured is a failure"), with
:func:`nothing_captured` as its ``error``: when every page was skipped because its host's
robots.txt could not be fetched (``robots-unreachable``: a network error, a timeout, a 5xx or 429
answer) :func:`unreached_error` (round 20); otherwise ``nothing was captured:`` and what happened
to its seeds (``http://a.test/ answered HTTP 404``, ``…: redirect loop``, ``…: timeout``).
"""

from __future__ import annotations

import re
from typing import Any

ROBOTS_UNREACHABLE = "robots-unreachable"  # plan_level's skip reason, stored as crawl_pages.skip_reason
NO_HOST_REACHED = "no seed host could be reached"
HOSTS_NAMED = 5
NOTHING_CAPTURED = "nothing was captured"
SEEDS_NAMED = 5
REASON_CHARS = 160  # of a seed's own skip reason, when none of the known cases fits
_HTTP_STATUS = re.compile(r"\bHTTP:? ?([1-5][0-9]{2})\b", re.IGNORECASE)
_REDIRECT_LOOP = re.compile(r"TOO_MANY_REDIRECTS|redirect loop|too many redirects", re.IGNORECASE)
_TIMEOUT = re.compile(r"time ?out|TIMED_OUT|timed out", re.IGNORECASE)


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


def what_happened(url: str, state: str, reason: str | None) -> str:
    """One seed's fate for :func:`nothing_captured`, read from its ``skip_reason`` (crawl_host's
    one-line ``failure_reason``, or the ledger's own skip reason): ``{url}: redirect loop``,
    ``{url} answered HTTP n``, ``{url}: timeout``, ``{url}: robots.txt could not be fetched``,
    else ``{url}: {state}: {reason}`` (the reason cut to :data:`REASON_CHARS`)."""
    text = reason or ""
    if state == "blocked":  # decision 231: the reason says whose challenge page or which answers
        return f"{url}: blocked: {text[:REASON_CHARS]}"
    if text == ROBOTS_UNREACHABLE:
        return f"{url}: robots.txt could not be fetched"
    if _REDIRECT_LOOP.search(text):  # before the status: a loop's last answer is a 3xx
        return f"{url}: redirect loop"
    if status := _HTTP_STATUS.search(text):
        return f"{url} answered HTTP {status[1]}"
    if _TIMEOUT.search(text):
        return f"{url}: timeout"
    if not text:
        return f"{url}: {state}" if state != "pending" else f"{url}: never reported"
    cut = text if len(text) <= REASON_CHARS else text[:REASON_CHARS - 1] + "…"
    return f"{url}: {state}: {cut}"


async def nothing_captured(conn: Any, crawl_id: Any) -> str:
    """The ``error`` of crawl ``crawl_id`` ending with no page captured (the caller knows it):
    :func:`unreached` when every page is ``robots-unreachable``, else :data:`NOTHING_CAPTURED`
    and the fate of its first :data:`SEEDS_NAMED` seeds (depth 0, in the order given; then how
    many more). Two queries over the crawl's pages."""
    error = await unreached(conn, crawl_id)
    if error:
        return error
    cur = await conn.execute(
        "SELECT url, state, skip_reason, count(*) OVER () AS seeds FROM crawl_pages"
        " WHERE crawl_id = %s AND depth = 0 ORDER BY id LIMIT %s",
        (crawl_id, SEEDS_NAMED),
    )
    rows = await cur.fetchall()
    if not rows:
        return f"{NOTHING_CAPTURED}: the crawl has no seed pages"
    named = "; ".join(what_happened(r["url"], r["state"], r["skip_reason"]) for r in rows)
    more = rows[0]["seeds"] - len(rows)
    return f"{NOTHING_CAPTURED}: {named}" + (f"; and {more} more seed(s)" if more > 0 else "")
