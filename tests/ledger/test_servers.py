"""Politeness per server (decision 241): server keys, grouping, the test resolver (pure), and over
the app (real Postgres, fake webhook): two hostnames on one loopback address are one lease and one
gap across crawls, and their frontier items carry one ``server``."""

from __future__ import annotations

import asyncio

import psycopg
import pytest

from ledger.crawl import servers
from tests.fixtures.ledger import LedgerHarness, ledger_settings, open_ledger

WHO = LedgerHarness.who()
NO_SCRIPTS = {"typescript": "6.0.3", "hostTypes": "v0.2.0", "scripts": []}
TWO_NAMES = "a.test=127.0.0.1,b.test=127.0.0.1,e.test=127.0.0.1,c.test=127.0.0.2,*=-"


def test_keys_carry_the_address_and_the_hosts_explicit_port():
    assert servers.address_keys("localhost:8080", ["127.0.0.1", "::1"]) == ["@a:127.0.0.1:8080", "@a:::1:8080"]
    assert servers.address_keys("a.test", ["127.0.0.1"]) == ["@a:127.0.0.1"]
    assert servers.address_keys("a.test:81", ["0x7f.1", "127.0.0.1"]) == ["@a:127.0.0.1:81"]  # not an IP: ignored
    assert servers.keys_for("www.example.co.uk", ["127.0.0.1"], "domain") == ["@a:127.0.0.1", "@d:example.co.uk"]
    assert servers.keys_for("www.example.co.uk", ["127.0.0.1"], "address") == ["@a:127.0.0.1"]
    assert servers.keys_for("a.github.io", [], "domain") == ["@d:a.github.io"]  # a private suffix: its own
    assert servers.domain_key("127.0.0.1:8080") is None


def test_hosts_sharing_any_key_are_one_server_transitively():
    labels = servers.server_labels({
        "a.test": ["@a:127.0.0.1"], "b.test": ["@a:127.0.0.1", "@a:127.0.0.2"], "c.test": ["@a:127.0.0.2"],
        "d.test": ["@a:127.0.0.3"], "e.test": [], "x.example.com": ["@d:example.com"],
        "y.example.com": ["@a:127.0.0.9", "@d:example.com"],
    })
    assert labels == {"a.test": "127.0.0.1", "b.test": "127.0.0.1", "c.test": "127.0.0.1",
                      "x.example.com": "127.0.0.9", "y.example.com": "127.0.0.9"}


def test_test_resolver_only_gives_what_it_lists_and_never_looks_up():
    resolve = servers.resolver(TWO_NAMES)
    got = asyncio.run(servers.resolve_hosts(["a.test:8000", "b.test", "other.org", "127.0.0.1:9", "localhost:1"], resolve))
    assert got == {"a.test:8000": ["127.0.0.1"], "b.test": ["127.0.0.1"], "other.org": [],
                   "127.0.0.1:9": ["127.0.0.1"], "localhost:1": ["127.0.0.1", "::1"]}
    plain = servers.resolver(None)  # special-use names are never sent to a resolver
    assert asyncio.run(plain("s.test")) == [] and asyncio.run(plain("x.invalid")) == []
    for bad in ("a.test", "a.test=localhost", "=127.0.0.1"):
        with pytest.raises(ValueError, match="WAGGLE_RESOLVE_HOSTS"):
            servers.parse_mapping(bad)


def rows(db_url, sql, *args):
    with psycopg.connect(db_url) as conn:
        return conn.execute(sql, args).fetchall()


@pytest.fixture
def settings(migrated_db_url, ledger_fga, fake_webhook):
    return ledger_settings(migrated_db_url, ledger_fga, fake_webhook.url, resolve_hosts=TWO_NAMES)


async def start(h, seeds, delay_ms, **more):
    r = await h.client.post("/api/crawls", json={"seeds": seeds, "scripts": [], "perHostDelayMs": delay_ms,
                                                 "maxDepth": 1, **more}, headers=WHO)
    assert r.status_code == 202, r.text
    return r.json()["crawlId"]


def captured(url, finished):
    return {"url": url, "status": "captured", "submittedAt": "2026-09-19T14:53:30.000Z", "finishedAt": finished}


@pytest.mark.anyio
async def test_one_server_one_lease_one_gap_across_crawls(settings, fake_webhook):
    async with open_ledger(settings) as h:
        a = await start(h, ["https://a.test/", "https://b.test/", "https://c.test/"], 3000)
        sent = fake_webhook.bodies(a)[-1]
        assert {f["host"]: f.get("server") for f in sent["frontier"]} == {
            "a.test": "127.0.0.1", "b.test": "127.0.0.1", "c.test": None}
        assert sent["delay_factor"] == 5.0
        view = (await h.client.get(f"/api/crawls/{a}", headers=WHO)).json()
        assert view["servers"] == [{"server": "127.0.0.1", "hosts": ["a.test", "b.test"]}]
        assert view["groupHosts"] == "address" and view["delayFactor"] == 5.0
        # another crawl on a *different hostname* of the same server waits for it
        b = await start(h, ["https://e.test/x", "https://d.test/"], 500, delayFactor=2)
        assert [f["host"] for f in fake_webhook.bodies(b)[-1]["frontier"]] == ["d.test"]
        assert fake_webhook.bodies(b)[-1]["delay_factor"] == 2.0
        assert rows(settings.database_url, "SELECT level FROM crawl_pages WHERE url = 'https://e.test/x'") == [(1,)]
        waits = (await h.client.get(f"/api/crawls/{b}", headers=WHO)).json()["waiting"]
        assert [w["reason"] for w in waits if w["host"] == "e.test"] == [
            f"e.test: waiting for crawl {a[:8]}'s turn (its level 0 holds another name of this host's server)"]
        # a reports a capture on a.test only: e.test's (the server's) gap runs from it, with a's delay
        r = await h.client.post(f"/api/crawls/{a}/pages", headers=WHO, json={
            "depth": 0, "compiled": NO_SCRIPTS, "results": [captured("https://a.test/", "2026-09-19T14:53:41.000Z")]})
        assert r.status_code == 200, r.text
        r = await h.client.post(f"/api/crawls/{b}/pages", headers=WHO, json={
            "depth": 0, "compiled": NO_SCRIPTS, "results": [captured("https://d.test/", "2026-09-19T14:53:42.000Z")]})
        assert r.status_code == 200, r.text
        item = fake_webhook.bodies(b)[-1]["frontier"]
        assert item == [{"url": "https://e.test/x", "host": "e.test", "lastFinishedAt": "2026-09-19T14:53:41.000Z",
                         "hostDelayMs": 3000}]
    assert rows(settings.database_url, "SELECT host FROM hosts WHERE host LIKE '@%%' ORDER BY host") == [
        ("@a:127.0.0.1",), ("@d:a.test",), ("@d:d.test",)]


@pytest.mark.anyio
async def test_group_by_domain_and_bad_values_are_refused(settings, fake_webhook):
    async with open_ledger(settings) as h:
        a = await start(h, ["https://x.example.test/", "https://y.example.test/"], 1000, groupHosts="domain")
        assert {f.get("server") for f in fake_webhook.bodies(a)[-1]["frontier"]} == {"example.test"}
        for body in ({"groupHosts": "ip"}, {"delayFactor": -1}, {"delayFactor": 61}, {"delayFactor": "5"}):
            r = await h.client.post("/api/crawls", json={"seeds": ["https://e.test/"], **body}, headers=WHO)
            assert r.status_code == 400, (body, r.text)
