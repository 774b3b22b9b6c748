# /// script
# requires-python = ">=3.11"
# dependencies = []
# ///
"""servers: hosts that are one server share one gap within a level (issue 29 item 7, decision 241).

The ledger resolves the level's hosts when it leases them and gives each frontier item the
``server`` it belongs to (``ledger.crawl.servers``; absent = the host is its own server). Here:

* :func:`spaced_fetch` — the robots.txt fetches of one server's hosts go one at a time, each
  at least the server's delay after the previous one ended (a robots.txt fetch is a request the
  site feels like any other);
* :func:`merge_groups` — plan_level's per-host groups of one server become one for-each item
  ``{"host": "<server> (a, b)", "server", "urls" (all, for the width estimate), "delayMs"
  (the largest), "initialDelayMs"/"notBefore" (the latest), "members": [per-host groups, each
  with the server's delayMs]}``; a server with one host keeps its group unchanged;
* :func:`capture_members` — crawl_host captures the members one after the other: a member's
  first capture waits the server's gap (as it ended: a slow host's or a backed-off one, never
  below the delay) since the previous member's last ``gapFrom``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import datetime
from typing import Any
from urllib.parse import urlsplit


def server_of(items: list[dict]) -> str | None:
    """The ``server`` the ledger named for a host's frontier items (the first one given)."""
    return next((str(i["server"]) for i in items if isinstance(i.get("server"), str) and i["server"]), None)


def servers_of(by_host: dict[str, list[dict]]) -> dict[str, str]:
    """``{host: server}`` for every host (a host without one is its own server)."""
    return {host: server_of(items) or host for host, items in by_host.items()}


def spaced_fetch(fetch: Callable[[str], Any], server_of_host: dict[str, str], delay_of_server: dict[str, int], *,
                 now: Callable[[], float] = time.time, sleep: Callable[[float], None] = time.sleep,
                 ) -> Callable[[str], Any]:
    """``fetch`` wrapped so that two fetches of hosts of one server never overlap and each
    starts ≥ the server's delay (ms) after the previous one ended; other servers are unaffected.
    Hosts absent from ``server_of_host`` are their own server."""
    locks: dict[str, threading.Lock] = {}
    last: dict[str, float] = {}
    guard = threading.Lock()

    def spaced(url: str) -> Any:
        host = urlsplit(url).netloc.rpartition("@")[2].lower()
        server = server_of_host.get(host, host)
        with guard:
            lock = locks.setdefault(server, threading.Lock())
        with lock:
            if server in last:
                wait = last[server] + delay_of_server.get(server, 0) / 1000.0 - now()
                if wait > 0:
                    sleep(wait)
            try:
                return fetch(url)
            finally:
                last[server] = now()

    return spaced


def merge_groups(groups: list[dict], server_of_host: dict[str, str]) -> list[dict]:
    """plan_level's groups with the hosts of one server merged (see the module docstring), in
    the order of each server's first group."""
    by_server: dict[str, list[dict]] = {}
    for g in groups:
        by_server.setdefault(server_of_host.get(g["host"], g["host"]), []).append(g)
    out: list[dict] = []
    for server, members in by_server.items():
        if len(members) == 1:
            out.append(members[0])
            continue
        delay = max(int(m["delayMs"]) for m in members)
        own = max(int(m.get("ownDelayMs", m["delayMs"])) for m in members)  # one server: one floor
        starts = [float(m["gapFrom"]) for m in members if isinstance(m.get("gapFrom"), (int, float))]
        latest = max(members, key=lambda m: float(m.get("notBefore") or 0))
        out.append({
            "host": f"{server} ({', '.join(m['host'] for m in members)})",
            "server": server,
            "urls": [u for m in members for u in m["urls"]],
            "delayMs": delay,
            "initialDelayMs": max(int(m.get("initialDelayMs") or 0) for m in members),
            "notBefore": latest.get("notBefore"),
            "members": [{**m, "delayMs": delay, "ownDelayMs": own} for m in members],
            "ownDelayMs": own,
            **({"gapFrom": max(starts)} if starts else {}),
        })
    return out


def _gap_from(result: dict) -> float | None:
    for key in ("gapFrom", "finishedAt"):
        value = result.get(key)
        if isinstance(value, str) and value:
            try:
                return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
            except ValueError:
                continue
    return None


def next_member_wait_ms(results: list[dict], gap_ms: int, now: float) -> int:
    """What the next host of the server still waits (ms): ``gap_ms`` since the latest
    ``gapFrom`` (else ``finishedAt``) of the previous hosts' ``results``; 0 when they have none."""
    starts = [t for t in (_gap_from(r) for r in results) if t is not None]
    if not starts:
        return 0
    return max(0, int(round(gap_ms - (now - max(starts)) * 1000.0)))


def capture_members(members: list[dict], run: Callable[[dict, int, float | None, dict], list[dict]], *,
                    delay_ms: int, initial_delay_ms: int, not_before: float | None,
                    now: Callable[[], float] = time.time, log: Callable[[str], None] = print) -> list[dict]:
    """Capture the hosts of one server one after the other; their PageResults in order.

    ``run(member, initial_delay_ms, not_before, gap_out)`` captures one host (crawl_host's
    ``capture_host``) and leaves its final gap in ``gap_out["ms"]``. The first member waits the
    planned ``initial_delay_ms``/``not_before``; each next one waits ``max(delay_ms, the previous
    member's final gap)`` since the latest ``gapFrom`` so far (:func:`next_member_wait_ms`)."""
    results: list[dict] = []
    gap = max(0, int(delay_ms))
    for i, member in enumerate(members):
        if i == 0:
            wait, at = initial_delay_ms, not_before
        else:
            wait = next_member_wait_ms(results, gap, now())
            at = now() + wait / 1000.0
            starts = [t for t in (_gap_from(r) for r in results) if t is not None]
            if starts:  # the server's last request: where an admitted longer delay counts from (decision 301)
                member = {**member, "gapFrom": max(starts)}
            log(f"[{member['host']}] next host of server {member.get('server') or ''}: waiting {wait} ms"
                f" (gap {gap} ms since the server's last capture)")
        out: dict = {}
        try:
            results.extend(run(member, wait, at, out))
        finally:
            gap = max(int(delay_ms), int(out.get("ms") or 0))  # a slow or backed-off host's gap carries on
    return results
