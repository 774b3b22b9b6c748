"""The guarded httpx transport against real loopback servers.

Names are resolved by an injected resolver and "public" addresses are routed to a loopback
server by a recording inner backend, so no packet leaves 127.0.0.1 while the guard sees the
addresses a real resolver would give. The "private" server stands for an internal service:
its hit counter must stay at zero whenever the guard is on.
"""

from __future__ import annotations

import asyncio
import socket
from http.server import BaseHTTPRequestHandler
from urllib.parse import parse_qs, urlsplit

import httpcore
import httpx
import pytest

from ledger import hostguard
from ledger.hostguard import HostRefused, guarded_transport
from tests.fixtures.loopback import LoopbackSite

PUBLIC_IP = "93.184.216.34"  # stands for a public site; routed to the loopback "public" server


class _Server:
    def __init__(self, body: bytes):
        self.hits = 0
        self.hosts: list[str] = []
        server_self = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, so connection reuse is observable

            def do_GET(self):  # noqa: N802
                server_self.hits += 1
                server_self.hosts.append(self.headers.get("Host", ""))
                query = parse_qs(urlsplit(self.path).query)
                if "to" in query:
                    self.send_response(302)
                    self.send_header("Location", query["to"][0])
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self._site = LoopbackSite(Handler, daemon_threads=False)
        self.port = self._site.port

    def close(self):
        self._site.stop()


@pytest.fixture(scope="module")
def servers():
    public, private = _Server(b"public page"), _Server(b"private secret")
    yield public, private
    public.close()
    private.close()


@pytest.fixture
def reset(servers):
    for s in servers:
        s.hits = 0
        s.hosts.clear()
    return servers


class Routing(httpcore.SyncBackend):
    """Inner backend: records every address it is asked to connect to; PUBLIC_IP → public server."""

    def __init__(self, public_port: int):
        self.public_port = public_port
        self.connects: list[tuple[str, int]] = []

    def connect_tcp(self, host, port, timeout=None, local_address=None, socket_options=None):
        self.connects.append((host, port))
        if host == PUBLIC_IP:
            host, port = "127.0.0.1", self.public_port
        return super().connect_tcp(host, port, timeout, local_address, socket_options)


class AsyncRouting(httpcore.AnyIOBackend):
    def __init__(self, public_port: int):
        self.public_port = public_port
        self.connects: list[tuple[str, int]] = []

    async def connect_tcp(self, host, port, timeout=None, local_address=None, socket_options=None):
        self.connects.append((host, port))
        if host == PUBLIC_IP:
            host, port = "127.0.0.1", self.public_port
        return await super().connect_tcp(host, port, timeout, local_address, socket_options)


class Resolver:
    """Answers from a script per name; counts calls. The last answer repeats."""

    def __init__(self, script: dict[str, list[list[str]]]):
        self.script = script
        self.calls: list[str] = []

    def __call__(self, host: str, port: int) -> list[str]:
        self.calls.append(host)
        answers = self.script[host]
        return answers.pop(0) if len(answers) > 1 else answers[0]


def _client(resolver, inner, *, allow_private=False, asynchronous=False):
    transport = guarded_transport(
        allow_private, asynchronous=asynchronous, resolver=resolver, inner=inner
    )
    cls = httpx.AsyncClient if asynchronous else httpx.Client
    return cls(transport=transport, follow_redirects=True, timeout=5)


def _get(url, resolver, inner, *, allow_private=False, asynchronous=False):
    """One request with a fresh client (so one fresh connection) in the chosen mode."""
    if asynchronous:
        async def run():
            async with _client(resolver, inner, allow_private=allow_private, asynchronous=True) as c:
                return await c.get(url)

        return asyncio.run(run())
    with _client(resolver, inner, allow_private=allow_private) as c:
        return c.get(url)


MODES = [pytest.param(False, id="sync"), pytest.param(True, id="async")]


def _inner(asynchronous, port):
    return AsyncRouting(port) if asynchronous else Routing(port)


@pytest.mark.parametrize("asynchronous", MODES)
def test_connects_to_the_checked_address_and_keeps_the_host_name(reset, asynchronous):
    public, private = reset
    resolver = Resolver({"site.example": [[PUBLIC_IP]]})
    inner = _inner(asynchronous, public.port)
    r = _get(f"http://site.example:{private.port}/page", resolver, inner, asynchronous=asynchronous)
    assert r.status_code == 200 and r.content == b"public page"
    assert inner.connects == [(PUBLIC_IP, private.port)]
    assert resolver.calls == ["site.example"]  # resolved exactly once
    assert public.hosts == [f"site.example:{private.port}"]  # Host header stays the name
    assert private.hits == 0


@pytest.mark.parametrize("asynchronous", MODES)
def test_dns_rebinding_never_reaches_the_private_address(reset, asynchronous):
    """First answer public (passes the check), every later answer 127.0.0.1."""
    public, private = reset
    url = f"http://rebind.example:{private.port}/"
    resolver = Resolver({"rebind.example": [[PUBLIC_IP], ["127.0.0.1"]]})
    inner = _inner(asynchronous, public.port)
    first = _get(url, resolver, inner, asynchronous=asynchronous)
    assert first.content == b"public page"
    with pytest.raises(HostRefused) as info:
        _get(url, resolver, inner, asynchronous=asynchronous)
    assert "loopback" in info.value.reason
    assert resolver.calls == ["rebind.example", "rebind.example"]  # one lookup per connection
    assert inner.connects == [(PUBLIC_IP, private.port)]  # never 127.0.0.1
    assert private.hits == 0


def test_rebinding_control_without_the_guard_reaches_the_private_server(reset):
    """Negative control: with the opt-out the same answers do reach the private server."""
    public, private = reset
    url = f"http://rebind.example:{private.port}/"
    resolver = Resolver({"rebind.example": [[PUBLIC_IP], ["127.0.0.1"]]})
    inner = Routing(public.port)
    _get(url, resolver, inner, allow_private=True)
    assert _get(url, resolver, inner, allow_private=True).content == b"private secret"
    assert private.hits == 1


@pytest.mark.parametrize("asynchronous", MODES)
def test_an_answer_with_one_private_address_is_refused_before_connecting(reset, asynchronous):
    public, private = reset
    resolver = Resolver({"mixed.example": [[PUBLIC_IP, "10.0.0.5"]]})
    inner = _inner(asynchronous, public.port)
    with pytest.raises(HostRefused) as info:
        _get(f"http://mixed.example:{public.port}/", resolver, inner, asynchronous=asynchronous)
    assert "RFC 1918" in info.value.reason
    assert inner.connects == [] and public.hits == 0


REDIRECT_TARGETS = [
    ("http://internal.example:{p}/", "RFC 1918"),  # resolver → 10.0.0.7
    ("http://127.0.0.1:{p}/", "loopback"),
    ("http://2130706433:{p}/", "loopback"),
    ("http://0x7f.1:{p}/", "loopback"),
    ("http://[::ffff:127.0.0.1]:{p}/", "loopback"),
    ("http://localhost:{p}/", "internal host name"),
    ("http://metadata.google.internal/", "internal host name"),
    ("http://169.254.169.254/latest/meta-data/", "link-local"),
]


@pytest.mark.parametrize("asynchronous", MODES)
@pytest.mark.parametrize(("target", "reason"), REDIRECT_TARGETS)
def test_every_redirect_hop_is_checked(reset, asynchronous, target, reason):
    public, private = reset
    resolver = Resolver({"site.example": [[PUBLIC_IP]], "internal.example": [["10.0.0.7"]]})
    inner = _inner(asynchronous, public.port)
    to = target.format(p=private.port)
    with pytest.raises(HostRefused) as info:
        _get(f"http://site.example/r?to={to}", resolver, inner, asynchronous=asynchronous)
    assert reason in info.value.reason
    assert public.hits == 1 and private.hits == 0
    assert all(host == PUBLIC_IP for host, _ in inner.connects)


@pytest.mark.parametrize("asynchronous", MODES)
def test_redirect_to_a_public_host_is_followed(reset, asynchronous):
    public, private = reset
    resolver = Resolver({"site.example": [[PUBLIC_IP]], "other.example": [[PUBLIC_IP]]})
    inner = _inner(asynchronous, public.port)
    r = _get("http://site.example/r?to=http://other.example/x", resolver, inner, asynchronous=asynchronous)
    assert r.content == b"public page" and len(r.history) == 1
    assert public.hosts == ["site.example", "other.example"]
    assert resolver.calls == ["site.example", "other.example"]


def test_redirect_to_a_local_file_reads_nothing(reset):
    """Case C11: robots.txt answering 302 file:///etc/hostname."""
    public, _ = reset
    resolver = Resolver({"site.example": [[PUBLIC_IP]]})
    with pytest.raises((HostRefused, httpx.HTTPError)) as info:
        _get("http://site.example/robots.txt?to=file:///etc/hostname", resolver, Routing(public.port))
    assert socket.gethostname() not in str(info.value)


def test_literal_loopback_and_names_refused_with_the_system_resolver(reset):
    _, private = reset
    for url in (f"http://127.0.0.1:{private.port}/", f"http://localhost:{private.port}/",
                f"http://[::1]:{private.port}/"):
        with pytest.raises(HostRefused):
            with httpx.Client(transport=guarded_transport()) as c:
                c.get(url)
    assert private.hits == 0


def test_opt_out_reaches_local_servers(reset):
    _, private = reset
    with httpx.Client(transport=guarded_transport(allow_private=True)) as c:
        assert c.get(f"http://127.0.0.1:{private.port}/").content == b"private secret"
    assert private.hits == 1


def test_dns_failure_is_a_connect_error(reset):
    def fail(host, port):
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    with pytest.raises(httpx.ConnectError):
        _get("http://nowhere.example/", fail, Routing(0))


def test_keep_alive_reuses_the_checked_connection(reset):
    public, _ = reset
    resolver = Resolver({"site.example": [[PUBLIC_IP], ["127.0.0.1"]]})
    inner = Routing(public.port)
    with _client(resolver, inner) as c:
        for _ in range(3):
            assert c.get("http://site.example/").content == b"public page"
    assert resolver.calls == ["site.example"] and len(inner.connects) == 1


def test_unix_sockets_refused():
    with pytest.raises(HostRefused):
        hostguard.GuardedBackend().connect_unix_socket("/tmp/x.sock")


def test_environment_proxies_are_not_used(reset, monkeypatch):
    public, _ = reset
    monkeypatch.setenv("HTTP_PROXY", "http://10.9.9.9:3128")
    monkeypatch.setenv("ALL_PROXY", "http://10.9.9.9:3128")
    resolver = Resolver({"site.example": [[PUBLIC_IP]]})
    inner = Routing(public.port)
    assert _get("http://site.example/", resolver, inner).content == b"public page"
    assert inner.connects == [(PUBLIC_IP, 80)]
