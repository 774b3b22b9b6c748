"""Extension ``revisit`` (decision 181, issue 27 item 1): a response whose payload digest the
ledger says the organization holds is written as a WARC/1.1 revisit record; a lookup that fails
stores every body. Real Chromium, real HTTP to a ledger stand-in on 127.0.0.1."""

from __future__ import annotations

import json
import subprocess
import sys
from http.server import BaseHTTPRequestHandler

import pytest

from waggle_capture.behaviors import RUNTIME_JS
from waggle_capture.revisits import payload_digest
from tests.devstack.helpers import ALL_FORMATS, capture, s3_get, script, wacz_members, warc_records
from tests.fixtures.loopback import LoopbackSite

BIG = b"<html><body>" + b"x" * 300_000 + b"</body></html>"  # the test site's /big
WACZ_ONLY = {**{k: False for k in ALL_FORMATS}, "wacz": True}
ORIGINAL = {"uri": "http://127.0.0.1/original-big", "date": "2026-11-30T10:00:00Z"}


class Ledger:
    """A digest lookup that holds every digest asked (``status`` 200) or refuses (other); with
    ``written``, it holds nothing and answers every resource asked as written by the crawl."""

    def __init__(self, status: int = 200, written: bool = False) -> None:
        self.asked: list[dict] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802
                body = json.loads(self.rfile.read(int(self.headers["content-length"])))
                outer.asked.append({"body": body, "auth": self.headers.get("authorization")})
                answer = {"held": {d: ORIGINAL for d in body["digests"]}} if status == 200 else {"error": "no"}
                if written:
                    answer = {"held": {}, "written": body.get("resources", [])}
                data = json.dumps(answer).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *a) -> None:
                pass

        self._site = LoopbackSite(Handler, daemon_threads=False)
        self.url = f"{self._site.url}/api/crawls/x/digests"

    def close(self) -> None:
        self._site.stop()


@pytest.fixture
def ledger_held():
    led = Ledger(200)
    yield led
    led.close()


@pytest.fixture
def ledger_refusing():
    led = Ledger(503)
    yield led
    led.close()


@pytest.fixture
def ledger_written():
    led = Ledger(200, written=True)
    yield led
    led.close()


def _capture(server, site, s3_server, spec):
    rep = capture(server, url=site.url("/big"), captureFormats=WACZ_ONLY, revisit=spec).json()["report"]
    assert rep["status"] == "success", rep
    return wacz_members(s3_get(s3_server, rep["artifacts"]["wacz"]))


def test_held_payload_is_a_revisit_record_that_warcio_checks(capture_server, test_site, s3_server, ledger_held,
                                                             tmp_path):
    members = _capture(capture_server, test_site, s3_server, {"url": ledger_held.url, "token": "tok-1"})
    [asked] = ledger_held.asked  # one lookup per capture
    assert asked["auth"] == "Bearer tok-1"
    assert payload_digest(BIG) in asked["body"]["digests"]
    records = {(r.rec_headers.get_header("WARC-Type"), r.rec_headers.get_header("WARC-Target-URI")): (r, p)
               for r, p in warc_records(members["archive/data.warc.gz"])}
    rec, payload = records[("revisit", test_site.url("/big"))]
    assert ("response", test_site.url("/big")) not in records
    h = rec.rec_headers
    assert h.get_header("WARC-Profile") == "http://netpreserve.org/warc/1.1/revisit/identical-payload-digest"
    assert h.get_header("WARC-Refers-To-Target-URI") == ORIGINAL["uri"]
    assert h.get_header("WARC-Refers-To-Date") == ORIGINAL["date"]
    assert h.get_header("WARC-Payload-Digest") == payload_digest(BIG)
    assert payload == b"" and rec.http_headers.get_statuscode() == "200"
    assert rec.http_headers.get_header("Content-Type") == "text/html"  # the headers kept
    assert len(members["archive/data.warc.gz"]) < len(BIG) // 10  # the body is not stored
    pkg = json.loads(members["datapackage.json"])["browserhive:capture"]
    assert pkg["revisits"] == {"lookup": "ok", "count": 1, "bytesSaved": len(BIG)}
    cdxj = members["indexes/index.cdx"].decode()
    assert '"mime": "warc/revisit"' in cdxj
    w = tmp_path / "data.warc.gz"
    w.write_bytes(members["archive/data.warc.gz"])
    done = subprocess.run([sys.executable, "-m", "warcio.cli", "check", "-v", str(w)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize("where", ["refusing", "unreachable"])
def test_failed_lookup_stores_every_body(capture_server, test_site, s3_server, ledger_refusing, where):
    url = ledger_refusing.url if where == "refusing" else "http://127.0.0.1:9/api/crawls/x/digests"
    members = _capture(capture_server, test_site, s3_server, {"url": url, "token": "t"})
    types = [r.rec_headers.get_header("WARC-Type") for r, _ in warc_records(members["archive/data.warc.gz"])]
    assert "revisit" not in types
    bodies = [p for r, p in warc_records(members["archive/data.warc.gz"])
              if r.rec_headers.get_header("WARC-Type") == "response"
              and r.rec_headers.get_header("WARC-Target-URI") == test_site.url("/big")]
    assert bodies == [BIG]
    pkg = json.loads(members["datapackage.json"])["browserhive:capture"]
    assert pkg["revisits"]["lookup"].startswith("failed:") and pkg["revisits"]["count"] == 0


def test_without_the_member_nothing_is_asked_and_nothing_recorded(capture_server, test_site, s3_server):
    rep = capture(capture_server, url=test_site.url("/big"), captureFormats=WACZ_ONLY).json()["report"]
    members = wacz_members(s3_get(s3_server, rep["artifacts"]["wacz"]))
    assert "revisits" not in json.loads(members["datapackage.json"])["browserhive:capture"]
    assert "revisit" not in [r.rec_headers.get_header("WARC-Type") for r, _ in warc_records(members["archive/data.warc.gz"])]


def test_status_advertises_revisit(capture_server):
    import httpx
    assert "revisit" in httpx.get(f"{capture_server}/status").json()["extensions"]


BEHAVIOR = script("mark", "document.body.dataset.marked = '1'; __bh.report('mark', {ok: true});")


def test_resources_the_crawl_wrote_are_left_out(capture_server, test_site, s3_server, ledger_written):
    """Extension recrawl (decision 321): sub-resources whose URL and payload the crawl already
    wrote get no record at all (listed, with digests, in the datapackage); the main document is
    never asked about and always stored; a behavior source the crawl stored is named by sha256."""
    import hashlib
    rep = capture(capture_server, url=test_site.url("/page"), captureFormats=WACZ_ONLY, behaviors=[BEHAVIOR],
                  revisit={"url": ledger_written.url, "token": "t"}).json()["report"]
    assert rep["status"] == "success", rep
    members = wacz_members(s3_get(s3_server, rep["artifacts"]["wacz"]))
    [asked] = ledger_written.asked
    pairs = {(r["uri"], r["digest"]) for r in asked["body"]["resources"]}
    source_sha = "sha256:" + hashlib.sha256(BEHAVIOR["source"].encode()).hexdigest()
    assert ("urn:behavior:mark", source_sha) in pairs
    assert test_site.url("/page") not in {u for u, _ in pairs}  # the main document: never left out
    assert (test_site.url("/tracker.js"), payload_digest(b"window.tracked = true;")) in pairs
    records = [(r.rec_headers.get_header("WARC-Type"), r.rec_headers.get_header("WARC-Target-URI"))
               for r, _ in warc_records(members["archive/data.warc.gz"])]
    left = json.loads(members["datapackage.json"])["browserhive:capture"]["revisits"]["sameCrawl"]
    left_urls = set(left["resources"])  # URLs only (decision 391)
    assert {test_site.url("/tracker.js"), test_site.url("/frame.html")} <= left_urls
    assert left_urls <= {u for u, _ in pairs} and left["count"] == len(left["resources"])
    assert not [r for r in records if r[1] in left_urls]  # no response, revisit nor request record
    assert ("response", test_site.url("/page")) in records and ("request", test_site.url("/page")) in records
    pkg = json.loads(members["datapackage.json"])["browserhive:capture"]
    assert pkg["settings"]["behaviors"] == [{"id": "mark", "origin": "custom", "sha256": source_sha,
                                             "sourceStored": False}]
    runtime_sha = "sha256:" + hashlib.sha256(RUNTIME_JS.encode()).hexdigest()
    assert ("urn:behaviors:runtime.js", runtime_sha) in pairs
    assert pkg["settings"]["behaviorRuntime"] == {"sha256": runtime_sha, "sourceStored": False}
    # every source and the runtime are the crawl's already: only the page's own report is kept
    assert "behaviors/custom.jsonl" not in members and "behaviors/runtime.js" not in members
    assert "behaviors/reports.jsonl" not in members and pkg["behaviorReports"][0]["id"] == "mark"  # decision 391
    assert all(isinstance(u, str) for u in left["resources"]) and len(left_urls) == len(left["resources"])
    cdxj_urls = {json.loads(x.split(" ", 2)[2])["url"] for x in members["indexes/index.cdx"].decode().splitlines()}
    assert not cdxj_urls & left_urls


def test_a_crawl_that_wrote_nothing_stores_everything(capture_server, test_site, s3_server, ledger_held):
    """The same page with a lookup that answers no ``written``: every sub-resource has its
    records and the behavior source is stored."""
    rep = capture(capture_server, url=test_site.url("/page"), captureFormats=WACZ_ONLY, behaviors=[BEHAVIOR],
                  revisit={"url": ledger_held.url, "token": "t"}).json()["report"]
    members = wacz_members(s3_get(s3_server, rep["artifacts"]["wacz"]))
    urls = {r.rec_headers.get_header("WARC-Target-URI") for r, _ in warc_records(members["archive/data.warc.gz"])}
    assert test_site.url("/tracker.js") in urls
    assert "sameCrawl" not in json.loads(members["datapackage.json"])["browserhive:capture"]["revisits"]
    [line] = [json.loads(x) for x in members["behaviors/custom.jsonl"].decode().splitlines()]
    assert line["source"] == BEHAVIOR["source"] and members["behaviors/runtime.js"] == RUNTIME_JS.encode()
