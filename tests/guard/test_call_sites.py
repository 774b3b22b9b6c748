"""The guard is applied where the design says: ledger seeds and links, the flow's robots.txt
fetch, the capture server's egress. Each check fails if a call site stops using the guard."""

from __future__ import annotations

from http.server import BaseHTTPRequestHandler

import pytest

from ledger.hostguard import HostRefused
from tests.fixtures.loopback import LoopbackSite


@pytest.fixture
def local_server():
    hits: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802
            hits.append(self.path)
            body = b"User-agent: *\nDisallow: /secret\n"
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *a):
            pass

    with LoopbackSite(Handler, daemon_threads=False) as served:
        yield served.url, hits


def test_ledger_seeds_and_links_go_through_the_guard():
    from ledger.crawl.crawls import parse_seeds
    from ledger.crawl.errors import Refused
    from ledger.crawl.guard import refusal

    assert "loopback" in refusal("http://0x7f.1/", allow_private=False)
    assert refusal("http://0x7f.1/", allow_private=True) is None
    assert refusal("https://example.org/", allow_private=False) is None
    with pytest.raises(Refused) as info:
        parse_seeds(["https://example.org/", "http://169.254.169.254/latest/"], allow_private=False)
    assert info.value.status == 400
    assert "169.254.169.254" in str(info.value) and "link-local" in str(info.value)


def test_flow_robots_fetch_is_guarded(local_server):
    from f.waggle import robots
    from f.waggle.plan_level import robots_transport

    url, hits = local_server
    outcome = robots.fetch_robots(f"{url}/robots.txt", transport=robots_transport(False), log=lambda m: None)
    assert outcome.state == robots.UNREACHABLE and "loopback" in outcome.detail
    assert hits == []  # nothing reached the local server
    opted_out = robots.fetch_robots(f"{url}/robots.txt", transport=robots_transport(True), log=lambda m: None)
    assert opted_out.state == robots.ALLOWED and hits == ["/robots.txt"]


def test_capture_egress_is_guarded():
    from waggle_capture.proxy import checked_addresses

    with pytest.raises(HostRefused):
        checked_addresses("127.0.0.1", 80, allow_private=False)
    with pytest.raises(HostRefused):
        checked_addresses("localhost", 80, allow_private=False)
    with pytest.raises(HostRefused):
        checked_addresses("169.254.169.254", 80, allow_private=True)  # metadata stays refused
    assert checked_addresses("127.0.0.1", 80, allow_private=True) == ["127.0.0.1"]
