"""Capture server: the wire contract of BrowserHive v12 (contracts.md §A, §B.1, §D.3)."""

from __future__ import annotations

import json
import threading
import time

import httpx
import pytest

from devstack.serving import start_module
from tests.devstack.conftest import FAST_SETTLE
from tests.devstack.helpers import (
    ALL_FORMATS, ONLY_WACZ, behavior_reports, capture, capture_server_process, faults, s3_get, script, task_keys, wacz_members,
)
from tests.fixtures.loopback import LoopbackSite

HTML_ONLY = {**{k: False for k in ALL_FORMATS}, "html": True}


def keys_with_prefix(s3_server, prefix: str) -> list[str]:
    listed = s3_server.client().list_objects_v2(Bucket=s3_server.bucket, Prefix=prefix)
    return [o["Key"] for o in listed.get("Contents", [])]


@pytest.mark.parametrize(
    ("body", "paths"),
    [
        ({"capture_formats": ONLY_WACZ}, {"/capture_formats", "/captureFormats"}),
        ({"captureFormats": {**ONLY_WACZ, "pdf": True}}, {"/captureFormats/pdf"}),
        ({"captureFormats": {"png": True}}, {f"/captureFormats/{k}" for k in ("webp", "html", "links", "mhtml", "wacz")}),
        ({"captureFormats": {k: False for k in ALL_FORMATS}}, {"/captureFormats"}),
        ({"captureFormats": ONLY_WACZ, "viewport": {"width": 0, "height": 99999}}, {"/viewport/width", "/viewport/height"}),
        ({"captureFormats": ONLY_WACZ, "urlPolicies": [{"pattern": "", "action": "block"}]},
         {"/urlPolicies/0/pattern", "/urlPolicies/0/action"}),
        ({"captureFormats": ONLY_WACZ, "behaviors": [{**script("a", "1;"), "version": 2}]}, {"/behaviors/0/version"}),
    ],
)
def test_validation_exception_with_field_list(capture_server, test_site, body, paths):
    r = capture(capture_server, url=test_site.url("/page"), **body)
    assert r.status_code == 400
    assert r.headers["x-amzn-errortype"] == "ValidationException"
    got = {f["path"] for f in r.json()["fieldList"]}
    assert got == paths
    assert "taskId" not in r.json()


def test_restjson_framing_errors(capture_server, test_site):
    body = json.dumps({"url": test_site.url("/other"), "captureFormats": HTML_ONLY})
    r = httpx.post(f"{capture_server}/captures", content=body, headers={"content-type": "application/json; charset=utf-8"})
    assert r.status_code == 415 and r.headers["x-amzn-errortype"] == "UnsupportedMediaTypeException"
    r = httpx.post(f"{capture_server}/captures", content=body,
                   headers={"content-type": "application/json", "accept": "text/html"})
    assert r.status_code == 406 and r.headers["x-amzn-errortype"] == "NotAcceptableException"
    r = httpx.post(f"{capture_server}/captures", content=b"{not json", headers={"content-type": "application/json"})
    assert r.status_code == 400 and r.headers["x-amzn-errortype"] == "ValidationException"


def test_unknown_field_names_the_camel_case_spelling(capture_server, test_site):
    r = capture(capture_server, url=test_site.url("/page"), captureFormats=ONLY_WACZ, correlation_id="x")
    assert r.status_code == 400
    (field,) = r.json()["fieldList"]
    assert field["path"] == "/correlation_id" and "correlationId" in field["message"]


def test_script_hash_mismatch_is_rejected_before_anything_runs(capture_server, test_site, s3_server):
    before = dict(test_site.hits)
    bad = script("scroll", "window.scrollTo(0, 1);")
    bad["sha256"] = script("x", "something else")["sha256"]
    good_upper = script("mark", "window.x = 1;")
    good_upper["sha256"] = good_upper["sha256"].upper()  # case-insensitive compare
    r = capture(capture_server, url=test_site.url("/page"), captureFormats=ONLY_WACZ,
                behaviors=[bad], preload=[good_upper], correlationId="hash-mismatch-case")
    assert r.status_code == 400 and r.headers["x-amzn-errortype"] == "ValidationException"
    assert [f["path"] for f in r.json()["fieldList"]] == ["/behaviors/0/sha256"]
    assert dict(test_site.hits) == before
    assert not [k for k in keys_with_prefix(s3_server, "") if "hash-mismatch-case" in k]


def test_cross_field_rules(capture_server, test_site):
    r = capture(capture_server, url=test_site.url("/page"), captureFormats=HTML_ONLY, signing=False)
    assert r.status_code == 400 and "signing" in r.json()["message"]
    r = capture(capture_server, url=test_site.url("/page"), captureFormats=ONLY_WACZ,
                loadWait={"minMs": 500, "maxMs": 100})
    assert r.status_code == 400 and "minMs" in r.json()["message"]
    r = capture(capture_server, url=test_site.url("/page"), captureFormats=ONLY_WACZ, labels=["é" * 120])
    assert r.status_code == 400 and "255" in r.json()["message"]


def test_busy_under_two_concurrent_requests(capture_server, test_site):
    results: dict[str, tuple[float, httpx.Response]] = {}

    def go(name: str) -> None:
        t0 = time.monotonic()
        r = capture(capture_server, url=test_site.url("/other"), captureFormats=HTML_ONLY)
        results[name] = (time.monotonic() - t0, r)

    with faults(capture_server, slow_ms=3000):
        first = threading.Thread(target=go, args=("first",))
        first.start()
        deadline = time.monotonic() + 10
        while not httpx.get(f"{capture_server}/status").json()["busy"]:
            assert time.monotonic() < deadline, "server never became busy"
            time.sleep(0.05)
        go("second")
        first.join(60)
    busy_s, busy = results["second"]
    done_s, done = results["first"]
    assert busy.status_code == 429 and busy.headers["x-amzn-errortype"] == "Busy"
    assert busy.json() == {"message": "a capture is already running on this browser"}
    assert busy_s < 0.5 * 3.0  # refused at once, not queued behind the 3 s capture
    assert done.status_code == 200 and done.json()["report"]["status"] == "success"
    assert done_s >= 3.0
    assert httpx.get(f"{capture_server}/status").json()["busy"] is False


def test_http_error_has_no_artifacts_and_no_wacz(capture_server, test_site, s3_server):
    r = capture(capture_server, url=test_site.url("/missing"), captureFormats=ALL_FORMATS)
    body = r.json()
    rep = body["report"]
    assert r.status_code == 200
    assert rep["status"] == "http_error" and rep["httpStatusCode"] == 404
    assert rep["errorDetails"]["type"] == "http" and rep["errorDetails"]["httpStatusText"] == "Not Found"
    assert rep["artifacts"] == {} and "waczStats" not in rep
    keys = task_keys(s3_server, rep["taskId"])
    assert keys == [f"{rep['taskId']}_.result.json"]  # the manifest only, no WACZ
    assert json.loads(s3_get(s3_server, body["manifest"]["location"])) == rep


def test_manifest_is_written_before_the_reply(capture_server, test_site, s3_server):
    r = capture(capture_server, url=test_site.url("/other"), captureFormats=HTML_ONLY, labels=["m"])
    loc = r.json()["manifest"]["location"]
    # Read at once, before anything else: the object must already be complete.
    assert json.loads(s3_get(s3_server, loc)) == r.json()["report"]
    assert loc.endswith("__m.result.json")


def test_fault_manifest_write_failure(capture_server, test_site):
    with faults(capture_server, manifest_fail=True):
        r = capture(capture_server, url=test_site.url("/other"), captureFormats=HTML_ONLY)
    m = r.json()["manifest"]
    assert list(m) == ["error"] and m["error"].startswith("s3://browserhive/")


@pytest.mark.parametrize(("kind", "status"), [("internal", "failed"), ("timeout", "timeout"), ("http", "http_error")])
def test_fault_forced_error_type(capture_server, test_site, kind, status):
    before = test_site.hits["/other"]
    with faults(capture_server, error_type=kind):
        rep = capture(capture_server, url=test_site.url("/other"), captureFormats=HTML_ONLY).json()["report"]
    assert rep["status"] == status and rep["errorDetails"]["type"] == kind and rep["artifacts"] == {}
    assert test_site.hits["/other"] == before


def test_fault_refuse_with_500(capture_server, test_site):
    with faults(capture_server, refuse_500=True):
        r = capture(capture_server, url=test_site.url("/other"), captureFormats=HTML_ONLY)
    assert r.status_code == 500 and r.headers["x-amzn-errortype"] == "InternalFailure" and r.json() == {}


def test_crashed_browser_is_relaunched(capture_server, test_site):
    launches = httpx.get(f"{capture_server}/status").json()["process"]["launches"]
    with faults(capture_server, crash_browser=True):
        rep = capture(capture_server, url=test_site.url("/other"), captureFormats=HTML_ONLY).json()["report"]
    assert rep["status"] == "success"
    status = httpx.get(f"{capture_server}/status").json()
    assert status["process"]["launches"] == launches + 1
    assert status["browser"]["connected"] is True and status["browser"]["version"].startswith("Chrome/")


def _process(server: str) -> dict:
    return httpx.get(f"{server}/status").json()["process"]


def test_browser_is_recycled_every_n_captures(capture_server, test_site):
    with faults(capture_server, recycle_every=2):
        ok = [capture(capture_server, url=test_site.url("/other"), captureFormats=HTML_ONLY).json()["report"]["status"]]
        st = _process(capture_server)  # ≥ 1 capture on this browser now
        ok.append(capture(capture_server, url=test_site.url("/other"), captureFormats=HTML_ONLY).json()["report"]["status"])
        mid = _process(capture_server)
        ok.append(capture(capture_server, url=test_site.url("/other"), captureFormats=HTML_ONLY).json()["report"]["status"])
        end = _process(capture_server)
    assert ok == ["success"] * 3
    # Exactly one relaunch within two captures once the browser has done ≥ 1, and the
    # counter restarts with it.
    assert end["recycles"] - st["recycles"] == 1
    assert end["capturesSinceLaunch"] == (2 if mid["recycles"] > st["recycles"] else 1)


def test_browser_is_recycled_above_the_rss_bound(capture_server, test_site):
    st = _process(capture_server)
    with faults(capture_server, max_rss_mb=1.0):  # any live Chromium is above 1 MiB
        rep = capture(capture_server, url=test_site.url("/other"), captureFormats=HTML_ONLY).json()["report"]
    assert rep["status"] == "success"
    assert _process(capture_server)["recycles"] == st["recycles"] + 1


def test_task_budget_ends_a_hanging_capture(capture_server, test_site, s3_server):
    t0 = time.monotonic()
    with faults(capture_server, task_total_ms=4000):
        r = capture(capture_server, url=test_site.url("/slow?ms=15000"), captureFormats=ONLY_WACZ)
    elapsed = time.monotonic() - t0
    rep = r.json()["report"]
    assert rep["status"] == "timeout"
    details = rep["errorDetails"]
    assert details["type"] == "timeout" and details["timeoutMs"] == 4000
    assert details["step"] in ("start-recording", "load-pages")  # load-pages unless the box is very busy
    assert 4.0 <= elapsed < 4.0 + 12  # budget, plus bounded teardown and the manifest write
    assert json.loads(s3_get(s3_server, r.json()["manifest"]["location"]))["status"] == "timeout"


def test_a_behavior_that_never_finishes_is_cut_at_the_budget(capture_server, test_site, s3_server):
    never = script("never", "new Promise(() => {})")
    t0 = time.monotonic()
    with faults(capture_server, task_total_ms=6000):
        r = capture(capture_server, url=test_site.url("/other"), captureFormats=ONLY_WACZ, behaviors=[never])
    rep = r.json()["report"]
    assert time.monotonic() - t0 < 6.0 + 12
    assert rep["status"] == "success"  # behaviors are cooperative; the capture still archives
    (line,) = behavior_reports(wacz_members(s3_get(s3_server, rep["artifacts"]["wacz"])))
    assert line["id"] == "never" and "did not finish" in line["error"]


def test_status_shape(capture_server):
    st = httpx.get(f"{capture_server}/status").json()
    assert st["busy"] is False and st["browser"]["connected"] is True
    assert set(st["build"]) == {"version", "revision", "buildTime"}
    assert st["build"]["version"] == "12.0.1" and st["build"]["revision"] == "waggle-capture"
    # this process's counters; `standin` is their name before decision 251, kept for old readers
    assert {"captures", "launches", "recycles", "lastPhasesMs"} <= set(st["process"]) and st["standin"] == st["process"]
    assert st["limits"] == {"maxResponseBytes": 20971520, "maxTaskBytes": 209715200, "maxPendingRequests": 5000}
    assert st["defaultUrlPolicies"] == [] and st["defaultContentTypePolicies"] == []
    r = httpx.delete(f"{capture_server}/captures")
    assert r.status_code == 404 and r.headers["x-amzn-errortype"] == "UnknownOperationException"


@pytest.fixture(scope="module")
def strict_server(s3_server, tmp_path_factory):
    """A capture server WITHOUT --allow-private (private targets refused)."""
    with capture_server_process(s3_server, tmp_path_factory.mktemp("strict"), "--settle", FAST_SETTLE) as url:
        yield url


@pytest.mark.parametrize("path_or_url", ["/page", "http://localhost:9/", "http://169.254.169.254/latest/meta-data/",
                                         "http://[::1]/", "http://2130706433/", "file:///etc/hostname"])
def test_private_targets_are_refused_without_the_flag(strict_server, test_site, s3_server, path_or_url):
    url = test_site.url(path_or_url) if path_or_url.startswith("/") else path_or_url
    before = dict(test_site.hits)
    r = capture(strict_server, url=url, captureFormats=ALL_FORMATS)
    assert r.status_code == 200
    rep = r.json()["report"]
    assert rep["status"] == "failed"
    assert rep["errorDetails"] == {"type": "internal", "message": "url is not allowed"}
    assert rep["artifacts"] == {}
    assert dict(test_site.hits) == before
    assert json.loads(s3_get(s3_server, r.json()["manifest"]["location"]))["status"] == "failed"


def test_artifact_sink_receives_every_artifact_and_its_locations_are_used(capture_server, test_site):
    from http.server import BaseHTTPRequestHandler

    received: list[tuple[str, str, str, int]] = []

    class Sink(BaseHTTPRequestHandler):
        def log_message(self, *a):
            pass

        def do_PUT(self):  # noqa: N802
            data = self.rfile.read(int(self.headers["Content-Length"]))
            received.append((self.path, self.headers["Authorization"], self.headers["Content-Type"], len(data)))
            body = json.dumps({"location": f"s3://sink-bucket/org/1{self.path}"}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    with LoopbackSite(Sink, daemon_threads=False) as sink:
        r = capture(capture_server, url=test_site.url("/other"), captureFormats={**HTML_ONLY, "wacz": True},
                    artifactSink={"url": f"{sink.url}/sink/crawl-7", "token": "tok-123"})
    body = r.json()
    tid = body["taskId"]
    assert body["report"]["artifacts"] == {"html": f"s3://sink-bucket/org/1/sink/crawl-7/{tid}_.html",
                                           "wacz": f"s3://sink-bucket/org/1/sink/crawl-7/{tid}_.wacz"}
    assert body["manifest"] == {"location": f"s3://sink-bucket/org/1/sink/crawl-7/{tid}_.result.json"}
    assert [(p.rsplit("/", 1)[1], a, t) for p, a, t, _ in received] == [
        (f"{tid}_.html", "Bearer tok-123", "text/html"),
        (f"{tid}_.wacz", "Bearer tok-123", "application/wacz+zip"),
        (f"{tid}_.result.json", "Bearer tok-123", "application/json"),
    ]


def test_shared_session_keeps_cookies_across_captures(capture_server, test_site, s3_server):
    from tests.devstack.helpers import warc_records

    first = capture(capture_server, url=test_site.url("/page"), captureFormats=HTML_ONLY, session="shared")
    assert first.json()["report"]["status"] == "success"
    rep = capture(capture_server, url=test_site.url("/other"), captureFormats=ONLY_WACZ, session="shared").json()["report"]
    recs = warc_records(wacz_members(s3_get(s3_server, rep["artifacts"]["wacz"]))["archive/data.warc.gz"])
    (req,) = [r for r, _ in recs if r.rec_type == "request" and r.rec_headers.get_header("WARC-Target-URI") == test_site.url("/other")]
    assert "sid=abc" in (req.http_headers.get_header("Cookie") or "")
    iso = capture(capture_server, url=test_site.url("/other"), captureFormats=ONLY_WACZ).json()["report"]
    recs = warc_records(wacz_members(s3_get(s3_server, iso["artifacts"]["wacz"]))["archive/data.warc.gz"])
    (req,) = [r for r, _ in recs if r.rec_type == "request" and r.rec_headers.get_header("WARC-Target-URI") == test_site.url("/other")]
    assert req.http_headers.get_header("Cookie") is None  # isolated: a fresh context


def test_isolated_capture_on_the_prepared_context_is_fresh(capture_server, test_site, s3_server):
    """The context prepared between captures (waggle_capture/spare.py) is a new one: the cookie
    an isolated capture got is not sent by the next, which started on that prepared context."""
    from tests.devstack.helpers import warc_records

    with faults(capture_server, recycle_every=10_000, max_rss_mb=1e9):  # no relaunch in between
        first = capture(capture_server, url=test_site.url("/page"), captureFormats=ONLY_WACZ).json()["report"]
        taken = _process(capture_server)["sparesTaken"]
        rep = capture(capture_server, url=test_site.url("/other"), captureFormats=ONLY_WACZ).json()["report"]
    assert first["status"] == rep["status"] == "success"
    assert _process(capture_server)["sparesTaken"] == taken + 1
    recs = warc_records(wacz_members(s3_get(s3_server, rep["artifacts"]["wacz"]))["archive/data.warc.gz"])
    (req,) = [r for r, _ in recs if r.rec_type == "request" and r.rec_headers.get_header("WARC-Target-URI") == test_site.url("/other")]
    assert req.http_headers.get_header("Cookie") is None


def test_no_request_reaches_the_site_after_the_answer(capture_server, test_site):
    """A page polling every 20 ms: the proxy is sealed before the answer (the context is closed
    after it), so the site sees no request once the answer is out (0.5 s allowed for its own
    threads to log what arrived before)."""
    r = capture(capture_server, url=test_site.url("/poll"), captureFormats=ONLY_WACZ,
                loadWait={"minMs": 300, "maxMs": 600, "quietMs": 200, "networkConcurrency": 0})
    answered = time.monotonic()
    assert r.json()["report"]["status"] == "success"
    time.sleep(2.0)
    pings = [t for p, t in list(test_site.arrivals) if p == "/ping"]
    assert len([t for t in pings if t <= answered]) >= 3  # it did poll during the capture
    assert [round(t - answered, 3) for t in pings if t > answered + 0.5] == []


def test_a_closing_context_cannot_reach_a_site_during_the_next_capture(capture_server, test_site):
    """The next capture starts while the polling page's context may still be closing (it does not
    wait for that teardown): the old context's own proxy stays sealed, so no poll gets through
    the next capture's open network."""
    r = capture(capture_server, url=test_site.url("/poll"), captureFormats=ONLY_WACZ,
                loadWait={"minMs": 300, "maxMs": 600, "quietMs": 200, "networkConcurrency": 0})
    answered = time.monotonic()
    nxt = capture(capture_server, url=test_site.url("/slow?ms=800"), captureFormats=ONLY_WACZ,
                  loadWait={"minMs": 0, "maxMs": 600, "quietMs": 0, "networkConcurrency": 0})
    assert r.json()["report"]["status"] == nxt.json()["report"]["status"] == "success"
    time.sleep(1.0)
    pings = [t for p, t in list(test_site.arrivals) if p == "/ping"]
    assert len([t for t in pings if t <= answered]) >= 3
    assert [round(t - answered, 3) for t in pings if t > answered + 0.5] == []


@pytest.mark.fault
def test_c10_crash_during_upload_leaves_no_manifest(s3_server, test_site, tmp_path):
    """Knob for case C10: the process dies after the first artifact upload, before the manifest."""
    proc, url = start_module("waggle_capture", "--allow-private", "--s3-endpoint", s3_server.endpoint,
                             "--settle", FAST_SETTLE, "--fault-crash-during-upload", "--s3-key-prefix", "c10",
                             tmp_dir=tmp_path)
    try:
        with pytest.raises(httpx.TransportError):
            capture(url, url=test_site.url("/other"), captureFormats={**HTML_ONLY, "wacz": True})
        assert proc.wait(30) == 137
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    keys = keys_with_prefix(s3_server, "c10/")
    assert len(keys) == 1 and keys[0].endswith(".html")  # the HTML landed; no WACZ, no manifest


def test_dismiss_banners_removes_cmp_and_overlays_but_not_header(capture_server, test_site, s3_server):
    rep = capture(capture_server, url=test_site.url("/banner"), captureFormats={**HTML_ONLY, "wacz": True},
                  dismissBanners={"spec": {"extraSelectors": ["#nothing", "p:::bad"]}}).json()["report"]
    assert rep["status"] == "success"
    html = s3_get(s3_server, rep["artifacts"]["html"]).decode()
    assert "We use cookies" not in html and "consent wall" not in html
    assert "site header" in html and "article text" in html
    pkg = json.loads(wacz_members(s3_get(s3_server, rep["artifacts"]["wacz"]))["datapackage.json"])
    d = pkg["browserhive:capture"]["dismissal"]
    assert d["removedSelectors"] == [{"framework": "Cookiebot", "selector": "#CybotCookiebotDialog"}]
    assert d["unusableSelectors"] == ["p:::bad"] and d["removedOverlays"] == 1 and d["framework"] == "Cookiebot"
    plain = capture(capture_server, url=test_site.url("/banner"), captureFormats=HTML_ONLY).json()["report"]
    assert "consent wall" in s3_get(s3_server, plain["artifacts"]["html"]).decode()  # not sent → not removed


def test_one_load_per_device_pixel_ratio_and_screenshot_at_the_last(capture_server, test_site, s3_server):
    import struct

    before = test_site.hits["/other"]
    rep = capture(capture_server, url=test_site.url("/other"), captureFormats={**HTML_ONLY, "png": True},
                  devicePixelRatios=[1, 2], viewport={"width": 400, "height": 300}).json()["report"]
    assert rep["status"] == "success" and rep["settle"]["devicePixelRatio"] == 2
    assert test_site.hits["/other"] == before + 2
    png = s3_get(s3_server, rep["artifacts"]["png"])
    assert struct.unpack(">II", png[16:24]) == (800, 600)


def test_unwritable_store_is_artifact_sink_failure_and_manifest_error(capture_server, test_site):
    import socket

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{s.getsockname()[1]}/sink"
    r = capture(capture_server, url=test_site.url("/other"), captureFormats={**HTML_ONLY, "wacz": True},
                artifactSink={"url": dead, "token": "t"})
    body = r.json()
    rep = body["report"]
    assert rep["status"] == "failed" and rep["errorDetails"]["type"] == "artifact_sink"
    assert rep["errorDetails"]["message"].startswith(dead + "/") and rep["artifacts"] == {}
    assert list(body["manifest"]) == ["error"] and body["manifest"]["error"].startswith(dead + "/")
