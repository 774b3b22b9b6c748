"""compile_scripts, report_level, index_level, fail_crawl (reference/scheduler.md §7.3–§7.6),
plus the bounded retry of ledger calls across a ledger restart (issue 7 item 4)."""

from __future__ import annotations

import threading
import time

import httpx
import pytest

from f.waggle.compile_scripts import CompileError, compile_scripts
from f.waggle.fail_crawl import REASON_MAX, close_crawl, describe
from f.waggle.index_level import IndexError_, index
from f.waggle.report_level import ReportError, report
from tests.flow.fakes import HttpFake


@pytest.fixture
def server():
    made: list[HttpFake] = []

    def make(handler):
        fake = HttpFake(handler)
        made.append(fake)
        return fake

    yield make
    for fake in made:
        fake.close()


TS = [{"id": "autoscroll", "version": 3, "phase": "behavior", "source": "let n: number = 1;", "sha256": "a" * 64, "options": {}}]
JS = {"typescript": "6.0.3", "hostTypes": "v0.2.0", "cached": False,
      "scripts": [{**TS[0], "source": '"use strict";\nlet n = 1;\n', "sha256": "b" * 64}]}
DIAG = {"file": "bad.ts", "line": 3, "col": 9, "code": "TS2322", "message": "Type 'string' is not assignable to type 'number'."}


# -- compile_scripts (§7.3) -------------------------------------------------------------------

def test_compile_200_passes_the_answer_unchanged(server):
    ts = server(lambda r: (200, {}, JS))
    assert compile_scripts(TS, ts.url) == JS
    assert ts.requests[0].path == "/compile" and ts.requests[0].json() == {"scripts": TS}
    assert ts.requests[0].headers["content-type"] == "application/json"


def test_compile_422_raises_with_codes(server):
    body = {"message": "1 type error", "typescript": "6.0.3", "diagnostics": [DIAG]}
    ts = server(lambda r: (422, {"x-amzn-errortype": "CompileFailed"}, body))
    with pytest.raises(CompileError, match=r"compile 422 CompileFailed: .*TS2322"):
        compile_scripts(TS, ts.url)


def test_compile_many_diagnostics_summarised(server):
    body = {"message": "40 type errors", "diagnostics": [dict(DIAG, line=i, message="x" * 500) for i in range(40)]}
    ts = server(lambda r: (422, {"x-amzn-errortype": "CompileFailed"}, body))
    with pytest.raises(CompileError) as info:
        compile_scripts(TS, ts.url)
    text = str(info.value)
    assert text.count("TS2322") == 5 and "40 diagnostic(s)" in text and "35 more" in text and len(text) < 2000


@pytest.mark.parametrize("status, etype, body, pattern", [
    (409, "SourceHashMismatch", {"message": "autoscroll: hash differs", "id": "autoscroll"}, r"compile 409 SourceHashMismatch"),
    (400, "ValidationException", {"message": "bad", "fieldList": [{"path": "/scripts/0/id", "message": "x"}]},
     r"compile 400 ValidationException: .*/scripts/0/id"),
])
def test_compile_409_and_400_raise(server, status, etype, body, pattern):
    ts = server(lambda r: (status, {"x-amzn-errortype": etype}, body))
    with pytest.raises(CompileError, match=pattern):
        compile_scripts(TS, ts.url)


def test_compile_service_absent_raises():
    with pytest.raises(CompileError, match="did not answer"):
        compile_scripts(TS, "http://127.0.0.1:1")


def test_compile_non_json_answer_raises(server):
    ts = server(lambda r: (200, {}, "<html>"))
    with pytest.raises(CompileError, match="not JSON"):
        compile_scripts(TS, ts.url)


# -- report_level (§7.4) ----------------------------------------------------------------------

RESULTS = [{"url": "http://a/", "status": "captured", "taskId": "t", "correlationId": "c-1",
            "submittedAt": "2026-01-01T00:00:00.000Z", "finishedAt": "2026-01-01T00:00:01.000Z", "manifestLocation": "s3://b/t"}]


def test_report_body_and_url(server):
    ledger = server(lambda r: (200, {}, {"next": [{"url": "http://a/x", "host": "a", "depth": 3}], "stopReason": "max_pages"}))
    answer = report(ledger.url, "tok", "c-1", 2, RESULTS, JS, retry_budget_s=0)
    req = ledger.requests[0]
    assert req.method == "POST" and req.path == "/api/crawls/c-1/pages"
    assert req.json() == {"depth": 2, "results": RESULTS, "compiled": {"typescript": "6.0.3", "hostTypes": "v0.2.0",
                          "scripts": [{"id": "autoscroll", "version": 3, "sha256": "b" * 64}]}}
    assert req.headers["content-type"] == "application/json" and req.headers["authorization"] == "Bearer tok"
    assert answer == {"next": [{"url": "http://a/x", "host": "a", "depth": 3}], "stopReason": "max_pages"}


@pytest.mark.parametrize("status, body, pattern", [
    (401, {"error": "unauthenticated"}, "issuer"),
    (404, {"error": "not found"}, "fga:grant submitter"),
    (500, "crawl is not running", "crawl is not running"),
    (400, {"error": "results/0/status must be one of"}, "results/0/status"),
])
def test_report_errors_read_the_body(server, status, body, pattern):
    ledger = server(lambda r: (status, {}, body))
    with pytest.raises(ReportError, match=pattern) as info:
        report(ledger.url, "tok", "c-1", 0, [], JS, retry_budget_s=0)
    assert f"POST /api/crawls/c-1/pages → {status}" in str(info.value)


# -- index_level (§7.5) -----------------------------------------------------------------------

def test_index_no_body_no_content_type(server):
    ledger = server(lambda r: (202, {}, {"indexed": 3, "pages": 7}))
    assert index(ledger.url, "tok", "c-1", retry_budget_s=0) == {"indexed": 3, "pages": 7, "skipped": False}
    req = ledger.requests[0]
    assert req.method == "POST" and req.path == "/api/crawls/c-1/index" and req.body == b""
    assert "content-type" not in req.headers and req.headers["authorization"] == "Bearer tok"


def test_index_reports_the_ledgers_counts(server):
    answer = {"indexed": 5, "pages": 4, "withoutText": 1, "deferred": 2, "alreadyIndexed": 9, "remaining": 2}
    ledger = server(lambda r: (200, {}, answer))
    lines: list[str] = []
    got = index(ledger.url, "tok", "c-1", retry_budget_s=0, log=lines.append)
    assert got == {"indexed": 5, "pages": 4, "skipped": False, "withoutText": 1, "deferred": 2, "remaining": 2}
    assert lines == ["indexed 5 archive(s), 4 page(s) with text, withoutText 1, deferred 2, remaining 2"]


def test_index_404_is_skipped(server):
    ledger = server(lambda r: (404, {}, {"error": "not found"}))
    assert index(ledger.url, "tok", "c-1", retry_budget_s=0) == {"indexed": 0, "pages": 0, "skipped": True}


@pytest.mark.parametrize("status", [500, 401])
def test_index_other_errors_raise(server, status):
    ledger = server(lambda r: (status, {}, {"error": "boom"}))
    with pytest.raises(IndexError_, match=str(status)):
        index(ledger.url, "tok", "c-1", retry_budget_s=0)


# -- fail_crawl (§7.6) ------------------------------------------------------------------------

def test_describe_puts_the_step_first():
    assert describe({"message": "BrowserHive unreachable", "step_id": "cap"}) == "[cap] BrowserHive unreachable"


def test_describe_shapes():
    assert describe({"message": "only"}) == "only"
    assert describe("a string") == "a string"
    assert "weird" in describe({"weird": 1})
    assert describe(None) == "null"


def test_describe_one_line_and_capped():
    text = describe({"message": "compile 422 CompileFailed: TS2322\n" + "x" * 5000, "step_id": "compile"})
    assert len(text) <= REASON_MAX and text.startswith("[compile] compile 422 CompileFailed: TS2322") and "\n" not in text


def test_fail_crawl_posts_reason(server):
    ledger = server(lambda r: (200, {}, {"closed": True}))
    assert close_crawl(ledger.url, "tok", "c-1", {"message": "m", "step_id": "cap"}, retry_budget_s=0) == {"closed": True}
    req = ledger.requests[0]
    assert req.path == "/api/crawls/c-1/failed" and req.json() == {"reason": "[cap] m"}
    assert req.headers["content-type"] == "application/json" and req.headers["authorization"] == "Bearer tok"


def test_fail_crawl_never_raises(server):
    ledger = server(lambda r: (401, {}, {"error": "unauthenticated"}))
    out = close_crawl(ledger.url, "tok", "c-1", "x", retry_budget_s=0)
    assert out["closed"] is False and "failed → 401" in out["problem"]
    out = close_crawl("http://127.0.0.1:1", "tok", "c-1", "x", retry_budget_s=0)
    assert out["closed"] is False and out["problem"]


def test_fail_crawl_nothing_to_close(server):
    ledger = server(lambda r: (200, {}, {"closed": False}))
    assert close_crawl(ledger.url, "tok", "c-1", "x", retry_budget_s=0) == {"closed": False}


# -- riding out a ledger restart (issue 7 item 4) ---------------------------------------------

def test_report_retries_5xx_then_succeeds(server):
    answers = iter([(503, {}, "starting"), (502, {}, "bad gateway"), (200, {}, {"next": [], "stopReason": "completed"})])
    ledger = server(lambda r: next(answers))
    assert report(ledger.url, "tok", "c-1", 0, [], JS, retry_budget_s=10)["stopReason"] == "completed"
    assert len(ledger.requests) == 3


def test_report_retries_connection_refused_until_the_ledger_is_back(server):
    probe = server(lambda r: (200, {}, {}))
    port = int(probe.url.rsplit(":", 1)[1])
    probe.close()  # nothing listens on this port now
    revived: list[HttpFake] = []

    def revive():
        time.sleep(0.8)
        # the "restarted ledger", on the old port
        revived.append(HttpFake(lambda r: (200, {}, {"next": [], "stopReason": None}), port=port))

    threading.Thread(target=revive, daemon=True).start()
    started = time.monotonic()
    answer = report(f"http://127.0.0.1:{port}", "tok", "c-1", 0, [], JS, retry_budget_s=15)
    assert answer == {"next": [], "stopReason": None}
    assert 0.7 < time.monotonic() - started < 10
    assert len(revived[0].requests) == 1
    revived[0].close()


def test_retry_is_bounded(server):
    ledger = server(lambda r: (500, {}, {"error": "internal error"}))
    started = time.monotonic()
    with pytest.raises(ReportError, match="internal error"):
        report(ledger.url, "tok", "c-1", 0, [], JS, retry_budget_s=1.0)
    assert time.monotonic() - started < 3 and len(ledger.requests) >= 2


def test_fail_crawl_and_index_retry_5xx(server):
    answers = iter([(500, {}, "x"), (200, {}, {"closed": True})])
    ledger = server(lambda r: next(answers))
    assert close_crawl(ledger.url, "tok", "c-1", "x", retry_budget_s=10) == {"closed": True}
    answers2 = iter([(503, {}, "x"), (202, {}, {"indexed": 1, "pages": 1})])
    ledger2 = server(lambda r: next(answers2))
    assert index(ledger2.url, "tok", "c-1", retry_budget_s=10)["indexed"] == 1


def test_4xx_is_not_retried(server):
    ledger = server(lambda r: (400, {}, {"error": "bad"}))
    with pytest.raises(ReportError):
        report(ledger.url, "tok", "c-1", 0, [], JS, retry_budget_s=10)
    assert len(ledger.requests) == 1


# -- issue 17 item 5: no expected-404 noise per level --------------------------------------------

def test_index_404_logs_nothing(server):
    ledger = server(lambda r: (404, {}, {"error": "not found"}))
    lines: list[str] = []
    assert index(ledger.url, "tok", "c-1", retry_budget_s=0, log=lines.append)["skipped"] is True
    assert lines == []


def test_missing_optional_variable_logs_nothing(server, capfd, caplog):
    import wmill

    from f.waggle.common import read_optional_variable

    windmill = server(lambda r: (404, {}, "Variable not found"))
    client = wmill.Windmill(base_url=windmill.url, token="t", workspace="waggle")
    caplog.set_level("DEBUG")
    assert read_optional_variable("u/admin/waggle_allow_private_hosts", client.get_variable) is None
    assert windmill.requests[0].path == "/api/w/waggle/variables/get_value/u/admin/waggle_allow_private_hosts"
    assert [r for r in caplog.records if r.levelno >= 30] == []
    assert "404" not in capfd.readouterr().err
    assert not __import__("logging").getLogger("windmill_client").disabled  # muted only during the read
