"""A capture held behind the host's loading page is ``queued``, not capturing (decision 401).

The capture server keeps a held capture (extension ``holdAfter``) from the site until the page it
waits for sealed and the gap passed; the live progress line listed it as "capturing" from its
submission on, beside that page — two captures of one host at once, which the site never saw.
crawl_host now sends ``queued`` at the held submission and ``started`` only once the page before
it sealed. An older ledger that refuses the phase gets ``started`` as before. Real timers against
the in-process holding server of tests/flow/test_pipeline.py; real HTTP on 127.0.0.1."""

from __future__ import annotations

import threading
import time

from f.waggle.progress import LINGER_S, poster
from tests.flow.fakes import HttpFake
from tests.flow.test_pipeline import SEAL_S, HoldingFake, Visit, crawl
from tests.flow.test_progress import _vars
from tests.flow.test_progress_sealed import _phases_known

URLS = ["a", "b", "c", "d"]


def _held_run(delay_ms: int) -> tuple[list[dict], list[tuple[float, str, str]], list[Visit], HoldingFake]:
    visits: list[Visit] = []
    events: list[tuple[float, str, str]] = []
    lock = threading.Lock()

    def on_page(url: str, phase: str, result: dict | None = None) -> None:
        with lock:
            events.append((time.monotonic(), url, phase))

    server = HoldingFake("bh-1", visits)
    results, _ = crawl([server], URLS, delay_ms, on_page=on_page)
    return results, events, visits, server


def test_a_held_capture_is_queued_until_the_page_before_it_sealed():
    results, events, visits, server = _held_run(400)
    assert [r["status"] for r in results] == ["captured"] * 4 and len(server.held) == 3
    by_url = {v.url: v for v in visits}
    queued_early = 0
    for before, url in zip(URLS, URLS[1:]):
        phases = [(t, p) for t, u, p in events if u == url]
        assert [p for _, p in phases] == ["queued", "started", "done"], (url, events)
        queued_at, started_at = phases[0][0], phases[1][0]
        # the page it was held behind sealed no earlier than this (the server's own clock, same process)
        sealed_at = by_url[before].navigated + SEAL_S
        # started only once that page sealed: never two of the host's pages loading at once
        assert sealed_at <= started_at, (url, queued_at, sealed_at, started_at)
        queued_early += queued_at < sealed_at
    assert queued_early >= 2, events  # submitted while the page before still loaded: what made it look parallel
    assert [p for _, u, p in events if u == "a"] == ["started", "done"]  # the first page is never held


def test_a_long_gap_host_is_never_queued():
    _, events, _, server = _held_run(1300)
    assert server.held == [] and "queued" not in {p for _, _, p in events}


def test_an_older_ledger_refusing_queued_gets_started_instead():
    ledger = HttpFake(_phases_known({"started", "done"}))
    lines: list[str] = []
    try:
        post = poster("c-1", read=_vars(ledger.url), log=lines.append)
        post("https://m/a", "started")
        post("https://m/b", "queued")
        time.sleep(LINGER_S * 3)
        post("https://m/c", "queued")  # sent as started at once from now on
        post.close()
        recorded = [e for r in ledger.requests for e in r.json().get("events", [r.json()])]
    finally:
        ledger.close()
    accepted = [(e["url"], e["phase"]) for e in recorded if e["phase"] != "queued"]
    assert accepted[-3:] == [("https://m/a", "started"), ("https://m/b", "started"), ("https://m/c", "started")]
    assert sum(e["phase"] == "queued" for e in recorded) == 1  # the one refused, then never again
    assert post.no_queued and post.failed == 0 and any("'queued'" in ln for ln in lines)


def test_a_current_ledger_gets_queued():
    ledger = HttpFake(_phases_known({"queued", "started", "done"}))
    try:
        post = poster("c-1", read=_vars(ledger.url), log=lambda _m: None)
        post("https://m/b", "queued")
        post("https://m/b", "started")
        post.close()
        recorded = [e for r in ledger.requests for e in r.json().get("events", [r.json()])]
    finally:
        ledger.close()
    assert recorded == [{"url": "https://m/b", "phase": "queued"}, {"url": "https://m/b", "phase": "started"}]
