"""The capture server's egress proxy enforces the private-host guard (ledger/hostguard.py)."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from devstack.capture import names
from devstack.capture.proxy import GuardedProxy, checked_addresses
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
