"""crawl_host (reference/scheduler.md §7.1, every case), with real timers at millisecond scale."""

from __future__ import annotations

import re
import time

import pytest

from f.waggle.crawl_host import (
    Answer,
    ConnectionLost,
    ServerUnavailable,
    BACKOFF_CAP_MS,
    HostGap,
    FLOW_RETRY_S,
    backed_off_gap,
    capture_host,
    clock,
    describe_refusal,
    first_wait_s,
    parse_endpoints,
    rest_before_retry_s,
    retry_after_ms,
)
from tests.flow.fakes import FakeEndpoint, capture_reply

FORMATS = {"png": False, "webp": False, "html": False, "links": True, "mhtml": False, "wacz": True}
ISO = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")


def run(endpoints, urls, delay=0, initial=0, *, formats=FORMATS, signing=False, scripts=(), sink=None, log=None,
        not_before=None):
    return capture_host(endpoints, "m", urls, "c1", formats=formats, signing=signing, scripts=list(scripts),
                        artifact_sink=sink, delay_ms=delay, initial_delay_ms=initial, not_before=not_before,
                        busy_jitter_ms=(1, 2), log=log or (lambda _m: None))


def eps(*names, calls=None, **kw):
    calls = [] if calls is None else calls
    return [FakeEndpoint(n, calls, **kw) for n in names], calls


# -- where the gap goes ---------------------------------------------------------------------

def test_gap_after_completion_not_before_submission():
    slow = FakeEndpoint("bh-1", [], delay_s=0.03)
    start = time.monotonic()
    run([slow], ["a", "b", "c"], delay=600)
    t = slow.times
    assert t[0] - start < 0.3  # the first page does not wait the gap (slack for a loaded machine)
    # each submission waits the gap after the previous capture *finished* (30 ms capture + 600 ms gap)
    assert all(b - a >= 0.595 + 0.03 for a, b in zip(t, t[1:]))


def test_initial_delay_before_first_page():
    (e,), _ = eps("bh-1")
    start = time.monotonic()
    run([e], ["a"], initial=80)
    assert e.times[0] - start >= 0.075


def test_a_slot_that_opened_late_waits_only_what_is_left_until_not_before():
    """The for-each may start this host's job late; the planned rest counts from the plan."""
    (e,), _ = eps("bh-1")
    start = time.monotonic()
    run([e], ["a"], initial=900, not_before=clock() + 0.2)
    waited = e.times[0] - start
    assert 0.195 <= waited < 0.9 * 0.9  # to not_before, well short of the planned 900 ms


def test_not_before_never_lengthens_the_planned_wait():
    assert first_wait_s(80, clock() + 60.0, clock()) == pytest.approx(0.08)
    assert first_wait_s(900, None, 0.0) == pytest.approx(0.9)
    assert first_wait_s(900, 100.0, 200.0) == 0.0  # already past
    assert first_wait_s(0, 500.0, 100.0) == 0.0


def test_zero_gap_means_no_waiting():
    (e,), _ = eps("bh-1")
    start = time.monotonic()
    run([e], ["a", "b"], delay=0)
    assert time.monotonic() - start < 1.0  # far below the 2 s default gap: nothing was waited


# -- judging the result ---------------------------------------------------------------------

def test_success_is_captured_with_task_and_times():
    (e,), _ = eps("bh-1")
    [r] = run([e], ["a"])
    assert r["status"] == "captured" and r["taskId"] == "task-a@bh-1" and r["correlationId"] == "c1"
    assert ISO.match(r["submittedAt"]) and ISO.match(r["finishedAt"])
    assert list(r)[:6] == ["url", "status", "taskId", "correlationId", "submittedAt", "finishedAt"]


def test_not_success_is_failed_with_reason_and_task():
    (e,), _ = eps("bh-1", responses=[lambda u, t: capture_reply(u, t, status="http_error", error_type="http")])
    [r] = run([e], ["a"])
    assert r["status"] == "failed" and r["skipReason"] == "http_error: boom" and r["taskId"] == "task-a@bh-1"


def test_links_location_on_success_only():
    (e,), _ = eps("bh-1")
    assert run([e], ["a"])[0]["linksLocation"] == "s3://b/x.links.json"
    (e,), _ = eps("bh-1", responses=[lambda u, t: capture_reply(u, t, links="")])
    assert "linksLocation" not in run([e], ["a"])[0]
    (e,), _ = eps("bh-1", responses=[lambda u, t: capture_reply(u, t, status="failed", error_type="http")])
    assert "linksLocation" not in run([e], ["a"])[0]


def _with_links(items, wacz="s3://b/x.wacz"):
    def reply(u, t):
        body = capture_reply(u, t)
        body["report"]["artifacts"]["wacz"] = wacz
        body["links"] = items
        return body
    return reply


def test_inline_links_and_manifest_summary_from_the_answer():
    items = [{"href": "https://m/a", "text": "A", "rel": None}, {"href": "https://m/b", "rel": "nofollow"},
             {"href": ""}, "junk", {"href": 5}]  # unusable items are not sent and not counted
    (e,), _ = eps("bh-1", responses=[_with_links(items)])
    [r] = run([e], ["a"])
    assert r["links"] == [{"href": "https://m/a", "rel": None}, {"href": "https://m/b", "rel": "nofollow"}]
    assert "linksOverflow" not in r and r["linksLocation"] == "s3://b/x.links.json"
    assert r["manifestSummary"] == {"status": "success", "wacz": "s3://b/x.wacz"}


def test_inline_links_capped_with_overflow_counted():
    items = [{"href": f"https://m/{i}", "rel": None} for i in range(7)]
    (e,), _ = eps("bh-1", responses=[_with_links(items)])
    [r] = capture_host([e], "m", ["a"], "c1", formats=FORMATS, signing=False, scripts=[], delay_ms=0,
                       busy_jitter_ms=(1, 2), log=lambda _m: None, links_per_page=3)
    assert [x["href"] for x in r["links"]] == ["https://m/0", "https://m/1", "https://m/2"]
    assert r["linksOverflow"] == 4


def test_no_inline_links_keeps_the_old_shape():
    (e,), _ = eps("bh-1")  # a real BrowserHive v12 answer: links only as an S3 location
    [r] = run([e], ["a"])
    assert "links" not in r and r["linksLocation"] == "s3://b/x.links.json"
    assert r["manifestSummary"] == {"status": "success"}


def test_failed_capture_summary_and_no_links():
    (e,), _ = eps("bh-1", responses=[lambda u, t: {**capture_reply(u, t, status="timeout", error_type="timeout"),
                                                   "links": [{"href": "https://m/a"}]}])
    [r] = run([e], ["a"])
    assert r["status"] == "failed" and "links" not in r and r["manifestSummary"] == {"status": "timeout"}
    (e,), _ = eps("bh-1", responses=[lambda u, t: capture_reply(u, t, manifest={"error": "s3://b/x: denied"})])
    assert "manifestSummary" not in run([e], ["a"])[0]  # no manifest to describe


# -- manifest outcome -----------------------------------------------------------------------

def test_manifest_location_carried_verbatim():
    loc = "s3://b/elsewhere/x y+z.result.json"
    (e,), _ = eps("bh-1", responses=[lambda u, t: capture_reply(u, t, manifest={"location": loc})])
    [r] = run([e], ["a"])
    assert r["manifestLocation"] == loc and "manifestError" not in r


def test_manifest_write_error_carried():
    err = "s3://b/t_.result.json: not written within 10000ms"
    (e,), _ = eps("bh-1", responses=[lambda u, t: capture_reply(u, t, manifest={"error": err})])
    [r] = run([e], ["a"])
    assert r["manifestError"] == err and "manifestLocation" not in r


@pytest.mark.parametrize("manifest", [None, {"location": ""}, "absent"])
def test_no_manifest_outcome(manifest):
    (e,), _ = eps("bh-1", responses=[lambda u, t: capture_reply(u, t, manifest=manifest)])
    [r] = run([e], ["a"])
    assert "no manifest outcome" in r["manifestError"] and "manifestLocation" not in r


def test_refused_submission_has_no_task_and_no_manifest_fields():
    (e,), _ = eps("bh-1", fail_on=("a",))
    [r] = run([e], ["a"])
    assert "taskId" not in r and "manifestLocation" not in r and "manifestError" not in r


def test_no_task_id_means_no_manifest_fields():
    # a 200 without taskId must not get manifest fields (the ledger would reject the report)
    (e,), _ = eps("bh-1", responses=[{"report": {"status": "success"}, "manifest": {"location": "s3://b/x"}}])
    [r] = run([e], ["a"])
    assert "taskId" not in r and "manifestLocation" not in r and "manifestError" not in r


# -- one failed page ------------------------------------------------------------------------

def test_one_failed_page_does_not_stop_the_rest():
    (e,), _ = eps("bh-1", fail_on=("b",))
    results = run([e], ["a", "b", "c"])
    assert [r["status"] for r in results] == ["captured", "failed", "captured"]
    assert results[1]["skipReason"] == "400 ValidationException: could not be submitted"
    assert "taskId" not in results[1]


def test_server_500_is_a_page_failure():
    (e,), calls = eps("bh-1", refuse=Answer(500, "InternalFailure", {}))
    [r] = run([e], ["a"])
    assert r["status"] == "failed" and r["skipReason"] == "500 InternalFailure" and "taskId" not in r
    assert calls == ["bh-1"]  # refusals are never retried


def test_deadline_is_a_page_failure():
    (e,), _ = eps("bh-1", error=TimeoutError("deadline 145000ms passed"))
    [r] = run([e], ["a"])
    assert r["status"] == "failed" and "deadline" in r["skipReason"] and "taskId" not in r


def test_a_lost_connection_is_named_for_what_happened_and_not_retried():
    calls: list[str] = []
    lost = ConnectionLost("connection lost before the answer (RemoteProtocolError: Server disconnected)")
    e = FakeEndpoint("bh-1", calls, error=lost)
    [r] = run([e], ["a"])
    assert r["status"] == "failed" and r["failureClass"] == "transient"
    assert r["skipReason"].startswith("connection lost before the answer") and "deadline" not in r["skipReason"]
    assert calls == ["bh-1"]  # the capture may still be running: not submitted again


# -- reading refusals -----------------------------------------------------------------------

def test_describe_refusal_with_message():
    a = Answer(400, "ValidationException", {"message": "1 validation error detected", "fieldList": [{"path": "/url"}]})
    assert describe_refusal(a) == "400 ValidationException: 1 validation error detected"


def test_describe_refusal_text_body():
    assert describe_refusal(Answer(502, None, "<html>bad gateway</html>")) == "502: <html>bad gateway</html>"


# -- choosing an endpoint -------------------------------------------------------------------

def test_busy_endpoint_is_skipped():
    calls: list[str] = []
    e = [FakeEndpoint("bh-1", calls, busy_times=1), FakeEndpoint("bh-2", calls)]
    [r] = run(e, ["a"])
    assert calls == ["bh-1", "bh-2"] and r["status"] == "captured" and r["taskId"] == "task-a@bh-2"


def test_all_busy_wait_and_go_round():
    calls: list[str] = []
    e = [FakeEndpoint("bh-1", calls, busy_times=1), FakeEndpoint("bh-2", calls, busy_times=1)]
    [r] = run(e, ["a"])
    assert calls == ["bh-1", "bh-2", "bh-1"] and r["status"] == "captured"


def test_all_busy_jitter_is_real_and_bounded():
    calls: list[str] = []
    e = [FakeEndpoint("bh-1", calls, busy_times=1)]
    start = time.monotonic()
    capture_host(e, "m", ["a"], "c1", formats=FORMATS, signing=False, scripts=[], delay_ms=0,
                 busy_jitter_ms=(100, 150), log=lambda _m: None)
    assert 0.095 <= e[0].times[1] - start < 0.4


def test_order_rotates_per_page():
    calls: list[str] = []
    e = [FakeEndpoint("bh-1", calls), FakeEndpoint("bh-2", calls)]
    results = run(e, ["a", "b", "c"])
    assert [r["taskId"].removeprefix("task-") for r in results] == ["a@bh-1", "b@bh-2", "c@bh-1"]


def test_down_endpoint_is_skipped():
    calls: list[str] = []
    e = [FakeEndpoint("bh-1", calls, down=True), FakeEndpoint("bh-2", calls)]
    [r] = run(e, ["a"])
    assert calls == ["bh-1", "bh-2"] and r["status"] == "captured"


def test_an_unreachable_endpoint_is_not_tried_again_in_the_host_level():
    """Issue 24 item 9: found unreachable on page a, bh-1 is never probed again for b, c, d
    (page c would start at bh-1), and the log says so once."""
    calls: list[str] = []
    logs: list[str] = []
    e = [FakeEndpoint("bh-1", calls, down=True), FakeEndpoint("bh-2", calls)]
    results = run(e, ["a", "b", "c", "d"], log=logs.append)
    assert calls == ["bh-1", "bh-2", "bh-2", "bh-2", "bh-2"]
    assert [r["status"] for r in results] == ["captured"] * 4
    assert sum("bh-1 unreachable, not tried again" in m for m in logs) == 1


def test_an_endpoint_that_went_down_mid_level_is_dropped_from_then_on():
    """A server that dies after page a (b finds it unreachable): c and d go to the other one
    without probing the dead one first; once every endpoint is down the level fails."""
    calls: list[str] = []
    first = FakeEndpoint("bh-1", calls)
    e = [first, FakeEndpoint("bh-2", calls)]
    original = first.capture

    def dies_after_one(request):
        if first.requests:
            first.down = True
        return original(request)

    first.capture = dies_after_one
    run(e, ["a", "b", "c", "d", "e"])
    # a → bh-1, b → bh-2, c → bh-1 refused → bh-2, d → bh-2, e (would start at bh-1) → bh-2
    assert calls == ["bh-1", "bh-2", "bh-1", "bh-2", "bh-2", "bh-2"]


def test_a_new_host_level_tries_every_endpoint_again():
    calls: list[str] = []
    e = [FakeEndpoint("bh-1", calls, down=True), FakeEndpoint("bh-2", calls)]
    run(e, ["a"])
    e[0].down = False
    run(e, ["b", "c"])  # page b starts at bh-1 again: a new job, a new level
    assert calls == ["bh-1", "bh-2", "bh-1", "bh-2"]


def test_all_down_fails_the_level_not_the_page():
    calls: list[str] = []
    e = [FakeEndpoint("bh-1", calls, down=True), FakeEndpoint("bh-2", calls, down=True)]
    with pytest.raises(ServerUnavailable) as info:
        run(e, ["a", "b"])
    assert "bh-1" in str(info.value) and "bh-2" in str(info.value)


def test_deadline_is_no_reason_to_skip_an_endpoint():
    calls: list[str] = []
    e = [FakeEndpoint("bh-1", calls, error=TimeoutError("deadline")), FakeEndpoint("bh-2", calls)]
    [r] = run(e, ["a"])
    assert calls == ["bh-1"] and r["status"] == "failed"


# -- retrying transient failures --------------------------------------------------------------

def test_transient_type_retried_once_after_the_gap():
    (e,), calls = eps("bh-1", responses=[
        lambda u, t: capture_reply(u, t, status="failed", error_type="connection"),
        lambda u, t: capture_reply(u, t),
    ])
    [r] = run([e], ["a"], delay=40)
    assert len(calls) == 2 and e.times[1] - e.times[0] >= 0.035 and r["status"] == "captured"


def test_second_failure_is_returned():
    (e,), calls = eps("bh-1", responses=[lambda u, t: capture_reply(u, t, status="timeout", error_type="timeout")])
    [r] = run([e], ["a"])
    assert len(calls) == 2 and r["status"] == "failed" and r["skipReason"] == "timeout: boom" and r["taskId"]


@pytest.mark.parametrize("kind, cls", [("http", "permanent"), ("policy", "policy"), ("artifact_sink", "permanent"),
                                       ("signing", "permanent")])
def test_non_transient_types_not_retried(kind, cls):
    (e,), calls = eps("bh-1", responses=[lambda u, t: capture_reply(u, t, status="failed", error_type=kind)])
    [r] = run([e], ["a"])
    assert len(calls) == 1 and r["status"] == "failed" and r["failureClass"] == cls


def test_retry_new_submitted_at():
    (e,), _ = eps("bh-1", responses=[
        lambda u, t: capture_reply(u, t, status="failed", error_type="internal"),
        lambda u, t: capture_reply(u, t),
    ])
    [r] = run([e], ["a"], delay=30)
    assert r["submittedAt"] <= r["finishedAt"]


# -- reading the endpoint list ----------------------------------------------------------------

def test_parse_endpoints_trims_slashes():
    assert parse_endpoints('["http://bh-1:50051/", " https://bh-2:50051 "]') == ["http://bh-1:50051", "https://bh-2:50051"]


@pytest.mark.parametrize("raw, word", [
    ("browserhive-1.capture-ledger:50051", "JSON"),
    ('["bh-1:50051"]', "http(s)://"),
    ("[]", "non-empty"),
    ('[{"target": "http://x"}]', "non-empty"),
    ('["  "]', "non-empty"),
])
def test_parse_endpoints_refusals(raw, word):
    with pytest.raises(ValueError) as info:
        parse_endpoints(raw)
    assert word in str(info.value) and "u/admin/browserhive_endpoints" in str(info.value)


# -- capture formats, sink, scripts -----------------------------------------------------------

def test_formats_and_signing_sent_as_given():
    (e,), _ = eps("bh-1")
    formats = {"png": True, "webp": False, "html": True, "links": False, "mhtml": False, "wacz": True}
    run([e], ["a"], formats=formats, signing=True)
    req = e.requests[0]
    assert req["captureFormats"] == formats and req["signing"] is True
    assert req["correlationId"] == "c1" and req["labels"] == [] and req["url"] == "a"


def test_artifact_sink_sent_verbatim_when_given():
    (e,), _ = eps("bh-1")
    sink = {"url": "http://capture-ledger:7070/api/sink/c1", "token": "tok"}
    run([e], ["a"], sink=sink)
    assert e.requests[0]["artifactSink"] == sink


@pytest.mark.parametrize("sink", [None, {}])
def test_no_artifact_sink_key_when_absent(sink):
    (e,), _ = eps("bh-1")
    run([e], ["a"], sink=sink)
    assert "artifactSink" not in e.requests[0]


def script(sid, phase, options=None):
    return {"id": sid, "version": 3, "phase": phase, "source": f"/* {sid} */", "sha256": "e" * 64,
            "options": options if options is not None else {}}


def test_scripts_split_by_phase():
    (e,), _ = eps("bh-1")
    run([e], ["a"], scripts=[script("autoscroll", "behavior"), script("hide", "preload")])
    req = e.requests[0]
    assert [s["id"] for s in req["behaviors"]] == ["autoscroll"] and [s["id"] for s in req["preload"]] == ["hide"]


def test_script_order_kept_and_shape_exact():
    (e,), _ = eps("bh-1")
    run([e], ["a"], scripts=[script("b", "behavior", {"maxSteps": 60}), script("a", "behavior"), script("c", "behavior")])
    behaviors = e.requests[0]["behaviors"]
    assert [s["id"] for s in behaviors] == ["b", "a", "c"]
    assert behaviors[0] == {"id": "b", "source": "/* b */", "sha256": "e" * 64, "options": {"maxSteps": 60}}
    assert behaviors[1] == {"id": "a", "source": "/* a */", "sha256": "e" * 64}


def test_empty_script_list_sends_neither_key():
    (e,), _ = eps("bh-1")
    run([e], ["a"], scripts=[])
    assert "behaviors" not in e.requests[0] and "preload" not in e.requests[0]


def test_only_one_kind_only_that_key():
    (e,), _ = eps("bh-1")
    run([e], ["a"], scripts=[script("hide", "preload")])
    assert len(e.requests[0]["preload"]) == 1 and "behaviors" not in e.requests[0]


# -- beyond upstream: 429/503 main document doubles the host's gap (cases/README C3) ----------

def test_rate_limited_main_document_backs_off_for_the_rest_of_the_level():
    def reply(status_code):
        return lambda u, t: capture_reply(u, t, status="http_error", error_type="http", http_status=status_code)

    ok = lambda u, t: capture_reply(u, t)  # noqa: E731
    (e,), _ = eps("bh-1", responses=[ok, reply(429), ok, reply(503), reply(503), ok])
    (other,), _ = eps("bh-9")
    lines: list[str] = []
    results = run([e], ["p1", "p2", "p3", "p4"], delay=150, log=lines.append)
    other_results = run([other], ["q1", "q2", "q3"], delay=150)
    # 429 and 503 are transient: retried once, after the backed-off gap
    assert [r["status"] for r in results] == ["captured", "captured", "failed", "captured"]
    assert "503" in results[2]["skipReason"] and results[2]["failureClass"] == "transient"
    gaps = [b - a for a, b in zip(e.times, e.times[1:])]
    # each bound sits between one pace and the next (150 → 300 → 600 → 1200 ms): slack for load
    assert 0.149 <= gaps[0] < 0.29                            # normal pace before the 429
    assert 0.299 <= gaps[1] < 0.55 and 0.299 <= gaps[2] < 0.55  # doubled after the 429 (retry, next page)
    assert 0.599 <= gaps[3] < 1.1                             # doubled again after the first 503 (retry)
    assert gaps[4] >= 1.199                                   # and again after the second 503
    other_gaps = [b - a for a, b in zip(other.times, other.times[1:])]
    assert all(g < 0.29 for g in other_gaps)                 # other hosts keep their pace
    assert [r["status"] for r in other_results] == ["captured"] * 3
    assert any("429" in line and "gap" in line for line in lines)


def test_backed_off_gap_doubles_caps_and_never_shortens():
    assert backed_off_gap(2000) == 4000
    assert backed_off_gap(0) == 1000
    assert backed_off_gap(BACKOFF_CAP_MS - 1) == BACKOFF_CAP_MS
    assert backed_off_gap(BACKOFF_CAP_MS * 2) == BACKOFF_CAP_MS * 2  # a longer Crawl-delay is kept


# -- finalUrl (contract 4, issue 13 item 3) -----------------------------------------------------

def _with_final(final, status="success"):
    def reply(u, t):
        body = capture_reply(u, t, status=status, error_type=None if status == "success" else "http")
        body["report"]["finalUrl"] = final
        return body
    return reply


@pytest.mark.parametrize("status", ["success", "http_error"])  # an HTTP redirect, or a JS one off an error page
def test_final_url_is_passed_through(status):
    (e,), _ = eps("bh-1", responses=[_with_final("https://a.test/new", status)])
    [r] = run([e], ["a"])
    assert r["finalUrl"] == "https://a.test/new"


@pytest.mark.parametrize("final", [None, "", 42, "https://a.test/" + "x" * 8200, "https://a.test/\x00", "https://a.test/\ud800"])
def test_final_url_the_ledger_would_refuse_is_left_out(final):
    (e,), _ = eps("bh-1", responses=[_with_final(final)])
    [r] = run([e], ["a"])
    assert "finalUrl" not in r and r["status"] == "captured"


# -- a redirect target listed in the same level (captured once) --------------------------------

def test_a_listed_redirect_target_is_not_captured_again():
    old = {"https://a.test/old": _with_final("https://A.test:443/new#top")}
    (e,), calls = eps("bh-1", responses=[lambda u, t: old.get(u, capture_reply)(u, t)])
    logs: list[str] = []
    results = run([e], ["https://a.test/old", "https://a.test/other", "https://a.test/new"], log=logs.append)
    assert [r["url"] for r in results] == ["https://a.test/old", "https://a.test/other", "https://a.test/new"]
    assert [r["status"] for r in results] == ["captured", "captured", "skipped"]
    assert results[2] == {"url": "https://a.test/new", "status": "skipped",
                          "skipReason": "already captured in this level as the redirect target of https://a.test/old"}
    assert [q["url"] for q in e.requests] == ["https://a.test/old", "https://a.test/other"]
    assert any("not captured again" in line for line in logs)


def test_a_failed_redirect_does_not_spare_its_target():
    old = {"https://a.test/old": _with_final("https://a.test/new", "http_error")}
    (e,), _ = eps("bh-1", responses=[lambda u, t: old.get(u, capture_reply)(u, t)])
    results = run([e], ["https://a.test/old", "https://a.test/new"])
    assert [r["status"] for r in results] == ["failed", "captured"]


# -- a failing job and the flow's retry ---------------------------------------------------------

def test_a_failing_job_waits_so_the_flows_retry_keeps_a_gap_longer_than_the_retry_delay():
    """Windmill retries ``cap`` FLOW_RETRY_S after a throw, from its first page: with a gap above
    that, the job waits the difference before raising (the site may have just been reached)."""
    slept: list[float] = []
    (e,), _ = eps("bh-1", down=True)
    with pytest.raises(ServerUnavailable):
        capture_host([e], "m", ["a"], "c1", formats=FORMATS, signing=False, scripts=[], delay_ms=30_250,
                     busy_jitter_ms=(1, 2), log=lambda _m: None, sleep=slept.append)
    assert slept[-1] == pytest.approx(0.25)


def test_a_short_gap_or_no_submission_adds_no_wait_before_failing():
    assert rest_before_retry_s(2000, True) == 0.0
    assert rest_before_retry_s(45_000, False) == 0.0  # nothing was sent in this attempt
    assert rest_before_retry_s(45_000, True) == pytest.approx(15.0)


def test_the_retry_delay_is_the_flows():
    import yaml
    from pathlib import Path

    flow = yaml.safe_load((Path(__file__).parents[2] / "f/waggle/crawl_level.flow/flow.yaml").read_text())
    hosts = next(m for m in flow["value"]["modules"] if m["id"] == "hosts")
    cap = next(m for m in hosts["value"]["modules"] if m["id"] == "cap")
    assert cap["retry"]["constant"]["seconds"] == FLOW_RETRY_S


def test_retry_after_of_a_rate_limited_document_is_waited_for():
    """The answer's ``retryAfterMs`` (our capture server's extension 18): the next capture waits
    max(the doubled gap, Retry-After) from gapFrom, Retry-After capped at BACKOFF_CAP_MS; an
    answer without it (a real BrowserHive v12) keeps the doubling alone."""
    def limited(retry_after_ms):
        def reply(u, t):
            body = capture_reply(u, t, status="http_error", error_type="http", http_status=429)
            if retry_after_ms is not None:
                body["retryAfterMs"] = retry_after_ms
            return body
        return reply

    ok = lambda u, t: capture_reply(u, t)  # noqa: E731
    (e,), _ = eps("bh-1", responses=[limited(900), ok, ok])
    lines: list[str] = []
    run([e], ["p1", "p2", "p3"], delay=100, log=lines.append)
    gaps = [b - a for a, b in zip(e.times, e.times[1:])]
    assert gaps[0] >= 0.899 and gaps[1] >= 0.899, gaps  # the retry and the next page: Retry-After, not 200 ms
    assert any("Retry-After 900 ms" in line and "100 → 900 ms" in line for line in lines), lines
    gap = HostGap(1000, say=lambda _m: None)
    gap.back_off(429, 10**9)
    assert gap.ms == BACKOFF_CAP_MS  # capped
    gap = HostGap(1000, say=lambda _m: None)
    gap.back_off(503, 500)
    assert gap.ms == 2000  # never shorter than the doubled gap
    assert retry_after_ms({"retryAfterMs": True}) is None and retry_after_ms({"retryAfterMs": -1}) is None
