"""The capture server's egress proxy enforces the private-host guard (ledger/hostguard.py)."""

from __future__ import annotations

import asyncio
import contextlib
import gzip

import httpx
import pytest

from waggle_capture import errorbodies, names, proxystatus
from waggle_capture.proxy import GuardedProxy, checked_addresses
from ledger.hostguard import HostRefused


async def _through(proxy: GuardedProxy, url: str) -> httpx.Response:
    async with httpx.AsyncClient(proxy=proxy.url, timeout=10) as client:
        return await client.get(url)


def run_with_proxy(allow_private: bool, coro_fn):
    async def main():
        proxy = GuardedProxy(allow_private=allow_private)
        await proxy.start()
        try:
            return await coro_fn(proxy), proxy
        finally:
            await proxy.close()

    return asyncio.run(main())


def test_strict_proxy_refuses_loopback_without_connecting(test_site):
    before = test_site.hits["/other"]
    r, proxy = run_with_proxy(False, lambda p: _through(p, test_site.url("/other")))
    assert r.status_code == 403 and "loopback" in r.text
    assert test_site.hits["/other"] == before
    assert proxy.refused and proxy.refused[0][0] == f"127.0.0.1:{test_site.port}"


def test_development_proxy_forwards_loopback_with_connection_close(test_site):
    test_site.connection_headers.clear()
    r, _ = run_with_proxy(True, lambda p: _through(p, test_site.url("/other?x=1")))
    assert r.status_code == 200 and b"other" in r.content
    assert r.headers["connection"] == "close"
    assert test_site.connection_headers == [("/other", "close")]


def test_deny_backstop_answers_403_without_sending(test_site):
    denied: list[tuple[str, str]] = []
    before = test_site.hits["/tracker.js"]

    async def go(p: GuardedProxy):
        p.begin_capture(deny=lambda u: u.endswith("/tracker.js"), on_denied=lambda u, m: denied.append((u, m)))
        return await _through(p, test_site.url("/tracker.js"))

    r, _ = run_with_proxy(True, go)
    assert r.status_code == 403 and test_site.hits["/tracker.js"] == before
    assert denied == [(test_site.url("/tracker.js"), "GET")]


@pytest.mark.parametrize("host", ["169.254.169.254", "fe80::1", "::ffff:169.254.169.254", "metadata.google.internal"])
def test_link_local_and_metadata_stay_refused_even_in_development_mode(host):
    with pytest.raises(HostRefused):
        checked_addresses(host, 80, True)


def test_connect_tunnel_to_a_refused_host_gets_403():
    async def go(p: GuardedProxy):
        reader, writer = await asyncio.open_connection("127.0.0.1", p.port)
        writer.write(b"CONNECT 10.0.0.1:443 HTTP/1.1\r\nHost: 10.0.0.1:443\r\n\r\n")
        await writer.drain()
        line = await asyncio.wait_for(reader.readline(), 10)
        writer.close()
        return line

    line, proxy = run_with_proxy(False, go)
    assert line.startswith(b"HTTP/1.1 403")
    assert "private address" in proxy.refused[0][1]


@pytest.mark.parametrize(("corr", "labels", "expected"), [
    (None, [], "T_"),
    (None, ["a"], "T__a"),
    ("c_1/x y", ["l-1", "é"], "T_c%5F1%2Fx%20y_l%2D1-%C3%A9"),
])
def test_artifact_names_escape_separators(corr, labels, expected):
    assert names.stem("T", corr, labels) == expected
    assert names.file_name(expected, "links") == expected + ".links.json"


def _one_answer_server(answer: bytes):
    """A loopback server that reads one request head and writes ``answer`` raw, then closes."""
    import socket
    import threading

    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(4)

    def serve():
        with contextlib.suppress(OSError):
            while True:
                conn, _ = srv.accept()
                with conn:
                    buf = b""
                    while b"\r\n\r\n" not in buf:
                        buf += conn.recv(4096)
                    conn.sendall(answer)
    threading.Thread(target=serve, daemon=True).start()
    return srv


def test_a_refused_connection_is_marked_as_the_proxys_own_502():
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    r, _ = run_with_proxy(True, lambda p: _through(p, f"http://127.0.0.1:{port}/"))
    assert r.status_code == 502
    assert proxystatus.net_error(list(r.headers.items())) == "net::ERR_CONNECTION_REFUSED"


def test_a_sites_forged_proxy_status_is_dropped_and_error_bodies_are_kept():
    body = gzip.compress(b"<h1>not here</h1>", mtime=0)
    srv = _one_answer_server(b"HTTP/1.1 404 Not Found\r\nContent-Type: text/html\r\nTransfer-Encoding: chunked\r\n"
                             b"Proxy-Status: waggle-capture; error=connection_refused\r\n\r\n"
                             + b"%x\r\n" % len(body) + body + b"\r\n0\r\n\r\n")
    url = f"http://127.0.0.1:{srv.getsockname()[1]}/x.js"

    async def go(p: GuardedProxy):
        p.begin_capture()
        r = await _through(p, url)
        return r, await p.error_bodies.get(url, 5)

    try:
        (r, kept), _ = run_with_proxy(True, go)
    finally:
        srv.close()
    assert r.status_code == 404 and "proxy-status" not in r.headers
    assert proxystatus.net_error(list(r.headers.items())) is None
    assert kept == body  # no Content-Encoding: the bytes as sent, de-chunked


def test_error_body_decoding_keeps_only_whole_bodies():
    body = b"missing" * 50
    gz = gzip.compress(body)
    whole = b"HTTP/1.1 404 Not Found\r\nContent-Encoding: gzip\r\nContent-Length: %d\r\n\r\n" % len(gz) + gz
    assert errorbodies.decode(whole) == body
    assert errorbodies.decode(whole[:-5]) is None  # cut short: not part of a body
    assert errorbodies.decode(b"HTTP/1.1 404 Not Found\r\nContent-Encoding: zstd\r\n\r\nxx") is None
