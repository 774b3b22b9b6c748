"""Politeness per server, not only per hostname (issue 29 item 7, decision 241).

Many hostnames can be one server (shared hosting, ``*.github.io``-style sites, a CDN origin).
When a level is leased (:func:`ledger.crawl.leases.claim_level`) its hosts are resolved — the
system resolver, or the test resolver ``WAGGLE_RESOLVE_HOSTS`` for the names it lists — and
each host gets its **server keys**:

* ``@a:<address>[:<port>]`` for every address it resolves to (at most :data:`MAX_ADDRESSES`,
  the lowest), with the host's explicit port (``localhost:8080`` and ``127.0.0.1:8080`` share
  ``@a:127.0.0.1:8080``; a site on another port of the machine stays apart); always;
* ``@d:<registered domain>`` (Public Suffix List, ``ledger.crawl.scope.registered_domain``) when
  the crawl's ``groupHosts`` is ``domain``.

A key is a row of ``host_leases`` beside the host's own row: a host is leased only when its row
and all its keys are, so two hosts sharing an address are never crawled by two levels (of any
crawls) at once. A key is a row of ``hosts`` too: every capture moves the host's row *and* its
keys' rows (``@d:`` always, so a domain crawl finds it), and a level's ``lastFinishedAt`` and
``hostDelayMs`` are the latest / largest over the host and its keys — the gap runs from the
server's last capture with the larger delay. Within a level the frontier items of hosts sharing
a key (transitively) carry one ``server`` label and the flow captures them as one chain
(``f/waggle/servers.py``). Keys start with ``@``, which no host (``crawl_pages.host``) can.
An unresolvable host has no address key (it is its own server, as before).
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import socket
from collections.abc import Awaitable, Callable
from typing import Any

from ledger.crawl.scope import hostname, registered_domain

log = logging.getLogger("waggle.servers")

ADDRESS, DOMAIN = "@a:", "@d:"
GROUPINGS = ("address", "domain")
MAX_ADDRESSES = 8
RESOLVE_TIMEOUT_S = 2.0
RESOLVE_AT_ONCE = 16
# The system resolver's answers are kept this long in the process: the lease loop retries a waiting
# level every second, and each claim resolves the level's hosts.
CACHE_TTL_S = 60.0
CACHE_MAX = 10_000
_cache: dict[str, tuple[float, list[str]]] = {}

Resolve = Callable[[str], Awaitable[list[str]]]


# Special-use names (RFC 6761, RFC 2606) are never sent to a resolver: ``localhost`` and
# ``*.localhost`` are loopback, ``.test``, ``.invalid`` and ``.example`` names resolve to nothing
# (each its own server) — so tests with such names never query a DNS server.
LOOPBACK = ["127.0.0.1", "::1"]
UNRESOLVED_SUFFIXES = (".test", ".invalid", ".example")


def parse_mapping(text: str | None) -> dict[str, list[str]]:
    """``WAGGLE_RESOLVE_HOSTS`` → ``{name: [address, …]}``: entries ``name=addr[ addr…]`` split
    by commas or newlines, names lower-cased; the entry ``*=-`` (key ``"*"``, no addresses) means
    that names not listed resolve to nothing — no look-up at all (the tests' setting). Raises
    ValueError naming an entry without ``=`` or with an address that is not an IP literal."""
    out: dict[str, list[str]] = {}
    for entry in (text or "").replace("\n", ",").split(","):
        entry = entry.strip()
        if not entry:
            continue
        name, sep, addrs = entry.partition("=")
        if entry.replace(" ", "") == "*=-":
            out["*"] = []
            continue
        if not sep or not name.strip() or not addrs.split():
            raise ValueError(f"WAGGLE_RESOLVE_HOSTS: {entry!r} is not name=address (or *=-)")
        found = []
        for a in addrs.split():
            try:
                found.append(str(ipaddress.ip_address(a.strip("[]"))))
            except ValueError:
                raise ValueError(f"WAGGLE_RESOLVE_HOSTS: {a!r} (for {name.strip()}) is not an IP address") from None
        out[name.strip().lower().rstrip(".")] = found
    return out


def resolver(mapping_text: str | None, *, timeout_s: float = RESOLVE_TIMEOUT_S) -> Resolve:
    """``resolve(name) -> [address]``: the mapping's addresses for the names it lists, else the
    system resolver (``getaddrinfo``, bounded by ``timeout_s``); [] when it fails."""
    mapping = parse_mapping(mapping_text)

    async def resolve(name: str) -> list[str]:
        if name in mapping:
            return list(mapping[name])
        if name == "localhost" or name.endswith(".localhost"):
            return list(LOOPBACK)
        if "*" in mapping or name.endswith(UNRESOLVED_SUFFIXES) or "." + name in UNRESOLVED_SUFFIXES:
            return []
        loop = asyncio.get_running_loop()
        hit = _cache.get(name)
        if hit is not None and hit[0] > loop.time():
            return list(hit[1])
        try:
            infos = await asyncio.wait_for(loop.getaddrinfo(name, None, type=socket.SOCK_STREAM), timeout_s)
            found = [str(info[4][0]) for info in infos]
        except (OSError, asyncio.TimeoutError, UnicodeError) as exc:
            log.info("Could not resolve %s (%s): it is its own server", name, exc)
            found = []
        if len(_cache) >= CACHE_MAX:
            _cache.clear()
        _cache[name] = (loop.time() + CACHE_TTL_S, found)
        return list(found)

    return resolve


def _name_and_port(host: str) -> tuple[str, str]:
    name = hostname(host)
    rest = host[len(name):]
    return name, rest[1:] if rest.startswith(":") else ""


def _literal(name: str) -> str | None:
    try:
        return str(ipaddress.ip_address(name.strip("[]")))
    except ValueError:
        return None


def address_keys(host: str, addresses: list[str]) -> list[str]:
    """The ``@a:`` keys of ``host`` (``crawl_pages.host``, with its explicit port if any)."""
    _name, port = _name_and_port(host)
    canon = set()
    for a in addresses:
        lit = _literal(a.split("%")[0])  # a scoped IPv6 address loses its zone
        if lit is not None:
            canon.add(lit)
    return [f"{ADDRESS}{a}{':' + port if port else ''}" for a in sorted(canon)[:MAX_ADDRESSES]]


def domain_key(host: str) -> str | None:
    """The ``@d:`` key of ``host``: its registered domain; None for an IP address."""
    name, _port = _name_and_port(host)
    if _literal(name) is not None:
        return None
    return DOMAIN + registered_domain(name.lower().rstrip("."))


def keys_for(host: str, addresses: list[str], grouping: str) -> list[str]:
    """Every server key of ``host`` for a crawl grouping by ``grouping`` (``address``/``domain``)."""
    keys = address_keys(host, addresses)
    if grouping == "domain" and (d := domain_key(host)) is not None:
        keys.append(d)
    return keys


async def resolve_hosts(hosts: list[str], resolve: Resolve) -> dict[str, list[str]]:
    """``{host: [address]}`` for ``hosts`` (IP literals are their own address), at most
    :data:`RESOLVE_AT_ONCE` look-ups at once."""
    gate = asyncio.Semaphore(RESOLVE_AT_ONCE)

    async def one(host: str) -> list[str]:
        name, _port = _name_and_port(host)
        lit = _literal(name)
        if lit is not None:
            return [lit]
        async with gate:
            return await resolve(name.lower().rstrip("."))

    found = await asyncio.gather(*(one(h) for h in hosts))
    return dict(zip(hosts, found))


def server_labels(keys_by_host: dict[str, list[str]]) -> dict[str, str]:
    """``{host: label}`` for hosts that share a key with another host (transitively): one label
    per server, the smallest address key (else domain key) of the group without its prefix.
    Hosts alone on their server are absent."""
    parent: dict[str, str] = {}

    def find(x: str) -> str:
        while parent.setdefault(x, x) != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for host, keys in keys_by_host.items():
        for k in keys:
            parent[find(host)] = find(k)
    members: dict[str, list[str]] = {}
    for host in keys_by_host:
        members.setdefault(find(host), []).append(host)
    labels: dict[str, str] = {}
    for hosts in members.values():
        if len(hosts) < 2:
            continue
        keys = sorted({k for h in hosts for k in keys_by_host[h]}, key=lambda k: (not k.startswith(ADDRESS), k))
        label = keys[0].split(":", 1)[1]
        for h in hosts:
            labels[h] = label
    return labels


_REMEMBER = """
INSERT INTO host_servers AS s (host, keys, resolved_at)
SELECT v.host, string_to_array(v.keys, ' '), now() FROM unnest(%s::text[], %s::text[]) AS v(host, keys) ORDER BY v.host
ON CONFLICT (host) DO UPDATE SET keys = EXCLUDED.keys, resolved_at = now()
"""


async def remember(conn: Any, addresses: dict[str, list[str]]) -> None:
    """Store each host's address keys (``host_servers``) for the captures' report and politeness."""
    if not addresses:
        return
    hosts = sorted(addresses)
    await conn.execute(_REMEMBER, (hosts, [" ".join(address_keys(h, addresses[h])) for h in hosts]))


async def stored_keys(conn: Any, hosts: list[str], grouping: str | None) -> dict[str, list[str]]:
    """``{host: keys}`` from ``host_servers`` (+ the domain key: always when ``grouping`` is
    None — recording —, else when it is ``domain``)."""
    if not hosts:
        return {}
    cur = await conn.execute("SELECT host, keys FROM host_servers WHERE host = ANY(%s)", (sorted(set(hosts)),))
    known = {r["host"]: [k for k in r["keys"] if k] for r in await cur.fetchall()}
    out: dict[str, list[str]] = {}
    for h in set(hosts):
        keys = list(known.get(h, []))
        if grouping in (None, "domain") and (d := domain_key(h)) is not None:
            keys.append(d)
        out[h] = keys
    return out


async def with_keys(conn: Any, latest: dict[str, Any]) -> dict[str, Any]:
    """``{host: capture time}`` of a level report plus, for each key of those hosts, the latest
    of its hosts' times (``ledger.crawl.hosts.record_captures`` records both)."""
    out = dict(latest)
    for host, keys in (await stored_keys(conn, list(latest), None)).items():
        for k in keys:
            if k not in out or latest[host] > out[k]:
                out[k] = latest[host]
    return out


async def key_politeness(conn: Any, crawl: dict, hosts: list[str]) -> dict[str, tuple[Any, int]]:
    """``{host: (latest last_capture_at, largest last_delay_ms)}`` over the host's server keys'
    rows of ``hosts`` (for this crawl's grouping); hosts without such rows are absent."""
    keys_of = await stored_keys(conn, hosts, crawl.get("group_hosts") or "address")
    every = sorted({k for ks in keys_of.values() for k in ks})
    if not every:
        return {}
    cur = await conn.execute("SELECT host, last_capture_at, last_delay_ms FROM hosts WHERE host = ANY(%s)", (every,))
    rows = {r["host"]: r for r in await cur.fetchall()}
    out: dict[str, tuple[Any, int]] = {}
    for host, keys in keys_of.items():
        found = [rows[k] for k in keys if k in rows]
        if found:
            out[host] = (max(r["last_capture_at"] for r in found), max(int(r["last_delay_ms"] or 0) for r in found))
    return out


async def crawl_servers(conn: Any, crawl: dict) -> list[dict]:
    """The crawl's hosts that share a server, as last resolved: ``[{"server": label, "hosts":
    [host, …]}]`` sorted by label (``GET /api/crawls/{id}`` ``servers``); [] when none do."""
    cur = await conn.execute("SELECT DISTINCT host FROM crawl_pages WHERE crawl_id = %s", (crawl["id"],))
    hosts = [r["host"] for r in await cur.fetchall()]
    labels = server_labels(await stored_keys(conn, hosts, crawl.get("group_hosts") or "address"))
    groups: dict[str, list[str]] = {}
    for host, label in labels.items():
        groups.setdefault(label, []).append(host)
    return [{"server": label, "hosts": sorted(hs)} for label, hs in sorted(groups.items())]
