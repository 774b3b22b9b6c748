"""The guarded forward proxy: the single place where browser traffic leaves the capture server.

Every browser context is created with ``proxy=http://127.0.0.1:<port>`` of this proxy (Playwright
makes Chromium send loopback traffic through it as well). For each connection the proxy reads the
target (``CONNECT host:port`` for TLS and WebSockets, an absolute-form ``http://`` request line
otherwise), resolves the host ONCE with ``ledger.hostguard.resolve_checked`` (every address must
pass the private-host guard) and connects to the checked address, so DNS rebinding between check
and connect is impossible. Refusals answer ``403`` and are counted in :attr:`refused`.

``allow_private=True`` (the ``--allow-private`` development flag) lets loopback and RFC 1918
targets through (local test sites, the local stack) but still refuses link-local addresses
(169.254.0.0/16 incl. cloud metadata, fe80::/10).

Plain-HTTP requests are forwarded one per connection (``Connection: close`` both ways), so a
kept-alive browser connection can never carry a request to a host that was not checked.
Within one capture a host's checked addresses are reused (no second resolution either way:
the proxy only ever connects to addresses it checked); :meth:`begin_capture` forgets them.
:meth:`end_capture` closes every open connection and seals the proxy — new connections are
dropped unanswered until the next :meth:`begin_capture` — so nothing outlives a capture, not
even requests of a page whose context is still being closed.

:attr:`GuardedProxy.last_traffic` (monotonic seconds, None when nothing passed) is when the
last byte of the capture passed between the browser and a site, either way, or a connection
attempt to a site ended — or the seal, when it cut a plain-HTTP request short — so the capture
can say when the site last felt it (the capture's ``sinceLastRequestMs`` runs from it) — and
the close of a site connection while the site still had bytes to send (a download the browser
dropped at the size limit: the site's blocked write ends then, not at our last read; issue 24
item 2). Sealing
lets plain-HTTP requests already sent finish first (bounded), so their end is seen; a TLS
tunnel's requests are invisible here (the recorder knows them) and a tunnel is cut at once.
Each request gets its drain time counted from when it was sent, not from the seal: a request
already outstanding that long (a long-poll the site holds) is cut at once instead of adding the
drain to every such capture (issue 17 item 3: it was a full second beyond the settle wait).
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
import time
from collections.abc import Awaitable, Callable
from urllib.parse import urlsplit

import anyio.to_thread

from waggle_capture import proxystatus
from waggle_capture.errorbodies import CAP as ERROR_BODY_CAP
from waggle_capture.errorbodies import ErrorBodies
from ledger.hostguard import HostRefused, resolve_checked

log = logging.getLogger("waggle_capture.proxy")

HEAD_LIMIT = 64 * 1024
CONNECT_TIMEOUT_S = 10.0
IDLE_TIMEOUT_S = 60.0
HOP_BY_HOP = {"proxy-connection", "proxy-authorization", "connection", "keep-alive"}


METADATA_NAMES = {"metadata", "metadata.google.internal", "metadata.goog"}


def checked_addresses(host: str, port: int, allow_private: bool) -> list[str]:
    """Addresses of ``host`` that the guard accepts (one resolution); raises HostRefused.

    With ``allow_private`` cloud-metadata names and link-local addresses are still refused
    (names before any DNS lookup).
    """
    bare = host.lower().rstrip(".")
    if allow_private and (bare in METADATA_NAMES or bare.endswith(".metadata.goog")):
        raise HostRefused(f"{host}:{port}", f"metadata host name {bare!r} is never allowed")
    addresses = resolve_checked(host, port, allow_private=allow_private)
    if allow_private:
        for a in addresses:
            ip = ipaddress.ip_address(a.split("%", 1)[0])
            inner = getattr(ip, "ipv4_mapped", None) or ip
            if inner.is_link_local:
                raise HostRefused(f"{host}:{port}", f"link-local address {a} (metadata) is never allowed")
    return addresses


def _forged_status(line: str) -> bool:
    """A site's ``Proxy-Status`` header line naming this proxy (dropped: only we say that)."""
    name, _, value = line.partition(":")
    return name.strip().lower() == "proxy-status" and proxystatus.is_ours(value)


def _client_head(lines: list[str]) -> bytes:
    """A site's response head as the browser gets it: ``Connection: close``, no forged mark."""
    kept = [lines[0]] + [h for h in lines[1:] if h and h.split(":", 1)[0].strip().lower() not in ("connection", "keep-alive")
                         and not _forged_status(h)]
    return ("\r\n".join(kept) + "\r\nConnection: close\r\n\r\n").encode("latin-1")


def _status(status_line: str) -> int:
    parts = status_line.split(" ", 2)
    return int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else 0


class GuardedProxy:
    """Forward proxy on 127.0.0.1 (OS-chosen port) enforcing the private-host guard.

    ``deny(url) -> bool`` (set per capture by :meth:`begin_capture`) refuses plain-HTTP requests
    that a ``deny`` URL policy matches (backstop for redirects; the browser-side gate handles
    the rest); ``on_denied(url, method)`` is told about each.
    """

    def __init__(self, allow_private: bool = False, checker: Callable[[str, int, bool], list[str]] = checked_addresses,
                 sealed: bool = False):
        self.allow_private = allow_private
        self._checker = checker
        self._server: asyncio.base_events.Server | None = None
        self._conns: set[asyncio.Task] = set()
        self.port = 0
        self.refused: list[tuple[str, str]] = []
        self.connections = 0
        self._deny: Callable[[str], bool] = lambda url: False
        self._on_denied: Callable[[str, str], None] = lambda url, method: None
        self._checked: dict[tuple[str, int], list[str]] = {}
        self.sealed = sealed  # a context's own proxy starts sealed: nothing goes out before its capture
        self.dropped = 0  # connections refused while sealed
        self.last_traffic: float | None = None
        self.not_before: float | None = None  # monotonic s: no connection to a site before (startAfterMs)
        self.hold: Callable[[], Awaitable[None]] | None = None  # awaited before each connection (holdAfter)
        self.error_bodies = ErrorBodies()  # plain-HTTP error answers' bodies, for the recorder
        self._busy: dict[asyncio.Task, float] = {}  # plain-HTTP requests sent to a site, response
        # not ended → monotonic seconds when sent
        self._unsent: set[asyncio.Task] = set()  # connections whose site still has bytes to send us

    async def start(self) -> int:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0, limit=HEAD_LIMIT)
        self.port = self._server.sockets[0].getsockname()[1]
        return self.port

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def begin_capture(self, deny: Callable[[str], bool] | None = None,
                      on_denied: Callable[[str, str], None] | None = None,
                      checked: dict[tuple[str, int], list[str]] | None = None) -> None:
        """Open the proxy for one capture. ``checked`` maps ``(host, port)`` to addresses the
        caller got from :func:`checked_addresses` with this proxy's ``allow_private`` (reused
        instead of a second resolution)."""
        self.refused = []
        self.connections = 0
        self.error_bodies.clear()
        self._checked = dict(checked or {})
        self._deny = deny or (lambda url: False)
        self._on_denied = on_denied or (lambda url, method: None)
        self.last_traffic = None
        self.not_before = None
        self.hold = None
        self.sealed = False

    def hold_until(self, at: float | None) -> None:
        """No connection of this capture reaches a site before ``at`` (monotonic seconds; None:
        no hold): each waits here until then (extension ``startAfterMs``, so the browser can
        start its navigation a little earlier and its first request leaves exactly on time)."""
        self.not_before = at

    def hold_with(self, hold: Callable[[], Awaitable[None]]) -> None:
        """No connection of this capture reaches a site before ``hold()`` returned (awaited anew
        for each connection; extension ``holdAfter``: until the previous capture sealed and its
        gap since its last byte passed)."""
        self.hold = hold

    async def end_capture(self, drain_s: float = 0.1) -> None:
        """Seal the proxy (the capture is over): no new connection or request goes out; plain-HTTP
        requests already sent to a site get ``drain_s`` seconds to finish (so their end is seen,
        not guessed); then every connection still open is closed."""
        self.sealed = True
        if self._busy and drain_s > 0:  # each request's drain runs from when it was sent
            left = max(self._busy.values()) + drain_s - time.monotonic()
            if left > 0:
                await asyncio.wait(list(self._busy), timeout=left)
        cut = bool(self._busy)
        for t in list(self._conns):
            t.cancel()
        if self._conns:
            await asyncio.wait(list(self._conns), timeout=5)
        if cut:  # a request was cut short: the site felt it end now
            self.last_traffic = time.monotonic()
        self._deny = lambda url: False

    async def close(self) -> None:
        await self.end_capture()
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 5)

    # -- connection handling -------------------------------------------------------------------

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self.sealed:
            self.dropped += 1
            writer.close()
            return
        task = asyncio.current_task()
        assert task is not None
        self._conns.add(task)
        upstream: asyncio.StreamWriter | None = None
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), IDLE_TIMEOUT_S)
            lines = head.decode("latin-1").split("\r\n")
            method, target, _version = lines[0].split(" ", 2)
            self.connections += 1
            if method.upper() == "CONNECT":
                host, _, port_s = target.rpartition(":")
                host = host.strip("[]")
                up_r, upstream = await self._open(host, int(port_s), writer)
                if upstream is None or self.sealed:
                    return
                writer.write(b"HTTP/1.1 200 Connection Established\r\n\r\n")
                await writer.drain()
                await self._pipe_both(reader, writer, up_r, upstream, task)
                return
            parts = urlsplit(target)
            if parts.scheme != "http" or not parts.hostname:
                await self._refuse(writer, target, "only absolute http:// requests or CONNECT")
                return
            if self._deny(target):
                self._on_denied(target, method)
                await self._refuse(writer, target, "denied by URL policy", record=False)
                return
            up_r, upstream = await self._open(parts.hostname, parts.port or 80, writer)
            if upstream is None or self.sealed:  # sealed meanwhile: this request never goes out
                return
            self._busy[task] = time.monotonic()
            self._unsent.add(task)  # until the response's end is read
            path = parts.path or "/"
            if parts.query:
                path += "?" + parts.query
            out = [f"{method} {path} HTTP/1.1"]
            out += [h for h in lines[1:] if h and h.split(":", 1)[0].strip().lower() not in HOP_BY_HOP]
            out.append("Connection: close")
            upstream.write(("\r\n".join(out) + "\r\n\r\n").encode("latin-1"))
            self.last_traffic = time.monotonic()
            await upstream.drain()
            await self._forward_response(reader, writer, up_r, upstream, target if method.upper() == "GET" else None)
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, asyncio.TimeoutError,
                ConnectionError, ValueError):
            pass
        except asyncio.CancelledError:
            pass
        finally:
            for w in (writer, upstream):
                if w is not None:
                    w.close()
            if upstream is not None and task in self._unsent:
                # The site was still sending (a download the browser dropped, a response cut or
                # timed out): the close is the last thing it feels of this capture — its blocked
                # write fails now, not at our last read (issue 24 item 2).
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(upstream.wait_closed(), 1)
                self.last_traffic = time.monotonic()
            self._unsent.discard(task)
            self._conns.discard(task)
            self._busy.pop(task, None)

    async def _open(self, host: str, port: int, writer: asyncio.StreamWriter):
        label = f"{host}:{port}"
        if self.hold is not None:
            await self.hold()
        if self.not_before is not None and (hold := self.not_before - time.monotonic()) > 0:
            await asyncio.sleep(hold)  # a connection attempt is felt by the site: held as well
        if self.sealed:
            return None, None
        try:
            addresses = self._checked.get((host, port))
            if addresses is None:
                addresses = await anyio.to_thread.run_sync(self._checker, host, port, self.allow_private)
                self._checked[(host, port)] = addresses
        except HostRefused as e:
            await self._refuse(writer, label, e.reason)
            return None, None
        except OSError as e:
            await self._refuse(writer, label, f"cannot resolve: {e}", status="502 Bad Gateway",
                               proxy_status=proxystatus.header("dns_error", "net::ERR_NAME_NOT_RESOLVED"))
            return None, None
        last: Exception | None = None
        for address in addresses:
            try:
                return await asyncio.wait_for(asyncio.open_connection(address, port), CONNECT_TIMEOUT_S)
            except (OSError, asyncio.TimeoutError) as e:
                last = e
            finally:
                self.last_traffic = time.monotonic()  # a connection attempt is felt too, even a refused one
        # The site never answered: say so in Proxy-Status, so the capture reports Chromium's
        # network error instead of a 502 the site never sent (proxystatus).
        await self._refuse(writer, label, f"cannot connect: {last}", status="502 Bad Gateway", record=False,
                           proxy_status=proxystatus.header(*proxystatus.for_connect_error(last)))
        return None, None

    async def _refuse(self, writer, label: str, reason: str, status: str = "403 Forbidden", record: bool = True,
                      proxy_status: str | None = None) -> None:
        if record:
            self.refused.append((label, reason))
        log.info("proxy refused %s: %s", label, reason)
        body = f"{reason}\n".encode()
        extra = f"Proxy-Status: {proxy_status}\r\n" if proxy_status else ""
        writer.write(f"HTTP/1.1 {status}\r\nContent-Type: text/plain\r\nContent-Length: {len(body)}\r\n"
                     f"{extra}Connection: close\r\n\r\n".encode() + body)
        with contextlib.suppress(ConnectionError):
            await writer.drain()

    async def _forward_response(self, c_r, c_w, u_r, u_w, get_url: str | None = None) -> None:
        # Request body (if any) flows up while the response head is read and rewritten.
        up = asyncio.create_task(self._pipe(c_r, u_w))
        try:
            try:
                head = await asyncio.wait_for(u_r.readuntil(b"\r\n\r\n"), IDLE_TIMEOUT_S)
            except (asyncio.IncompleteReadError, ConnectionError, asyncio.TimeoutError) as e:
                # The site hung up or reset before answering: answer the browser ourselves. Left
                # without an answer, Chromium sends the request again at once (a retry on a fresh
                # connection, 13–30 ms after the reset: issue 24 item 2) — a second hit the
                # host's delay never covered; with Proxy-Status it reports its own net error.
                self.last_traffic = time.monotonic()
                await self._refuse(c_w, get_url or "response", f"the site ended the connection: {e!r}",
                                   status="502 Bad Gateway", record=False,
                                   proxy_status=proxystatus.header(*proxystatus.for_response_error(e)))
                return
            lines = head.decode("latin-1").split("\r\n")
            if get_url is not None and _status(lines[0]) >= 400:
                await self._forward_error(head, lines, c_w, u_r, get_url)
                return
            self.last_traffic = time.monotonic()
            c_w.write(_client_head(lines))
            await self._pipe(u_r, c_w, asyncio.current_task())
        finally:
            up.cancel()

    async def _forward_error(self, head: bytes, lines: list[str], c_w, u_r, url: str) -> None:
        """Pass an error answer on and keep its body (:mod:`.errorbodies`): read to its end even
        when the browser hung up after the head (Blink cancels such subresources)."""
        self.error_bodies.expect(url)
        raw: bytearray | None = bytearray(head)
        client_ok, ended = True, False
        self.last_traffic = time.monotonic()
        try:
            c_w.write(_client_head(lines))
            await c_w.drain()
        except ConnectionError:
            client_ok = False
        try:
            while True:
                chunk = await asyncio.wait_for(u_r.read(65536), IDLE_TIMEOUT_S)
                if not chunk:
                    ended = True
                    self._unsent.discard(asyncio.current_task())
                    break
                self.last_traffic = time.monotonic()
                if raw is not None:
                    raw += chunk
                    if len(raw) > ERROR_BODY_CAP:
                        raw = None
                if client_ok:
                    try:
                        c_w.write(chunk)
                        await c_w.drain()
                    except ConnectionError:
                        client_ok = False
                if not client_ok and raw is None:
                    break  # nobody wants the rest
        except (ConnectionError, asyncio.TimeoutError):
            pass
        finally:  # cut short (seal, timeout, too large): no body rather than part of one
            self.error_bodies.finish(url, bytes(raw) if ended and raw is not None else None)
            with contextlib.suppress(Exception):
                if client_ok and c_w.can_write_eof():
                    c_w.write_eof()

    async def _pipe_both(self, c_r, c_w, u_r, u_w, owner: asyncio.Task) -> None:
        a = asyncio.create_task(self._pipe(c_r, u_w))
        b = asyncio.create_task(self._pipe(u_r, c_w, owner, tunnel=True))
        try:
            await asyncio.wait([a, b], return_when=asyncio.FIRST_COMPLETED)
        finally:
            a.cancel()
            b.cancel()

    async def _pipe(self, src: asyncio.StreamReader, dst: asyncio.StreamWriter, site: asyncio.Task | None = None,
                    tunnel: bool = False) -> None:
        """Copy ``src`` to ``dst`` until either ends. ``site``: the connection task when ``src``
        is the site — it stays in :attr:`_unsent` until the site's end is read (plain HTTP: the
        response's end), or, for a TLS tunnel (whose responses it cannot see), while a write to
        the browser waits (the site has more to send than the browser takes)."""
        try:
            while True:
                chunk = await asyncio.wait_for(src.read(65536), IDLE_TIMEOUT_S)
                if not chunk:
                    if site is not None:
                        self._unsent.discard(site)
                    break
                self.last_traffic = time.monotonic()
                dst.write(chunk)
                if tunnel:
                    self._unsent.add(site)
                await dst.drain()
                if tunnel:
                    self._unsent.discard(site)
        except (ConnectionError, asyncio.TimeoutError):
            pass
        finally:
            with contextlib.suppress(Exception):
                if dst.can_write_eof():
                    dst.write_eof()
