"""``waggle crawl`` shows captures as they finish (issue 15): the ledger's ``levelProgress``
rendered live, one line per change when not on a terminal."""

from __future__ import annotations

import io

from rich.console import Console

from ledger.client import render
from ledger.client.follow import follow


def _view(done: int, capturing: list[tuple[str, str]], state: str = "running") -> dict:
    return {"crawlId": "c1", "state": state, "currentDepth": 1, "pagesCaptured": 1, "hostsInFlight": ["a.test", "b.test"],
            "levelProgress": {"depth": 1, "planned": 28, "done": done, "captured": done, "failed": 0,
                              "capturing": [{"host": h, "url": u, "since": "2026-12-01T04:00:00.000Z"}
                                            for h, u in capturing]}}


class Ledger:
    def __init__(self, views: list[dict]):
        self.views = views

    def get_crawl(self, crawl_id: str) -> dict:
        return self.views.pop(0) if len(self.views) > 1 else self.views[0]


def test_each_finished_capture_prints_a_line_with_pages_and_browsers():
    views = [_view(0, [("a.test", "https://a.test/1"), ("b.test", "https://b.test/1")]),
             _view(0, [("a.test", "https://a.test/1"), ("b.test", "https://b.test/1")]),  # no change: no line
             _view(1, [("b.test", "https://b.test/1")]),
             _view(2, [("a.test", "https://a.test/2"), ("b.test", "https://b.test/2")]),
             {**_view(28, []), "state": "succeeded", "levelProgress": None}]
    out = io.StringIO()
    follow(Ledger(views), "c1", Console(file=out, width=80, force_terminal=False), poll_s=0, sleep=lambda _s: None)
    lines = [ln for ln in out.getvalue().splitlines() if ln.startswith("crawl c1")]
    assert [ln.split(" · elapsed")[0].split("hosts in flight 2")[-1] for ln in lines[:3]] == [
        " · level 0/28 pages · capturing https://a.test/1, https://b.test/1",
        " · level 1/28 pages · capturing https://b.test/1",
        " · level 2/28 pages · capturing https://a.test/2, https://b.test/2"]
    assert "succeeded" in lines[-1] and len(lines) == 4


def test_the_live_panel_names_the_level_and_each_running_capture():
    out = io.StringIO()
    Console(file=out, width=100).print(render.progress_view(_view(12, [("a.test", "https://a.test/x")])))
    text = out.getvalue()
    assert "12/28 pages (captured 12, failed 0)" in text and "a.test (https://a.test/x)" in text


def test_a_ledger_without_level_progress_renders_as_before():
    view = {"crawlId": "c1", "state": "running", "hostsInFlight": ["a.test"]}
    assert "pages" not in render.status_line(view).split("hosts in flight")[1]


def test_queued_and_finishing_captures_are_shown_apart():
    """Decision 401: a page held behind its host's loading page is "queued" and a sealed one
    "finishing" — neither is listed as capturing beside the page the site is being asked for."""
    view = _view(3, [("a.test", "https://a.test/2")])
    view["levelProgress"].update(
        finishing=[{"host": "a.test", "url": "https://a.test/1", "since": "2026-12-01T04:00:00.000Z"}],
        queued=[{"host": "a.test", "url": "https://a.test/3", "since": "2026-12-01T04:00:01.000Z"}])
    line = render.status_line(view)
    assert " · capturing https://a.test/2 · finishing https://a.test/1 · queued https://a.test/3 · " in line, line
    out = io.StringIO()
    Console(file=out, width=100).print(render.progress_view(view))
    rows = {ln.split("  ")[0].strip(): ln for ln in out.getvalue().splitlines() if ln.strip()}
    assert "a.test (https://a.test/2)" in rows["capturing now"] and "/3" not in rows["capturing now"]
    assert "a.test (https://a.test/1)" in rows["finishing"] and "a.test (https://a.test/3)" in rows["queued"]
    calm = _view(3, [("a.test", "https://a.test/2")])  # an older ledger: no such lists, no such rows
    out = io.StringIO()
    Console(file=out, width=100).print(render.progress_view(calm))
    assert "queued" not in out.getvalue() and "finishing" not in out.getvalue()
    assert "queued" not in render.status_line(calm)


def test_captured_counts_the_level_in_flight_as_the_web_page_does():
    """pagesCaptured moves when a level reports; the live line and panel add the level in
    flight's captures (the trial saw "captured 1" beside "level 17/19 pages")."""
    view = _view(4, [("a.test", "https://a.test/5")])  # 1 reported + 4 of the level in flight
    assert " · captured 5 (4 in the level in flight) · " in render.status_line(view)
    out = io.StringIO()
    Console(file=out, width=120, force_terminal=False).print(render.progress_view(view))
    assert "5 (4 in the level in flight)" in out.getvalue()
    done = {**_view(4, []), "state": "succeeded", "pagesCaptured": 5}
    assert " · captured 5 · " in render.status_line(done)  # a finished crawl: the reported count alone
