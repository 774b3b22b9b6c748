"""The CLI shows blocked hosts (decision 231): the summary's pages blocked and blocked-hosts
table, the status line's count, ``--pages --state blocked``."""

from __future__ import annotations

import io

from rich.console import Console

from ledger.client import render
from ledger.client.cli import PageState

CRAWL = {"crawlId": "ad7cac4d-0000-4000-8000-000000000000", "state": "succeeded", "pagesBlocked": 4,
         "blockedHosts": [{"host": "shop.test", "depth": 1, "pages": 4,
                           "reason": "challenge page: Cloudflare (cloudflare-challenge), HTTP 403"}]}


def _text(renderable) -> str:
    out = io.StringIO()
    Console(file=out, width=200, highlight=False).print(renderable)
    return out.getvalue()


def test_the_summary_lists_blocked_hosts_with_their_reason():
    text = _text(render.summary_view(CRAWL))
    assert "pages blocked" in text and "blocked hosts (paused for the rest of the crawl)" in text
    assert "shop.test" in text and "challenge page: Cloudflare (cloudflare-challenge), HTTP 403" in text


def test_nothing_blocked_shows_nothing():
    text = _text(render.summary_view({**CRAWL, "pagesBlocked": 0, "blockedHosts": []}))
    assert "blocked" not in text
    assert "blocked" not in render.status_line({**CRAWL, "pagesBlocked": 0})


def test_the_status_line_counts_blocked_pages():
    assert " · blocked 4 · " in render.status_line(CRAWL)


def test_pages_can_be_listed_by_the_blocked_state():
    assert PageState("blocked").value == "blocked"
    assert render.STATE_STYLES["blocked"]


def test_the_pages_table_says_how_many_links_could_be_taken():
    """Decision 232: "discovered 1000" says how many were kept and why not the rest."""
    page = {"url": "http://a.test/", "depth": 0, "state": "captured",
            "links": {"discovered": 1000, "kept": 4, "dropped": {"links_overflow": 400, "max_pages": 593,
                                                                 "duplicate": 1, "out_of_scope": 1, "url_too_long": 1}}}
    text = _text(render.pages_table([page, {"url": "http://a.test/x", "depth": 1, "state": "pending", "links": None}]))
    assert ("links 4 kept of 1,000 (not taken: max_pages 593, links_overflow 400, duplicate 1, out_of_scope 1,"
            " url_too_long 1)") in text
    assert text.count("kept of") == 1
