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


# -- crawl_host forwards the seal answer's identity ------------------------------------------------

def test_crawl_host_sends_sealed_between_started_and_done():
    from tests.flow.test_pipeline import SealingFake, Visit, crawl

    class NamingFake(SealingFake):
        def seal(self, key, timeout_ms):
            got = super().seal(key, timeout_ms)
            if got is not None and got[0]["sealed"]:
                url = self._entry(key)[1][0].url
                got[0].update(taskId=f"task-{url}", manifestLocation=f"s3://b/task-{url}.result.json")
            return got

    visits: list[Visit] = []
    events: list[tuple] = []
    results, _ = crawl([NamingFake("bh-1", visits)], ["a", "b"], 300,
                       on_page=lambda url, phase, result=None: events.append((url, phase, result)))
    assert [r["status"] for r in results] == ["captured", "captured"]
    for url in ("a", "b"):
        mine = [(phase, result) for u, phase, result in events if u == url]
        assert [phase for phase, _ in mine] == ["started", "sealed", "done"], mine
        assert mine[1][1] == {"taskId": f"task-{url}", "manifestLocation": f"s3://b/task-{url}.result.json"}


def test_crawl_host_sends_no_sealed_event_when_the_seal_names_no_task():
    from tests.flow.test_pipeline import SealingFake, Visit, crawl

    visits: list[Visit] = []
    events: list[tuple] = []
    crawl([SealingFake("bh-1", visits)], ["a"], 300,
          on_page=lambda url, phase, result=None: events.append((url, phase)))
    assert events == [("a", "started"), ("a", "done")]
