# /// script
# requires-python = ">=3.11"
# dependencies = ["httpx==0.28.1", "protego==0.7.0"]
# ///
"""robots.txt read once per crawl per host (library script for plan_level; docs/internals.md
"robots.txt cache").

Cache entry (the wire shape of plan_level's ``robots`` output, the level report's ``robots``
field and the flow input ``robots``)::

    {"host": str, "fetchedAt": ISO-8601 UTC ms, "state": "allowed" | "unavailable" | "unreachable",
     "body": str | null,   # body: the groups that apply to us (robots.relevant_groups), only "allowed"
     "stale": true?}       # flow input only: older than the ledger's TTL, sent for its Crawl-delay

The body is not the file as served but its normal form (our own and ``*`` groups, member
lines only; :class:`f.waggle.robots.RobotsRules` reads it back to the same decisions), so a
site's 500 KiB of other agents' groups never travels. A body above ``BODY_MAX_CHARS``, a
file with too many rules, and bodies past ``TOTAL_MAX_CHARS`` in one level are not cached
(fetched again next level); the ledger refuses larger ones (413: 512 Ki per body, 8 Mi in all).

Fetching (:func:`fetch_all`): the robots.txt request is a request like any other, so it waits
the host's remaining gap since its last capture; hosts are fetched concurrently (at most
``FETCH_WORKERS``), each waiting only its own gap, earliest first.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from f.waggle.common import iso_now, parse_iso
from f.waggle.robots import ALLOWED, ROBOTS_MAX_BYTES, UNAVAILABLE, UNREACHABLE, RobotsOutcome, RobotsRules

MAX_AGE_S = 24 * 3600  # RFC 9309 §2.4: a cached copy SHOULD NOT be used for more than 24 hours
FUTURE_SLACK_S = 300  # a fetchedAt this far ahead of our clock is not trusted
BODY_MAX_CHARS = ROBOTS_MAX_BYTES  # the ledger's per-entry cap (ledger/crawl/robots_cache.py)
# bodies cached per level: well under the ledger's 8 Mi cap, and small enough for the plan step's
# result, which Windmill stores with the job (a few KiB per host is usual)
TOTAL_MAX_CHARS = 2 * 1024 * 1024
FETCH_WORKERS = 8
STATES = (ALLOWED, UNAVAILABLE, UNREACHABLE)


def from_cache(entries: object, now: float, log: Callable[[str], None] = print) -> dict[str, RobotsOutcome]:
    """``{host: outcome}`` of the usable cached entries the ledger sent (flow input ``robots``).

    Not used (the host's robots.txt is fetched): an ``unreachable`` entry (transient), one older
    than ``MAX_AGE_S`` or dated in the future, an ``allowed`` one without a text body, anything
    malformed. The ledger's TTL already chose young entries; this is the 24-hour backstop.
    """
    found: dict[str, RobotsOutcome] = {}
    for entry in entries if isinstance(entries, list) else []:
        if not isinstance(entry, dict) or not isinstance(entry.get("host"), str) or entry.get("stale"):
            continue
        fetched = parse_iso(entry.get("fetchedAt"))
        state, body = entry.get("state"), entry.get("body")
        if fetched is None or not -FUTURE_SLACK_S <= now - fetched <= MAX_AGE_S or state not in (ALLOWED, UNAVAILABLE):
            continue
        if state == ALLOWED:
            if not isinstance(body, str) or len(body) > BODY_MAX_CHARS:
                continue
            rules = RobotsRules(body)
            if rules.too_large:
                continue
            found[entry["host"]] = RobotsOutcome(ALLOWED, rules, detail=f"cached {entry['fetchedAt']}")
        else:
            found[entry["host"]] = RobotsOutcome(UNAVAILABLE, detail=f"cached {entry['fetchedAt']}")
    if found:
        log(f"robots.txt of {len(found)} host(s) from this crawl's cache (no request)")
    return found


def stale_crawl_delays(entries: object) -> dict[str, float]:
    """``{host: Crawl-delay s}`` of the ``stale`` allowed entries (copies the ledger holds past
    its TTL): the robots.txt fetch that replaces one waits that long since the host's last
    capture, as its captures did (the caller caps it). Malformed entries are left out."""
    delays: dict[str, float] = {}
    for entry in entries if isinstance(entries, list) else []:
        if (isinstance(entry, dict) and entry.get("stale") and entry.get("state") == ALLOWED
                and isinstance(entry.get("host"), str) and isinstance(entry.get("body"), str)
                and len(entry["body"]) <= BODY_MAX_CHARS):
            delay = RobotsRules(entry["body"]).crawl_delay_s()
            if delay:
                delays[entry["host"]] = delay
    return delays


def cache_entries(fetched: dict[str, tuple[RobotsOutcome, float]]) -> list[dict]:
    """The entries for the level report (plan output ``robots``), in ``fetched`` order: one per
    host whose robots.txt was fetched this level, within the size caps (module doc)."""
    out: list[dict] = []
    total = 0
    for host, (outcome, done) in fetched.items():
        body = None
        if outcome.state == ALLOWED:
            rules = outcome.rules
            if rules is None or rules.too_large or rules.text is None or len(rules.text) > BODY_MAX_CHARS:
                continue
            if total + len(rules.text) > TOTAL_MAX_CHARS:
                continue
            body = rules.text
            total += len(body)
        out.append({"host": host, "fetchedAt": iso_now(done), "state": outcome.state, "body": body})
    return out


def fetch_all(
    jobs: list[tuple[str, str, float]],
    fetch: Callable[[str], RobotsOutcome],
    *,
    now: Callable[[], float] = time.time,
    sleep: Callable[[float], None] = time.sleep,
    workers: int = FETCH_WORKERS,
) -> dict[str, tuple[RobotsOutcome, float]]:
    """Fetch each ``(host, robots_url, not_before)`` no earlier than ``not_before`` (epoch s);
    returns ``{host: (outcome, done epoch s)}`` in ``jobs`` order.

    At most ``workers`` fetches at once; jobs start earliest ``not_before`` first, so a host
    waiting a long gap holds one worker while the others go on. ``fetch`` never raises
    (:func:`f.waggle.robots.fetch_robots`); an exception here would be a bug and propagates.
    """
    if not jobs:
        return {}

    def one(job: tuple[str, str, float]) -> tuple[RobotsOutcome, float]:
        _host, url, not_before = job
        wait = not_before - now()
        if wait > 0:
            sleep(wait)
        outcome = fetch(url)
        return outcome, now()

    order = sorted(jobs, key=lambda j: j[2])
    with ThreadPoolExecutor(max_workers=max(1, min(workers, len(jobs))), thread_name_prefix="robots") as pool:
        futures = {job[0]: pool.submit(one, job) for job in order}
        return {host: futures[host].result() for host, _u, _n in jobs}
