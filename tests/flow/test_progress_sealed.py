"""The ``sealed`` progress event (issue 24 item 5): when the capture server's seal answer names
the capture (``taskId``, ``manifestLocation``), crawl_host tells the ledger at once, so a crawl
failed before that capture answers still admits its archive. An older ledger that refuses the
phase gets every other event as before. Real HTTP on 127.0.0.1."""

from __future__ import annotations

import time

from f.waggle.progress import LINGER_S, poster
from tests.flow.fakes import HttpFake
from tests.flow.test_progress import _ledger, _vars

SEALED = {"taskId": "0b6a51b4-6a55-4a1e-9c43-2d8f4a3b5c6d", "manifestLocation": "s3://b/t_c.result.json"}


def _phases_known(phases: set[str]):
    """A ledger that validates ``phase`` as a real one does (400 naming the field)."""
    def answer(req):
        body = req.json()
        events = body.get("events", [body])
        bad = [i for i, e in enumerate(events) if e.get("phase") not in phases]
        if bad:
            where = f"events.{bad[0]}.phase" if "events" in body else "phase"
            return 400, {}, {"error": f"{where}: Input should be 'started' or 'done'"}
        return _ledger(req)
    return answer


def test_a_seal_answer_with_a_task_is_sent_as_a_sealed_event():
    ledger = HttpFake(_ledger)
    try:
        post = poster("c-1", read=_vars(ledger.url), log=lambda _m: None)
        post("https://m/a", "started")
        post("https://m/a", "sealed", dict(SEALED, sinceLastRequestMs=12))
        post("https://m/b", "sealed", {"sinceLastRequestMs": 3})  # no task named: nothing to say
        post.close()
        sent = [e for r in ledger.requests for e in r.json().get("events", [r.json()])]
    finally:
        ledger.close()
    assert sent == [{"url": "https://m/a", "phase": "started"}, {"url": "https://m/a", "phase": "sealed", **SEALED}]


def test_an_older_ledger_refusing_the_phase_gets_the_other_events():
    ledger = HttpFake(_phases_known({"started", "done"}))
    lines: list[str] = []
    try:
        post = poster("c-1", read=_vars(ledger.url), log=lines.append)
        post("https://m/a", "started")
        post("https://m/a", "sealed", SEALED)
        time.sleep(LINGER_S * 3)
        post("https://m/b", "started")
        post("https://m/b", "sealed", SEALED)  # not sent again
        post.close()
        recorded = [e for r in ledger.requests if r.json().get("events", [r.json()])
                    for e in r.json().get("events", [r.json()])]
    finally:
        ledger.close()
    started = [e for e in recorded if e["phase"] == "started"]
    assert [e["url"] for e in started] == ["https://m/a", "https://m/a", "https://m/b"]  # a's resent without sealed
    assert sum(e["phase"] == "sealed" for e in recorded) == 1  # the one refused, then never again
    assert any("'sealed'" in ln for ln in lines) and post.no_sealed
