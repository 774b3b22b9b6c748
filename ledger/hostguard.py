# /// script
# requires-python = ">=3.11"
# dependencies = ["httpx==0.28.1", "httpcore==1.0.9", "anyio==4.16.0", "ada-url==4.0.0"]
# ///
"""Private-host guard: waggle never fetches from the network it runs in.

One module, two byte-identical copies: ``ledger/hostguard.py`` (canonical; edit this one) and
``f/waggle/hostguard.py`` (Windmill scripts may import only workspace scripts; this is a
library script without ``main``), written by ``scripts/sync-flow-copies``. Used for seeds and discovered links (ledger), robots.txt
fetches (flow ``plan_level``) and browser traffic (capture server's forward proxy).

Policy (ARCHITECTURE.md decision 6, peers.md takeaway 10):

* schemes: only ``http`` and ``https``;
* names: ``localhost``, ``*.localhost``, ``*.local``, ``*.internal``, ``metadata``,
  ``metadata.google.internal``, ``metadata.goog`` (and its subdomains) — a trailing dot is ignored;
* addresses: loopback, RFC 1918, link-local, CGNAT 100.64.0.0/10, 0.0.0.0/8, 192.0.0.0/24,
  198.18.0.0/15, documentation ranges, multicast, broadcast, reserved 240/4, unspecified,
  IPv6 ULA fc00::/7, link-local fe80::/10, site-local fec0::/10, and anything else
  :mod:`ipaddress` does not call global. IPv4 inside IPv6 (mapped ``::ffff:a.b.c.d``,
  compatible ``::a.b.c.d``, 6to4 ``2002::/16``, NAT64 ``64:ff9b::/96``) is unwrapped and
  judged as IPv4;
* IPv4 spellings are read the WHATWG way (ada-url, like ``inet_aton``): ``2130706433``,
  ``0x7f.1``, ``0177.0.0.1`` and ``127.1`` are all ``127.0.0.1``.

Every resolved address must pass, and :func:`guarded_transport` connects to the very address it
checked (one resolution per connection; TLS SNI and ``Host`` stay the hostname), so DNS
rebinding between check and connect is impossible. httpx follows redirects through the same
transport, so every hop is checked again.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Callable, Iterable
from typing import Any

import ada_url
import anyio.to_thread
import httpcore
import httpx

__all__ = [
    "HostRefused",
    "check_url",
    "check_host",
    "resolve_checked",
    "is_blocked_address",
    "guarded_transport",
    "guarded_async_transport",
    "GuardedBackend",
    "AsyncGuardedBackend",
]

ALLOWED_SCHEMES = ("http", "https")

#: A resolver maps (host, port) to a list of address strings; the default is getaddrinfo.
Resolver = Callable[[str, int], list[str]]


class HostRefused(ValueError):
    """A URL or host the guard will not fetch. ``.url`` what was refused, ``.reason`` why."""

    def __init__(self, url: str, reason: str):
        self.url = url
        self.reason = reason
        super().__init__(f"refused {url}: {reason}")


# (network, reason) — order matters only for the wording of the reason.
_V4 = [
    ("0.0.0.0/8", "'this network' address (0.0.0.0/8)"),
    ("10.0.0.0/8", "private address (RFC 1918)"),
    ("100.64.0.0/10", "carrier-grade NAT address (100.64.0.0/10)"),
    ("127.0.0.0/8", "loopback address"),
    ("169.254.0.0/16", "link-local address"),
    ("172.16.0.0/12", "private address (RFC 1918)"),
    ("192.0.0.0/24", "IETF protocol assignment (192.0.0.0/24)"),
    ("192.0.2.0/24", "documentation address (TEST-NET-1)"),
    ("192.168.0.0/16", "private address (RFC 1918)"),
    ("198.18.0.0/15", "benchmarking address (198.18.0.0/15)"),
    ("198.51.100.0/24", "documentation address (TEST-NET-2)"),
    ("203.0.113.0/24", "documentation address (TEST-NET-3)"),
    ("224.0.0.0/4", "multicast address"),
    ("255.255.255.255/32", "broadcast address"),
    ("240.0.0.0/4", "reserved address (240.0.0.0/4)"),
]
_V6 = [
    ("::/128", "unspecified address"),
    ("::1/128", "loopback address"),
    ("fc00::/7", "unique-local IPv6 address (fc00::/7)"),
    ("fe80::/10", "link-local IPv6 address"),
    ("fec0::/10", "site-local IPv6 address (deprecated)"),
    ("ff00::/8", "multicast address"),
    ("2001:db8::/32", "documentation address (2001:db8::/32)"),
    ("100::/64", "discard-only IPv6 address"),
]
_V4_NETS = [(ipaddress.IPv4Network(n), r) for n, r in _V4]
_V6_NETS = [(ipaddress.IPv6Network(n), r) for n, r in _V6]
_NAT64 = [ipaddress.IPv6Network("64:ff9b::/96"), ipaddress.IPv6Network("64:ff9b:1::/48")]

_BLOCKED_NAMES = {"localhost", "metadata", "metadata.google.internal", "metadata.goog"}
_BLOCKED_SUFFIXES = (".localhost", ".local", ".internal", ".metadata.goog")


def _embedded_v4(ip: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address carried inside an IPv6 one (mapped, compatible, 6to4, NAT64), if any."""
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    packed = ip.packed
    if packed[:12] == bytes(12) and int(ip) > 1:  # ::a.b.c.d (deprecated "compatible")
        return ipaddress.IPv4Address(packed[12:])
    if ip.sixtofour is not None:
        return ip.sixtofour
    if any(ip in net for net in _NAT64):
        return ipaddress.IPv4Address(packed[12:])
    return None


def is_blocked_address(ip: str | ipaddress.IPv4Address | ipaddress.IPv6Address) -> str | None:
    """Why ``ip`` must not be contacted, or ``None`` when it is a public address.

    ``ip`` is an address string (``"10.0.0.1"``, ``"::1"``, ``"[::1]"``, ``"fe80::1%eth0"``) or an
    :mod:`ipaddress` object. Raises ``ValueError`` when the string is not an address.
    """
    if isinstance(ip, str):
        text = ip.strip().removeprefix("[").removesuffix("]").split("%", 1)[0]
        addr: ipaddress.IPv4Address | ipaddress.IPv6Address = ipaddress.ip_address(text)
    else:
        addr = ip
    if isinstance(addr, ipaddress.IPv6Address):
        inner = _embedded_v4(addr)
        if inner is not None:
            why = is_blocked_address(inner)
            return f"{why} inside IPv6 {addr}" if why else None
        for net, reason in _V6_NETS:
            if addr in net:
                return f"{reason} {addr}"
    else:
        for net, reason in _V4_NETS:
            if addr in net:
                return f"{reason} {addr}"
    if not addr.is_global:
        return f"non-global address {addr}"
    return None


def _blocked_name(name: str) -> str | None:
    bare = name.lower().rstrip(".")
    if bare in _BLOCKED_NAMES or bare.endswith(_BLOCKED_SUFFIXES):
        return f"internal host name {bare!r}"
    return None


def _normalize_host(host: str) -> tuple[str, ipaddress.IPv4Address | ipaddress.IPv6Address | None]:
    """WHATWG host parsing: (ASCII host, address if the host is an IP literal in any spelling).

    Raises ``ValueError`` for a host WHATWG rejects.
    """
    text = host.strip()
    if ":" in text and not text.startswith("["):
        text = f"[{text}]"  # bare IPv6 literal (getaddrinfo / httpcore style)
    try:
        parsed = ada_url.URL(f"http://{text}/")
    except ValueError:
        raise ValueError(f"invalid host {host!r}") from None
    hostname = parsed.hostname
    if parsed.host_type in (ada_url.HostType.IPV4, ada_url.HostType.IPV6):
        return hostname, ipaddress.ip_address(hostname.strip("[]"))
    return hostname, None


def check_host(host: str, url: str | None = None) -> str:
    """Check a host by name and literal address only (no DNS); return it WHATWG-normalized.

    Raises :class:`HostRefused` (``.url`` = ``url`` or ``host``) for a blocked name or address
    or an invalid host.
    """
    label = url if url is not None else host
    try:
        normalized, addr = _normalize_host(host)
    except ValueError as exc:
        raise HostRefused(label, str(exc)) from None
    if not normalized:
        raise HostRefused(label, "no host")
    reason = is_blocked_address(addr) if addr is not None else _blocked_name(normalized)
    if reason:
        raise HostRefused(label, reason)
    return normalized


def check_url(url: str) -> str:
    """Check a URL's scheme, host name and literal address spelling (no DNS).

    Returns the WHATWG-normalized URL (ada-url ``href``). Raises :class:`HostRefused` with a
    reason for an unparsable URL, a scheme other than http/https, or a blocked host.
    """
    if not isinstance(url, str):
        raise HostRefused(repr(url), "not a valid URL")
    try:
        parsed = ada_url.URL(url)
    except ValueError:
        raise HostRefused(str(url), "not a valid URL") from None
    scheme = parsed.protocol.rstrip(":")
    if scheme not in ALLOWED_SCHEMES:
        raise HostRefused(url, f"scheme {scheme!r} is not allowed (only http and https)")
    check_host(parsed.hostname, url)
    return parsed.href


def _system_resolver(host: str, port: int) -> list[str]:
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(info[4][0] for info in infos))


def resolve_checked(
    host: str,
    port: int,
    *,
    resolver: Resolver | None = None,
    allow_private: bool = False,
) -> list[str]:
    """Resolve ``host`` once and return its addresses; every one must pass the guard.

    ``resolver(host, port) -> [address, ...]`` defaults to ``socket.getaddrinfo``. An IP literal
    (any WHATWG spelling) is returned without DNS. ``allow_private`` skips the checks (the
    ``WAGGLE_ALLOW_PRIVATE_HOSTS=1`` opt-out) but still resolves once.
    Raises :class:`HostRefused` when the name or any resolved address is blocked or nothing
    resolves; ``OSError`` (``socket.gaierror``) when DNS itself fails.
    """
    label = f"{host}:{port}"
    if allow_private:
        try:
            normalized, addr = _normalize_host(host)
        except ValueError as exc:
            raise HostRefused(label, str(exc)) from None
    else:
        normalized = check_host(host, label)
        addr = _normalize_host(normalized)[1]
    if addr is not None:
        return [str(addr)]
    addresses = (resolver or _system_resolver)(normalized, port)
    if not addresses:
        raise HostRefused(label, "the name resolves to no address")
    if not allow_private:
        for address in addresses:
            reason = is_blocked_address(address)
            if reason:
                raise HostRefused(label, f"resolves to {reason}")
    return list(addresses)


def _connect_error(host: str, errors: Iterable[BaseException]) -> httpcore.ConnectError:
    detail = "; ".join(str(e) for e in errors) or "no address"
    return httpcore.ConnectError(f"cannot connect to {host}: {detail}")


class _Guard:
    """What both backends share: the policy, and one checked resolution per connection."""

    def __init__(self, *, allow_private: bool = False, resolver: Resolver | None = None, inner: Any = None):
        self.allow_private = allow_private
        self.resolver = resolver
        self.inner = inner or self._default_inner()

    def _addresses(self, host: str, port: int) -> list[str]:
        try:
            return resolve_checked(host, port, resolver=self.resolver, allow_private=self.allow_private)
        except OSError as exc:
            raise httpcore.ConnectError(f"cannot resolve {host}: {exc}") from exc


_CONNECT_ERRORS = (httpcore.ConnectError, httpcore.ConnectTimeout, OSError)


class GuardedBackend(_Guard, httpcore.NetworkBackend):
    """httpcore network backend: resolve once, check every address, connect to a checked one.

    ``inner`` is the backend that opens the socket (default ``httpcore.SyncBackend()``); tests
    may pass a recording one. Unix sockets are refused.
    """

    _default_inner = httpcore.SyncBackend

    def connect_tcp(self, host: str, port: int, timeout: float | None = None, local_address: str | None = None,
                    socket_options: Iterable[Any] | None = None) -> httpcore.NetworkStream:
        errors: list[BaseException] = []
        for address in self._addresses(host, port):
            try:
                return self.inner.connect_tcp(address, port, timeout=timeout, local_address=local_address,
                                              socket_options=socket_options)
            except _CONNECT_ERRORS as exc:
                errors.append(exc)
        raise _connect_error(host, errors)

    def connect_unix_socket(self, path: str, timeout: float | None = None, socket_options=None):
        raise HostRefused(f"unix:{path}", "unix sockets are not allowed")

    def sleep(self, seconds: float) -> None:
        self.inner.sleep(seconds)


class AsyncGuardedBackend(_Guard, httpcore.AsyncNetworkBackend):
    """Async twin of :class:`GuardedBackend`; resolution runs in a worker thread."""

    _default_inner = httpcore.AnyIOBackend

    async def connect_tcp(self, host: str, port: int, timeout: float | None = None, local_address: str | None = None,
                          socket_options: Iterable[Any] | None = None) -> httpcore.AsyncNetworkStream:
        errors: list[BaseException] = []
        for address in await anyio.to_thread.run_sync(self._addresses, host, port):
            try:
                return await self.inner.connect_tcp(address, port, timeout=timeout, local_address=local_address,
                                                    socket_options=socket_options)
            except _CONNECT_ERRORS as exc:
                errors.append(exc)
        raise _connect_error(host, errors)

    async def connect_unix_socket(self, path: str, timeout: float | None = None, socket_options=None):
        raise HostRefused(f"unix:{path}", "unix sockets are not allowed")

    async def sleep(self, seconds: float) -> None:
        await self.inner.sleep(seconds)


class _GuardedTransport:
    """What both transports share: httpx's transport, its pool rebuilt around a guarded backend
    (httpx offers no ``network_backend`` argument)."""

    _backend: type
    _pool_class: type

    def __init__(
        self,
        *,
        allow_private: bool = False,
        resolver: Resolver | None = None,
        inner: Any = None,
        verify: Any = True,
        limits: httpx.Limits = httpx.Limits(max_connections=100, max_keepalive_connections=20),
        http2: bool = False,
        retries: int = 0,
    ):
        super().__init__(verify=verify, limits=limits, http2=http2, retries=retries, trust_env=False)
        self.backend = self._backend(allow_private=allow_private, resolver=resolver, inner=inner)
        self._pool = self._pool_class(
            network_backend=self.backend,
            ssl_context=httpx.create_ssl_context(verify=verify),
            max_connections=limits.max_connections,
            max_keepalive_connections=limits.max_keepalive_connections,
            keepalive_expiry=limits.keepalive_expiry,
            http1=True,
            http2=http2,
            retries=retries,
        )


class GuardedHTTPTransport(_GuardedTransport, httpx.HTTPTransport):
    """``httpx.HTTPTransport`` whose every connection goes through :class:`GuardedBackend`."""

    _backend = GuardedBackend
    _pool_class = httpcore.ConnectionPool


class AsyncGuardedHTTPTransport(_GuardedTransport, httpx.AsyncHTTPTransport):
    """``httpx.AsyncHTTPTransport`` whose every connection goes through :class:`AsyncGuardedBackend`."""

    _backend = AsyncGuardedBackend
    _pool_class = httpcore.AsyncConnectionPool


def guarded_transport(
    allow_private: bool = False,
    *,
    asynchronous: bool = False,
    resolver: Resolver | None = None,
    **kwargs: Any,
) -> GuardedHTTPTransport | AsyncGuardedHTTPTransport:
    """An httpx transport that connects only to addresses the guard checked.

    Use as ``httpx.Client(transport=guarded_transport(), follow_redirects=True)`` (or
    ``asynchronous=True`` with ``httpx.AsyncClient``). A blocked host raises
    :class:`HostRefused` out of ``client.get(...)``, at the first request or any redirect hop;
    DNS failure raises ``httpx.ConnectError``. ``allow_private=True`` (the
    ``WAGGLE_ALLOW_PRIVATE_HOSTS=1`` opt-out) skips the checks. ``kwargs``: ``verify``,
    ``limits``, ``http2``, ``retries``, ``inner`` (the socket-opening httpcore backend).
    Passing a transport also stops httpx from using proxies from the environment.
    """
    cls = AsyncGuardedHTTPTransport if asynchronous else GuardedHTTPTransport
    return cls(allow_private=allow_private, resolver=resolver, **kwargs)


def guarded_async_transport(
    allow_private: bool = False, *, resolver: Resolver | None = None, **kwargs: Any
) -> AsyncGuardedHTTPTransport:
    """Shorthand for ``guarded_transport(allow_private, asynchronous=True, ...)``."""
    return guarded_transport(allow_private, asynchronous=True, resolver=resolver, **kwargs)
