"""``waggle crawl`` / ``waggle crawls ID`` say why a running crawl waits (the ledger's
``waiting``): in the plain status line and the live panel; a ledger that does not send it
renders as before."""

from __future__ import annotations

import io

from rich.console import Console

from ledger.client import render

TURN = {"host": "s.test", "kind": "turn", "crawlId": "0193b6a1-3c1d-7a2e-9f00-1234567890ab",
        "reason": "s.test: waiting for crawl 0193b6a1's turn (its level 0 holds the host)"}
GAP = {"host": "t.test", "kind": "delay", "until": "2026-12-01T04:00:03.000Z", "delayMs": 3000,
       "reason": "t.test: waiting Crawl-delay 3 s (robots.txt) until 2026-12-01T04:00:03.000Z"}


def _view(waiting):
    return {"crawlId": "c1", "state": "running", "currentDepth": 0, "hostsInFlight": ["s.test", "t.test"],
            "levelProgress": {"depth": 0, "planned": 11, "done": 0, "captured": 0, "failed": 0, "capturing": []},
            **({"waiting": waiting} if waiting is not None else {})}


def test_the_status_line_gives_each_waiting_hosts_reason():
    line = render.status_line(_view([TURN, GAP]))
    assert f"· waiting: {TURN['reason']}; {GAP['reason']} ·" in line


def test_the_live_panel_has_a_waiting_row():
    out = io.StringIO()
    Console(file=out, width=200).print(render.progress_view(_view([TURN])))
    assert "waiting" in out.getvalue() and "waiting for crawl 0193b6a1's turn" in out.getvalue()


def test_the_summary_of_a_running_crawl_says_why_it_waits():
    out = io.StringIO()
    Console(file=out, width=200).print(render.summary_view(_view([TURN, GAP])))
    assert TURN["reason"] in out.getvalue() and GAP["reason"] in out.getvalue()


def test_many_waiting_hosts_are_cut_and_counted_and_none_says_nothing():
    many = [{**GAP, "reason": f"h{i}.test: waiting"} for i in range(7)]
    assert render.waiting(_view(many)).endswith("h3.test: waiting (+3 more)")
    assert "waiting" not in render.status_line(_view([])) and "waiting" not in render.status_line(_view(None))
