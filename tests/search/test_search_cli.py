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
