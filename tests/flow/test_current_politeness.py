"""plan_level reads the hosts' politeness from the ledger just before the level's first request
(``GET /api/crawls/{id}/politeness``): a crawl that started after this level was claimed with a
longer delay on a host slows the level from robots.txt on; values are never lowered; a ledger
that cannot say leaves the level's own values (logged). Real HTTP on loopback (a robots.txt
site and a ledger stand-in answering the route)."""

from __future__ import annotations

import json
import time
from urllib.parse import parse_qs, urlsplit

from f.waggle.common import iso_now
from f.waggle.plan_level import ledger_politeness, plan, with_current_politeness
from tests.flow.fakes import HttpFake
from tests.flow.test_plan_level import cand, fetch, serving  # noqa: F401


def ledger(answer, status=200):
    return HttpFake(lambda r: (status, {}, answer(r) if callable(answer) else answer))


def variables(fake):
    return {"u/admin/waggle_api_url": fake.url, "u/admin/waggle_token": "flow-token"}.__getitem__


def test_a_longer_delay_registered_after_the_claim_slows_the_level_from_robots_txt_on(serving):
    site = serving("User-agent: *\nAllow: /\n")
    host = site.fake.authority
    before = time.time() - 0.2
    stand_in = ledger({"hosts": {host: {"hostDelayMs": 3000, "lastFinishedAt": iso_now(before)}}})
    try:
        lines: list[str] = []
        t0 = time.monotonic()
        result = plan([cand(site, "/a"), cand(site, "/b")], 500, True, 4, fetch=fetch,
                      read_endpoints=lambda: '["http://bh-1"]', log=lines.append,
                      current=ledger_politeness("c-1", read=variables(stand_in)))
        waited = time.monotonic() - t0
    finally:
        stand_in.close()
    (group,) = result["groups"]
    # the whole level and its first capture use the longer delay; robots.txt waited its turn
    # after the capture the ledger now reports (0.2 s ago + 3 s): a ratio of the delay, not a time
    assert group["delayMs"] == 3000 and group["initialDelayMs"] >= 0.9 * 3000
    assert waited / 3.0 >= 0.9
    (req,) = stand_in.requests
    assert urlsplit(req.path).path == "/api/crawls/c-1/politeness"
    assert parse_qs(urlsplit(req.path).query) == {"host": [host]}
    assert req.headers["authorization"] == "Bearer flow-token"
    assert any("started meanwhile uses a longer delay" in ln for ln in lines)


def test_values_are_never_lowered_and_other_hosts_are_kept():
    items = {"a.test": [{"url": "https://a.test/", "host": "a.test", "hostDelayMs": 2000,
                         "lastFinishedAt": "2026-12-01T10:00:05.000Z"}],
             "b.test": [{"url": "https://b.test/", "host": "b.test", "lastFinishedAt": None}]}
    out = with_current_politeness(items, lambda hosts: {
        "a.test": {"hostDelayMs": 500, "lastFinishedAt": "2026-12-01T10:00:01.000Z"},
        "b.test": {"hostDelayMs": 700, "lastFinishedAt": "2026-12-01T10:00:02.000Z"}}, lambda _m: None)
    assert out["a.test"] == items["a.test"]
    assert out["b.test"][0]["hostDelayMs"] == 700 and out["b.test"][0]["lastFinishedAt"] == "2026-12-01T10:00:02.000Z"


def test_a_ledger_that_cannot_say_leaves_the_levels_own_values(serving):
    site = serving(None)
    for stand_in in (ledger({"error": "not found"}, 404), ledger("not json")):
        lines: list[str] = []
        try:
            result = plan([cand(site, "/a")], 400, True, 4, fetch=fetch, read_endpoints=lambda: '["http://bh-1"]',
                          log=lines.append, current=ledger_politeness("c-1", read=variables(stand_in)))
        finally:
            stand_in.close()
        assert result["groups"][0]["delayMs"] == 400
        assert any("current delays could not be read" in ln for ln in lines), lines


def test_many_hosts_are_asked_in_calls_of_at_most_1000():
    asked: list[int] = []

    def answer(r):
        hosts = parse_qs(urlsplit(r.path).query)["host"]
        asked.append(len(hosts))
        return {"hosts": {h: {"hostDelayMs": 1, "lastFinishedAt": None} for h in hosts}}

    stand_in = ledger(answer)
    try:
        found = ledger_politeness("c-1", read=variables(stand_in))([f"h{i}.test" for i in range(1500)])
    finally:
        stand_in.close()
    assert asked == [1000, 500] and len(found) == 1500 and json.dumps(found)
