"""tests/fixtures/loopback.py: one loopback HTTP site for every test that serves its own pages."""

from __future__ import annotations

import socket
import time
from http.server import BaseHTTPRequestHandler

import httpx
import pytest

from tests.fixtures.loopback import LoopbackSite


class _Echo(BaseHTTPRequestHandler):
    def log_message(self, *args) -> None:
        pass

    def do_GET(self) -> None:  # noqa: N802
        body = self.path.encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def _refused(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) != 0


def test_a_site_serves_on_loopback_until_stopped():
    with LoopbackSite(_Echo) as site:
        assert site.url == f"http://127.0.0.1:{site.port}" and site.port > 0
        assert httpx.get(site.url + "/a?b=1").text == "/a?b=1"
    assert _refused(site.port)
    site.stop()  # a second stop does nothing


def test_stop_does_not_wait_out_the_standard_half_second_poll():
    site = LoopbackSite(_Echo)
    started = time.monotonic()
    site.stop()
    assert time.monotonic() - started < 0.4  # serve_forever's own default would take up to 0.5 s


def test_a_given_port_is_bound_again():
    first = LoopbackSite(_Echo)
    port = first.port
    first.stop()
    with LoopbackSite(_Echo, port=port) as again:
        assert again.port == port and httpx.get(f"{again.url}/x").text == "/x"


def test_a_subclass_is_its_own_site():
    class Named(LoopbackSite):
        def __init__(self) -> None:
            self.name = "named"
            super().__init__(_Echo)

    with Named() as site:
        assert site.name == "named" and httpx.get(site.url + "/n").status_code == 200


@pytest.fixture
def closed_after() -> list[int]:
    """Ports that must refuse connections once the test's fixtures are torn down. Requested
    before ``loopback``, so it is torn down after it."""
    ports: list[int] = []
    yield ports
    assert ports and all(_refused(p) for p in ports)


def test_the_fixture_stops_every_site_after_the_test(closed_after, loopback):
    sites = [loopback(_Echo) for _ in range(2)]
    assert all(httpx.get(s.url + "/").status_code == 200 for s in sites)
    closed_after.extend(s.port for s in sites)
    sites[0].stop()  # stopping one early is fine: the teardown's stop of it does nothing
    assert _refused(sites[0].port) and not _refused(sites[1].port)
