# /// script
# requires-python = ">=3.11"
# dependencies = ["httpx==0.28.1", "lxml==6.1.3", "protego==0.7.0", "wmill==1.850.0"]
# ///
"""plan_level: group one level's frontier by host, apply robots.txt, compute parallelism.

reference/scheduler.md §4.1, with RFC 9309 fetch statuses (ARCHITECTURE decision 2) and a
capped Crawl-delay (cases/README C2); a host's delay is never below the ``hostDelayMs`` the
ledger sends (other crawls on the same host, issue 12), nor below what the ledger says just before
the level's first request (a crawl started meanwhile: ``GET /api/crawls/{id}/politeness``). Output
``Plan``::

    {"groups": [{"host", "urls", "delayMs", "initialDelayMs",   # initialDelayMs also covers
                 "notBefore", "robotsTxt"?,                    # the gap after robots.txt;
                 "ownDelayMs", "gapFrom"?,                     # own delay + Crawl-delay; the host's
                                                               # last request (epoch s; decision 301);
                 "server"?, "members"?}],                      # hosts of one server (servers.py);
                                                               # notBefore = plan time + it (epoch s);
                                                               # robotsTxt: the host's rules, normal form
     "skipped": [{"url", "reason": "robots" | "robots-unreachable" | "robots-too-large",
                  "failureClass": "permanent" | "transient"}],
     "slowed": [{"host", "crawlDelayMs", "delayMs", "capped"}],
     "robots": [{"host", "fetchedAt", "state", "body"}],   # fetched this level, for the ledger's
                                                          # cache (f/waggle/robots_cache.py)
     "sitemaps": [{"host", "urls", "files", "found", "older", "notes", "lastRequestAt"}],  # only with
                                                          # input sitemap (f/waggle/sitemaps.py)
     "parallelism": int}

Groups come longest estimated chain first (:func:`chain_ms`, longest-processing-time order): the
for-each starts them in this order, so a host sleeping a long gap gets a slot at once instead of
queueing behind short hosts. Its wait runs to ``notBefore`` (an absolute time), not
``initialDelayMs`` from whenever its slot opened.

robots.txt is read once per crawl per host: the ledger sends the outcomes this crawl fetched
less than its TTL ago (input ``robots``) and only the other hosts' files are fetched —
concurrently, each no earlier than the host's remaining gap since its last capture (with the
Crawl-delay of the crawl's expired copy, sent ``stale``) (docs/internals.md "robots.txt cache").
"""

from __future__ import annotations

import inspect

import json
import time
from collections.abc import Callable
from typing import Optional
from urllib.parse import urlsplit

import httpx

from f.waggle.failures import PERMANENT, TRANSIENT
from f.waggle.common import (
    VAR_ALLOW_PRIVATE,
    VAR_API_URL,
    VAR_ENDPOINTS,
    VAR_TOKEN,
    http_client,
    iso_now,
    parse_iso,
    read_optional_variable,
    read_variable,
)
from f.waggle import servers
from f.waggle.robots import ALLOWED, MAX_RULES, UNREACHABLE, RobotsOutcome, fetch_robots
from f.waggle.robots_cache import cache_entries, fetch_all, from_cache, stale_crawl_delays
from f.waggle import sitemaps as sitemap_reader

DEFAULT_HOST_PARALLELISM = 4
# Hosts in flight per BrowserHive endpoint when sleeping hosts would idle browsers (see
# parallelism_for): 2 lets a second host use a browser while the first sleeps its gap; while
# this crawl has the browsers to itself, at most one host per browser waits on 429 Busy.
HOSTS_PER_BROWSER = 2
# What one capture is assumed to take when planning the width (a v12 capture with the default
# settle wait and WACZ: 3–6 s measured on the local stack, tests/bench politeness).
CAPTURE_ESTIMATE_MS = 5000
# The longest Crawl-delay we honour: a site asking for more gets this, logged and reported
# in ``slowed`` with ``capped: true`` (cases/README C2) — never a silent 10-minute stall.
CRAWL_DELAY_CAP_MS = 120_000

Fetcher = Callable[[str], RobotsOutcome]


def endpoint_count(raw: str) -> int:
    """Number of BrowserHive endpoints in the variable's JSON text.

    Raises ValueError naming ``u/admin/browserhive_endpoints`` for non-JSON text or anything
    but a non-empty array (an empty list must never become "parallelism 0").
    """
    try:
        value = json.loads(raw)
    except ValueError as exc:
        raise ValueError(f"{VAR_ENDPOINTS} is not JSON: {raw[:80]}") from exc
    if not isinstance(value, list) or not value:
        raise ValueError(f"{VAR_ENDPOINTS} must be a non-empty array of strings: {raw[:80]}")
    return len(value)


def parallelism_for(host_parallelism: int | None, endpoints: int, groups: list[dict] | None = None) -> int:
    """For-each width: ``endpoints`` or ``endpoints × HOSTS_PER_BROWSER``, never above
    ``host_parallelism`` (None → 4; 0 → 1).

    Issue 8 item 2 (our decision; upstream always caps at ``endpoints``). A host sleeps its gaps
    inside its for-each slot, so with the cap a *sleeper* (sleeps longer than it captures, by
    :func:`chain_ms` estimates) holds a browser idle. Hosts above the endpoint count share the
    browsers through ``429 Busy`` (crawl_host goes round with jitter; hosts stay sequential,
    so two captures of one host never overlap) — but then the slowest host may wait up to a
    capture for a browser each time its gap ends (bench: ideal/makespan 0.86–0.91 against
    0.98–0.99 capped, when one 20 s Crawl-delay host led the level). So the width goes above
    the cap only when the cap is the worse schedule: when sleepers could hold every slot
    (sleepers ≥ endpoints), or when the other hosts' chains would not fit into the remaining
    slots within the longest sleeper's chain. ``groups`` None (or no sleeper) → the cap.
    """
    wanted = DEFAULT_HOST_PARALLELISM if host_parallelism is None else int(host_parallelism)
    width = endpoints
    sleepers = [g for g in groups or [] if is_sleeper(g)]
    if sleepers:
        others = [g for g in groups or [] if not is_sleeper(g)]
        free = endpoints - len(sleepers)
        longest = max(chain_ms(g) for g in sleepers)
        if free <= 0 or sum(chain_ms(g) for g in others) / free > longest:
            width = endpoints * HOSTS_PER_BROWSER
    return max(1, min(wanted, width))


def chain_ms(group: dict) -> float:
    """Estimated ms from a host's for-each start to its last capture's end:
    ``initialDelayMs + n × CAPTURE_ESTIMATE_MS + (n − 1) × delayMs``."""
    n = len(group.get("urls") or [])
    return (group.get("initialDelayMs") or 0) + n * CAPTURE_ESTIMATE_MS + max(0, n - 1) * (group.get("delayMs") or 0)


def is_sleeper(group: dict) -> bool:
    """True when the host would sleep in its slot longer than it captures (by the estimate)."""
    n = len(group.get("urls") or [])
    sleep = (group.get("initialDelayMs") or 0) + max(0, n - 1) * (group.get("delayMs") or 0)
    return sleep > n * CAPTURE_ESTIMATE_MS


def delay_for(per_host_delay_ms: int, crawl_delay_s: float | None) -> tuple[int, int | None, bool]:
    """(delay ms, Crawl-delay ms asked for or None, capped?): the longer one wins, capped.

    ``delay = max(per_host_delay_ms, min(round(Crawl-delay × 1000), CRAWL_DELAY_CAP_MS))``:
    the site's request is never shortened below the cap, our own setting never shortened.
    """
    if crawl_delay_s is None:
        return per_host_delay_ms, None, False
    asked = int(round(crawl_delay_s * 1000))
    capped = asked > CRAWL_DELAY_CAP_MS
    return max(per_host_delay_ms, min(asked, CRAWL_DELAY_CAP_MS)), asked, capped


def shared_delay_ms(items: list[dict]) -> int:
    """The largest ``hostDelayMs`` the ledger sent for a host (0 when none): the delay of the
    host's last capture and of every other running crawl on it (issue 12). The host's delay is
    never below it, so two crawls on one host keep the larger of their delays."""
    found = [int(i["hostDelayMs"]) for i in items if isinstance(i.get("hostDelayMs"), (int, float))]
    return max(found, default=0)


def initial_delay_for(delay_ms: int, last_finished: object, now: float) -> int:
    """Remaining cross-level gap in ms: ``max(0, delay − (now − lastFinishedAt))``; 0 if unknown."""
    finished = parse_iso(last_finished)
    if finished is None:
        return 0
    since_ms = (now - finished) * 1000.0
    return max(0, int(round(delay_ms - since_ms)))


def robots_gap_ms(delay_ms: int, robots_done: float | None, now: float) -> int:
    """Gap in ms still owed after this level's robots.txt fetch, which the site feels as a request
    like any other (Heritrix queues it under the host's politeness too): ``max(0, delay −
    (now − robots_done))``; 0 when robots.txt was not fetched (``robots_done`` None, epoch s)."""
    if robots_done is None:
        return 0
    return max(0, int(round(delay_ms - (now - robots_done) * 1000.0)))


def robots_not_before(delay_setting: int, items: list[dict], stale_crawl_delay_s: float | None = None) -> float:
    """Epoch s before which the host's robots.txt must not be fetched: its last capture (any
    crawl, ``lastFinishedAt``) plus ``max(delay_setting, hostDelayMs, the Crawl-delay of the
    crawl's expired copy (capped) if any)``; 0 when never captured. (The new file's Crawl-delay
    is not read yet; the first capture waits it after the fetch.)"""
    last = next((parse_iso(i.get("lastFinishedAt")) for i in items if i.get("lastFinishedAt") is not None), None)
    if last is None:
        return 0.0
    delay, _asked, _capped = delay_for(max(delay_setting, shared_delay_ms(items)), stale_crawl_delay_s)
    return last + delay / 1000.0


def with_current_politeness(by_host: dict[str, list[dict]], current: Callable[[list[str]], dict] | None,
                            log: Callable[[str], None]) -> dict[str, list[dict]]:
    """``by_host`` with each host's ``hostDelayMs`` raised and ``lastFinishedAt`` moved forward to
    what the ledger says *now* (``current(hosts)`` → ``{host: {hostDelayMs, lastFinishedAt}}``,
    ``GET /api/crawls/{id}/politeness``), read before the level's first request to any host: a crawl
    that registered a longer delay for a host after this level was claimed — started at the same
    time — is honoured from robots.txt on. Never lowers a value; when the ledger cannot say
    (no ``current``, an error, an older ledger) the level's own values stay (logged)."""
    if current is None or not by_host:
        return by_host
    try:
        now_hosts = current(sorted(by_host))
    except Exception as exc:  # noqa: BLE001 - the level's own politeness still holds
        log(f"politeness: the hosts' current delays could not be read ({type(exc).__name__}: {str(exc)[:160]});"
            " the level's own are used")
        return by_host
    out: dict[str, list[dict]] = {}
    for host, items in by_host.items():
        fresh = now_hosts.get(host) if isinstance(now_hosts, dict) else None
        fresh = fresh if isinstance(fresh, dict) else {}
        delay, last = fresh.get("hostDelayMs"), fresh.get("lastFinishedAt")
        sent = shared_delay_ms(items)
        sent_last = next((parse_iso(i.get("lastFinishedAt")) for i in items if i.get("lastFinishedAt") is not None), None)
        update: dict = {}
        if isinstance(delay, (int, float)) and not isinstance(delay, bool) and int(delay) > sent:
            update["hostDelayMs"] = int(delay)
            log(f"[{host}] a crawl that started meanwhile uses a longer delay on this host: {int(delay)} ms")
        if parse_iso(last) is not None and (sent_last is None or parse_iso(last) > sent_last):
            update["lastFinishedAt"] = last
        out[host] = [{**i, **update} for i in items] if update else items
    return out


def read_robots(
    by_host: dict[str, list[dict]],
    delay_setting: int,
    cached: object,
    *,
    fetch: Fetcher,
    now: Callable[[], float],
    log: Callable[[str], None],
) -> tuple[dict[str, RobotsOutcome], dict[str, tuple[RobotsOutcome, float]]]:
    """``(outcome per host, {host: (outcome, fetched epoch s)} of the fetched ones)``: cached
    outcomes where usable (:func:`f.waggle.robots_cache.from_cache`), the rest fetched
    concurrently, each after its host's remaining gap (:func:`robots_not_before`). Logs counts,
    the longest wait and the time taken (bounded by the longest gap plus the fetches)."""
    started = now()
    cache = from_cache(cached, started, log)
    stale = stale_crawl_delays(cached)
    jobs = []
    for host, items in by_host.items():
        if host not in cache:
            scheme = urlsplit(str(items[0]["url"])).scheme or "http"
            jobs.append((host, f"{scheme}://{host}/robots.txt", robots_not_before(delay_setting, items, stale.get(host))))
    fetched = fetch_all(jobs, fetch, now=now)
    longest = max((max(0.0, nb - started) for _h, _u, nb in jobs), default=0.0)
    waited = sum(1 for _h, _u, nb in jobs if nb > started)
    log(f"robots.txt: {len(cache)} host(s) cached, {len(jobs)} fetched ({waited} waited their host's gap,"
        f" longest {longest * 1000:.0f} ms) in {now() - started:.2f} s")
    return {**cache, **{h: o for h, (o, _done) in fetched.items()}}, fetched


def read_sitemaps(
    sitemap: dict,
    by_host: dict[str, list[dict]],
    outcomes: dict[str, RobotsOutcome],
    fetched: dict[str, tuple[RobotsOutcome, float]],
    delay_setting: int,
    *,
    fetch: Callable[[str, Callable[[str], bool]], "sitemap_reader.Fetched"],
    now: Callable[[], float],
    log: Callable[[str], None],
) -> dict[str, "sitemap_reader.HostSitemaps"]:
    """Each host's sitemaps (issue 29 item 2, :func:`f.waggle.sitemaps.read_host`), hosts at once,
    each host's requests one after the other: the first ``delay`` after the host's last capture
    and after this level's robots.txt fetch, the delay being the one its captures keep (setting,
    Crawl-delay, ``hostDelayMs``); a host whose robots.txt was unreachable is not asked.
    ``sitemap`` = the flow input ``{lastmodAfter?, maxUrls?}``; ``fetch(url, allowed)``."""
    after = sitemap_reader.parse_w3c_datetime(sitemap.get("lastmodAfter"))
    max_urls = int(sitemap.get("maxUrls") or sitemap_reader.MAX_URLS_PER_FILE)
    jobs = []
    for host, items in by_host.items():
        outcome = outcomes.get(host)
        if outcome is not None and outcome.state == UNREACHABLE:
            log(f"[{host}] sitemaps not read: robots.txt unreachable")
            continue
        delay, _asked, _capped = delay_for(delay_setting, outcome.crawl_delay_s() if outcome else None)
        delay = max(delay, shared_delay_ms(items))
        last = next((parse_iso(i.get("lastFinishedAt")) for i in items if i.get("lastFinishedAt") is not None), None)
        before = [t + delay / 1000.0 for t in (last, fetched[host][1] if host in fetched else None) if t is not None]
        allowed = outcome.allowed if outcome is not None else (lambda _url: True)
        rules = outcome.rules if outcome is not None and outcome.state == ALLOWED else None
        jobs.append({"host": host, "scheme": urlsplit(str(items[0]["url"])).scheme or "http",
                     "robots_text": rules.sitemap_lines if rules is not None else None, "allowed": allowed,
                     "delay_ms": delay, "not_before": max(before, default=0.0),
                     "fetch": lambda url, allowed=allowed: fetch(url, allowed), "now": now,
                     "lastmod_after": after, "max_urls": max_urls, "log": log})
    return {m.host: m for m in sitemap_reader.read_all(jobs, sitemap_reader.read_host)}


def plan(
    candidates: list[dict],
    per_host_delay_ms: int | None,
    respect_robots: bool | None,
    host_parallelism: int | None,
    *,
    fetch: Fetcher,
    read_endpoints: Callable[[], str],
    robots: list[dict] | None = None,
    now: Callable[[], float] = time.time,
    log: Callable[[str], None] = print,
    current: Callable[[list[str]], dict] | None = None,
    sitemap: dict | None = None,
    fetch_sitemap: Callable[[str, Callable[[str], bool]], "sitemap_reader.Fetched"] | None = None,
) -> dict:
    """Plan one level (algorithm of reference/scheduler.md §4.1; None means "not given").

    ``fetch(robots_url)`` fetches one robots.txt (called from several threads at once);
    ``robots`` = the crawl's cached outcomes (flow input, may be None); ``read_endpoints()``
    returns the endpoint variable's text and is called only after every host was planned;
    ``current(hosts)`` gives the hosts' politeness now (:func:`with_current_politeness`);
    ``sitemap`` (flow input, None: not asked) has each host's sitemaps read after robots.txt
    (:func:`read_sitemaps`, ``fetch_sitemap(url, allowed)``): the first capture waits the delay after them.
    """
    respect = True if respect_robots is None else bool(respect_robots)
    delay_setting = DEFAULT_DELAY_MS if per_host_delay_ms is None else int(per_host_delay_ms)

    by_host: dict[str, list[dict]] = {}
    for item in candidates or []:
        by_host.setdefault(str(item["host"]), []).append(item)
    by_host = with_current_politeness(by_host, current, log)
    server_of_host = servers.servers_of(by_host)
    if len(set(server_of_host.values())) < len(server_of_host):  # hosts sharing a server: one at a time
        server_delay: dict[str, int] = {}
        for host, items in by_host.items():
            s_key = server_of_host[host]
            server_delay[s_key] = max(server_delay.get(s_key, 0), delay_setting, shared_delay_ms(items))
        fetch = servers.spaced_fetch(fetch, server_of_host, server_delay, now=now)

    outcomes, fetched = (read_robots(by_host, delay_setting, robots, fetch=fetch, now=now, log=log)
                         if respect else ({}, {}))
    maps = (read_sitemaps(sitemap, by_host, outcomes, fetched, delay_setting, fetch=fetch_sitemap, now=now, log=log)
            if sitemap and fetch_sitemap is not None else {})
    groups: list[dict] = []
    skipped: list[dict] = []
    slowed: list[dict] = []
    for host, items in by_host.items():
        urls = [str(item["url"]) for item in items]
        outcome: RobotsOutcome | None = outcomes.get(host)
        robots_done: float | None = fetched[host][1] if host in fetched else None  # a cached copy: no request
        if host in maps and maps[host].last_request is not None:  # the sitemaps came after robots.txt
            robots_done = max(robots_done or 0.0, maps[host].last_request)
        if outcome is not None:
            if outcome.state == UNREACHABLE:
                log(f"[{host}] robots.txt unreachable ({outcome.detail}): all {len(urls)} URL(s) skipped this level")
            elif outcome.rules is not None and outcome.rules.too_large:
                log(f"[{host}] robots.txt has {outcome.rules.rule_count} rules for us (cap {MAX_RULES}):"
                    f" all {len(urls)} URL(s) skipped this level")
        allowed: list[str] = []
        for url in urls:
            if outcome is None or outcome.allowed(url):
                allowed.append(url)
            else:
                if outcome.state == UNREACHABLE:
                    reason = "robots-unreachable"
                elif outcome.rules is not None and outcome.rules.too_large:
                    reason = "robots-too-large"
                else:
                    reason = "robots"
                # robots.txt that could not be read may be readable next time (issue 17: classes)
                skipped.append({"url": url, "reason": outcome.why_disallowed(url) if reason == "robots" else reason,
                                "failureClass": TRANSIENT if reason == "robots-unreachable" else PERMANENT})
        if not allowed:
            continue
        delay, asked, capped = delay_for(delay_setting, outcome.crawl_delay_s() if outcome else None)
        if asked is not None and (capped or asked > delay_setting):
            slowed.append({"host": host, "crawlDelayMs": asked, "delayMs": delay, "capped": capped})
            if capped:
                log(f"[{host}] Crawl-delay {asked} ms capped at {CRAWL_DELAY_CAP_MS} ms; host slowed to {delay} ms")
            else:
                log(f"[{host}] Crawl-delay {asked} ms is longer than the setting; host slowed to {delay} ms")
        own = delay  # this crawl's part: the floor when another crawl's delay stops applying (decision 301)
        shared = shared_delay_ms(items)
        if shared > delay:
            log(f"[{host}] another crawl on this host uses a longer delay; host slowed to {shared} ms")
            delay = shared
        last = next((i.get("lastFinishedAt") for i in items if i.get("lastFinishedAt") is not None), None)
        at = now()
        initial = max(initial_delay_for(delay, last, at), robots_gap_ms(delay, robots_done, at))
        group = {"host": host, "urls": allowed, "delayMs": delay, "initialDelayMs": initial,
                 "notBefore": round(at + initial / 1000.0, 3), "ownDelayMs": own}
        starts = [t for t in (parse_iso(last), robots_done) if t is not None]
        if starts:  # the host's last request: each admission measures a changed delay from it (decision 301)
            group["gapFrom"] = round(max(starts), 3)
        if outcome is not None and outcome.state == ALLOWED and outcome.rules is not None and outcome.rules.text:
            group["robotsTxt"] = outcome.rules.text  # normal form: the capture refuses what it disallows (decision 105)
        groups.append(group)
    groups = servers.merge_groups(groups, server_of_host)  # one server's hosts: one for-each item, one gap
    groups.sort(key=chain_ms, reverse=True)  # stable: equal chains keep first-seen order

    endpoints = endpoint_count(read_endpoints())
    parallelism = parallelism_for(host_parallelism, endpoints, groups)
    n_urls = sum(len(g["urls"]) for g in groups)
    robots_word = "robots read" if respect else "robots IGNORED (respect_robots false)"
    skip_word = f", {len(skipped)} skipped" if skipped else ""
    log(
        f"plan: {len(groups)} host(s), {n_urls} URL(s), {robots_word}{skip_word},"
        f" parallelism {parallelism} ({endpoints} endpoint(s))"
    )
    out = {"groups": groups, "skipped": skipped, "slowed": slowed, "robots": cache_entries(fetched),
           "parallelism": parallelism}
    if sitemap:
        out["sitemaps"] = [m.entry(lambda t: iso_now(t + 0.001)) for m in maps.values()]  # ms rounded up
    return out


def robots_transport(allow_private: bool) -> httpx.BaseTransport:
    """The transport robots fetches go through: the private-host guard (issue 7). One is shared
    by the fetching threads and stays open (fetch_robots never closes it), so it keeps no idle
    connection: each one closes after its answer, as when every fetch closed its own client."""
    from f.waggle.hostguard import guarded_transport

    return guarded_transport(allow_private=allow_private, limits=httpx.Limits(max_keepalive_connections=0))


def main(
    candidates: list[dict],
    per_host_delay_ms: int = 2000,
    respect_robots: bool = True,
    host_parallelism: int = 4,
    robots: Optional[list[dict]] = None,
    crawl_id: Optional[str] = None,
    sitemap: Optional[dict] = None,
):
    # Literal defaults: Windmill's schema inference cannot read constants. The ledger always
    # sends an explicit delay; its default (ledger.crawl.crawls.DEFAULT_PER_HOST_DELAY_MS) is the
    # one source, and tests/flow/test_default_delay.py fails when any copy here, in
    # plan_level.script.yaml or in crawl_level.flow disagrees. None arrives as "absent".
    allow_private = (read_optional_variable(VAR_ALLOW_PRIVATE) or "").strip().lower() in ("1", "true", "yes")
    transport = robots_transport(allow_private)

    def fetch(url: str) -> RobotsOutcome:
        return fetch_robots(url, transport=transport)

    def endpoints() -> str:
        return read_variable(VAR_ENDPOINTS)

    def fetch_sitemap(url: str, allowed: Callable[[str], bool]) -> sitemap_reader.Fetched:
        return sitemap_reader.fetch_sitemap(url, allowed=allowed, transport=transport, now=time.time)

    return plan(candidates, per_host_delay_ms, respect_robots, host_parallelism, fetch=fetch, read_endpoints=endpoints,
                robots=robots, current=ledger_politeness(crawl_id) if crawl_id else None, sitemap=sitemap,
                fetch_sitemap=fetch_sitemap)


POLITENESS_TIMEOUT_S = 5.0
POLITENESS_HOSTS_PER_CALL = 1000  # the ledger's limit (ledger.crawl.hosts.HOSTS_MAX)


def ledger_politeness(crawl_id: str, read: Callable[[str], str] = read_variable) -> Callable[[list[str]], dict]:
    """``current(hosts)`` for :func:`plan`: ``GET {waggle_api_url}/api/crawls/{crawl_id}/politeness``
    with the flow's token, up to 1,000 hosts a call; raises on any failure (plan logs it)."""

    def current(hosts: list[str]) -> dict:
        api_url, token = read(VAR_API_URL).rstrip("/"), read(VAR_TOKEN)
        found: dict = {}
        with http_client(api_url, POLITENESS_TIMEOUT_S) as client:
            for i in range(0, len(hosts), POLITENESS_HOSTS_PER_CALL):
                resp = client.get(f"{api_url}/api/crawls/{crawl_id}/politeness",
                                  params=[("host", h) for h in hosts[i:i + POLITENESS_HOSTS_PER_CALL]],
                                  headers={"Authorization": f"Bearer {token}"})
                if resp.status_code != 200:
                    raise RuntimeError(f"HTTP {resp.status_code} {resp.text[:160]}")
                found.update(resp.json()["hosts"])
        return found

    return current


# The flow's fallback when the delay arrives as null: main's literal (one copy in this file).
DEFAULT_DELAY_MS: int = inspect.signature(main).parameters["per_host_delay_ms"].default
