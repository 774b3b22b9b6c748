"""``waggle search`` against the real ledger of :func:`search_stack` (dev-header identity)."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from ledger.cli import app

runner = CliRunner()


@pytest.fixture
def as_alice(indexed_stack, monkeypatch, tmp_path):
    """The CLI pointed at the stack's ledger, its requests carrying alice's dev headers (acme)."""
    from ledger.client import api

    real_init = api.LedgerClient.__init__

    def init(self, config, timeout_s=api.DEFAULT_TIMEOUT_S):
        real_init(self, config, timeout_s)
        self._http.headers.update({"X-Waggle-Subject": "alice", "X-Waggle-Organizations": "acme"})

    monkeypatch.setattr(api.LedgerClient, "__init__", init)
    for k, v in {"WAGGLE_API_URL": indexed_stack.url, "WAGGLE_TOKEN": "unused", "COLUMNS": "200",
                 "WAGGLE_STATE_DIR": str(tmp_path)}.items():
        monkeypatch.setenv(k, v)
    return indexed_stack


def test_search_prints_hits_with_snippets_and_the_next_page(as_alice):
    out = runner.invoke(app, ["search", "lighthouse", "--size", "2"], catch_exceptions=False)
    assert out.exit_code == 0, out.output
    assert "The lighthouse keeper" in out.output and "https://harbour.example/keeper" in out.output
    assert "contoso" not in out.output
    assert "more: waggle search lighthouse --page 2" in out.output


def test_search_json_and_crawl_filter(as_alice):
    crawl = as_alice.crawls["b"]
    out = runner.invoke(app, ["search", "lighthouse", "--crawl", crawl, "--json"], catch_exceptions=False)
    assert out.exit_code == 0, out.output
    body = json.loads(out.output)
    assert [h["url"] for h in body["hits"]] == ["https://coast.example/old"] and body["hits"][0]["crawlId"] == crawl


def test_a_bad_query_says_why_without_a_traceback(as_alice):
    out = runner.invoke(app, ["search", "the of and"], catch_exceptions=False)
    assert out.exit_code == 1 and "only stop words" in out.output and "Traceback" not in out.output
    out = runner.invoke(app, ["search", "zzzunknownword"], catch_exceptions=False)
    assert out.exit_code == 0 and "no pages found" in out.output


def test_a_query_may_start_with_a_dash(as_alice):
    """``waggle search -async`` (CLI trial item 4): the query, not typer's "No such option"."""
    for query in ("-museum lighthouse", "-museum", "--museum", "-k"):
        out = runner.invoke(app, ["search", query, "--json"], catch_exceptions=False)
        assert "No such option" not in out.output, (query, out.output)
        if query == "-museum lighthouse":
            assert out.exit_code == 0, out.output
            urls = {h["url"] for h in json.loads(out.output)["hits"]}
            assert "https://harbour.example/keeper" in urls and "https://coast.example/old" not in urls, urls
        else:  # only an exclusion: the ledger's own reason, not a usage error
            assert out.exit_code == 1 and "only excludes" in out.output, (query, out.output)
    out = runner.invoke(app, ["search", "--json", "--", "-museum lighthouse"], catch_exceptions=False)
    assert out.exit_code == 0 and "coast.example" not in out.output, out.output


def test_host_filter_with_a_port_tells_local_sites_apart(as_alice):
    """``--host 127.0.0.1:8631`` (CLI trial item 5): two local sites on different ports, and the
    same host without a port; the index keeps the host name alone, the port is matched in the URL."""
    from tests.search.helpers import html_page, insert_crawl

    crawl = insert_crawl(as_alice.db_url, "acme")
    sites = {"http://127.0.0.1:8631/a": "first", "http://127.0.0.1:8632/b": "second", "http://127.0.0.1/c": "third",
             "http://127.0.0.1:80/d": "fourth"}
    for url, name in sites.items():
        as_alice.admit(f"port-{name}", org="acme", crawl=crawl, url=url, timestamp="2026-09-25T10:00:00Z",
                       body=html_page(url, f"<html><title>{name}</title><body><p>Semaphore quokka notes.</p></body></html>"))
    as_alice.wait_outbox()
    import httpx

    r = httpx.post(f"{as_alice.url}/api/crawls/{crawl}/index", timeout=60,
                   headers={"X-Waggle-Subject": "flow", "X-Waggle-Organizations": "acme"})
    assert r.status_code == 200, r.text

    def found(*args: str) -> set[str]:
        out = runner.invoke(app, ["search", "quokka", "--json", *args], catch_exceptions=False)
        assert out.exit_code == 0, out.output
        return {h["url"] for h in json.loads(out.output)["hits"]}

    assert found("--host", "127.0.0.1:8631") == {"http://127.0.0.1:8631/a"}
    assert found("--host", "127.0.0.1:8632") == {"http://127.0.0.1:8632/b"}
    assert found("--host", "127.0.0.1:80") == {"http://127.0.0.1/c", "http://127.0.0.1:80/d"}  # the default port
    assert found("--host", "127.0.0.1:8633") == set()
    assert found("--host", "127.0.0.1") == set(sites)  # no port: every port of the host
    out = runner.invoke(app, ["search", "quokka", "--host", "http://127.0.0.1:8631/"], catch_exceptions=False)
    assert out.exit_code == 1 and "host:port" in out.output and "Traceback" not in out.output
    out = runner.invoke(app, ["search", "quokka", "--host", "127.0.0.1:70000"], catch_exceptions=False)
    assert out.exit_code == 1 and "1–65535" in out.output
