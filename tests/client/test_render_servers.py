"""``waggle crawls ID`` shows the hosts that are one server (decision 241)."""

from __future__ import annotations

from ledger.client.render import servers_text


def test_servers_line_names_each_server_and_its_hosts():
    crawl = {"servers": [{"server": "127.0.0.1:8080", "hosts": ["127.0.0.1:8080", "localhost:8080"]}],
             "groupHosts": "address", "delayFactor": 5.0}
    assert servers_text(crawl) == "127.0.0.1:8080: 127.0.0.1:8080, localhost:8080\n(grouped by address; slow-host factor 5)"
    assert servers_text({"servers": [], "groupHosts": "domain", "delayFactor": 0}) == (
        "each host its own (grouped by address and registered domain; slow-host factor 0)")
    assert servers_text({"state": "running"}) is None  # an older ledger says nothing
