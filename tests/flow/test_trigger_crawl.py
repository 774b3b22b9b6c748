"""trigger_crawl, the nightly job (reference/scheduler.md §7.7), against a fake ledger on 127.0.0.1."""

from __future__ import annotations

import pytest

from f.waggle.trigger_crawl import TriggerError, trigger
from tests.flow.fakes import HttpFake


@pytest.fixture
def ledger():
    made: list[HttpFake] = []

    def make(start, polls=()):
        polls = list(polls)

        def handler(req):
            if req.method == "POST":
                return start
            return polls.pop(0) if len(polls) > 1 else polls[0]

        fake = HttpFake(handler)
        made.append(fake)
        return fake

    yield make
    for fake in made:
        fake.close()


ACCEPTED = (202, {}, {"crawlId": "c1"})
DONE = (200, {}, {"state": "succeeded", "pagesDiscovered": 5, "pagesCaptured": 3, "stopReason": "max_depth"})


def go(fake, **kw):
    kw.setdefault("poll_interval_ms", 5)
    kw.setdefault("timeout_ms", 60_000)
    return trigger(fake.url, "tok", log=lambda _m: None, **kw)


def test_start_body_without_limit(ledger):
    fake = ledger(ACCEPTED, [DONE])
    go(fake)
    req = fake.requests[0]
    assert req.path == "/api/crawls" and req.json() == {"fromTargets": {}}
    assert req.headers["authorization"] == "Bearer tok"


def test_start_body_with_limit(ledger):
    fake = ledger(ACCEPTED, [DONE])
    go(fake, limit=5)
    assert fake.requests[0].json() == {"fromTargets": {"limit": 5}}


def test_none_limit_is_absent(ledger):
    fake = ledger(ACCEPTED, [DONE])
    trigger(fake.url, "tok", None, None, 5, log=lambda _m: None)
    assert fake.requests[0].json() == {"fromTargets": {}}


@pytest.mark.parametrize("status, error", [
    (429, "organization acme already has 4 running crawls"),  # issue 12: the org's running-crawl limit
    (409, "a crawl is already in progress"),  # an older ledger
])
def test_limit_or_409_is_a_skip_without_polling(ledger, status, error):
    fake = ledger((status, {}, {"error": error}))
    assert go(fake) == {"outcome": "skipped"} and len(fake.requests) == 1


@pytest.mark.parametrize("status, body, must, must_not", [
    (401, {"error": "unauthenticated"}, "issuer", None),
    (404, {"error": "not found"}, "fga:grant submitter", "WEBHOOK"),
    (404, "Route POST:/api/crawls not found", "CRAWL_WEBHOOK_URL", "fga:grant"),
    (404, {"detail": "Not Found"}, "WAGGLE_CRAWL_WEBHOOK_URL", "fga:grant"),
    (500, {"error": "internal error"}, "internal error", None),
    (200, {"crawlId": "c1"}, "200", None),
])
def test_start_errors(ledger, status, body, must, must_not):
    fake = ledger((status, {}, body))
    with pytest.raises(TriggerError) as info:
        go(fake)
    assert must in str(info.value)
    if must_not:
        assert must_not not in str(info.value)


def test_keeps_polling_while_running(ledger):
    running = (200, {}, {"state": "running"})
    fake = ledger(ACCEPTED, [running, running, DONE])
    out = go(fake)
    assert out["outcome"] == "succeeded" and out["pagesCaptured"] == 3 and len(fake.requests) == 4


def test_failed_throws_with_reason(ledger):
    fake = ledger(ACCEPTED, [(200, {}, {"state": "failed", "error": "browserhive unreachable"})])
    with pytest.raises(TriggerError, match="browserhive unreachable"):
        go(fake)


def test_failed_without_reason(ledger):
    fake = ledger(ACCEPTED, [(200, {}, {"state": "failed", "error": None})])
    with pytest.raises(TriggerError, match="no reason"):
        go(fake)


def test_unknown_state_is_never_success(ledger):
    fake = ledger(ACCEPTED, [(200, {}, {"status": "succeeded"})])
    with pytest.raises(TriggerError, match="unknown state «undefined»"):
        go(fake)


def test_null_counts_become_zero(ledger):
    fake = ledger(ACCEPTED, [(200, {}, {"state": "succeeded", "pagesDiscovered": None, "pagesCaptured": None, "stopReason": None})])
    assert go(fake) == {"outcome": "succeeded", "crawlId": "c1", "pagesDiscovered": 0, "pagesCaptured": 0, "stopReason": None}


def test_max_depth_is_success(ledger):
    fake = ledger(ACCEPTED, [DONE])
    assert go(fake)["stopReason"] == "max_depth"


def test_failed_poll_throws(ledger):
    fake = ledger(ACCEPTED, [(500, {}, {"error": "boom"})])
    with pytest.raises(TriggerError, match="boom"):
        go(fake)


def test_deadline(ledger):
    fake = ledger(ACCEPTED, [(200, {}, {"state": "running"})])
    with pytest.raises(TriggerError, match="did not finish"):
        go(fake, timeout_ms=-1)
    assert len(fake.requests) == 1  # gave up before the first poll


def test_sleep_comes_before_the_first_poll(ledger):
    import time
    fake = ledger(ACCEPTED, [DONE])
    go(fake, poll_interval_ms=150)
    assert fake.requests[1].at - fake.requests[0].at >= 0.14
