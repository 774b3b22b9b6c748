"""Capture server archives: a real capture of the local test site makes a valid, complete,
replayable WACZ (issue 5; cases C8, C9; contracts.md §B.3–§B.6)."""

from __future__ import annotations

import hashlib
import io
import json
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from warcio.archiveiterator import ArchiveIterator

from tests.devstack.helpers import (
    ALL_FORMATS, ONLY_WACZ, behavior_reports, capture, cdxj_lines, s3_get, script, wacz_members, warc_records,
)
from tests.devstack.site import FETCHED_MESSAGE, GZIP_TEXT

VENV_BIN = Path(sys.executable).parent

SCROLL = (
    "window.scrollTo(0, document.body.scrollHeight);\n"
    "new Promise(r => setTimeout(r, 400)).then(() =>\n"
    "  __bh.report('scroll', { y: window.scrollY, budgetLeft: __bh.remainingMs > 0, opt: __bh.opts.scroll.step,\n"
    "    preloadMain: window.__preloaded, preloadFrame: document.querySelector('iframe').contentWindow.__preloaded,\n"
    "    frameHasBh: 'ok' + typeof document.querySelector('iframe').contentWindow.__bh }));\n"
)
PRELOAD = "window.__preloaded = (window.__preloaded || 0) + 1;"


@pytest.fixture(scope="module")
def site_capture(capture_server, test_site, s3_server):
    """One full capture of /start (302 → /page with fetch, iframe, lazy image) with all formats."""
    test_site.connection_headers.clear()
    before = dict(test_site.hits)
    r = capture(capture_server, url=test_site.url("/start") + "  ", correlationId="corr 1", labels=["lab_el", " ", "x"],
                captureFormats=ALL_FORMATS, behaviors=[script("scroll", SCROLL, options={"step": 7})],
                preload=[script("mark", PRELOAD)])
    assert r.status_code == 200, r.text
    body = r.json()
    wacz = s3_get(s3_server, body["report"]["artifacts"]["wacz"])
    return {"body": body, "wacz": wacz, "members": wacz_members(wacz), "before": before,
            "connections": list(test_site.connection_headers)}


def test_report_has_the_contract_shape(site_capture, test_site, s3_server):
    body = site_capture["body"]
    rep = body["report"]
    assert body["taskId"] == rep["taskId"]
    assert rep["url"] == test_site.url("/start")  # requested URL, trimmed — not the redirect target
    assert rep["status"] == "success" and rep["httpStatusCode"] == 200
    assert rep["labels"] == ["lab_el", "x"] and rep["correlationId"] == "corr 1"
    assert rep["document"]["url"] == test_site.url("/page")
    assert set(rep["artifacts"]) == set(ALL_FORMATS)
    stem = f"s3://browserhive/{rep['taskId']}_corr%201_lab%5Fel-x"
    assert rep["artifacts"]["links"] == stem + ".links.json"
    assert body["manifest"] == {"location": stem + ".result.json"}
    assert json.loads(s3_get(s3_server, body["manifest"]["location"])) == rep
    assert rep["timestamp"].endswith("Z") and isinstance(rep["captureProcessingTimeMs"], int)
    assert rep["completeness"] == {"bodylessUrls": [], "truncatedUrls": [], "missingBodyUrls": [],
                                   "missingBodyCount": 0, "complete": True}
    stats = rep["waczStats"]
    assert stats["totalRecorded"] >= 6 and stats["totalBodyBytes"] > 0 and stats["totalDenied"] == 0
    assert rep["settle"]["endedBy"] in ("quiet", "deadline")
    assert s3_get(s3_server, rep["artifacts"]["png"]).startswith(b"\x89PNG")
    assert s3_get(s3_server, rep["artifacts"]["webp"])[8:12] == b"WEBP"
    assert b"Hello capture" in s3_get(s3_server, rep["artifacts"]["html"])
    assert b"MIME-Version" in s3_get(s3_server, rep["artifacts"]["mhtml"])


def test_links_json(site_capture, test_site, s3_server):
    links = json.loads(s3_get(s3_server, site_capture["body"]["report"]["artifacts"]["links"]))
    assert links["finalUrl"] == test_site.url("/page") and links["url"] == test_site.url("/start")
    assert links["correlationId"] == "corr 1"
    hrefs = [link["href"] for link in links["links"]]
    assert hrefs == [test_site.url("/other?x=1"), "https://example.com/ext"]  # de-duplicated, no mailto:
    assert links["links"][1]["rel"] == "nofollow" and links["links"][0]["rel"] is None
    assert links["links"][0]["text"] == "Other page"
    # waggle's extension: the same links inline in the answer, beside (not inside) the report
    assert site_capture["body"]["links"] == links["links"]
    assert "links" not in site_capture["body"]["report"]


def test_all_browser_traffic_went_through_the_guarded_proxy(site_capture):
    # The proxy forwards each plain-HTTP request on its own connection with "Connection: close";
    # Chromium talking to the site directly would have said keep-alive.
    conns = site_capture["connections"]
    assert {p for p, _ in conns} >= {"/start", "/page", "/api/data.json", "/frame.html", "/img/lazy.png"}
    assert all(c.lower() == "close" for _, c in conns), conns


def test_wacz_layout_and_datapackage(site_capture):
    m = site_capture["members"]
    with zipfile.ZipFile(io.BytesIO(site_capture["wacz"])) as z:
        info = {i.filename: i for i in z.infolist()}
    assert info["archive/data.warc.gz"].compress_type == zipfile.ZIP_STORED
    assert {"archive/data.warc.gz", "indexes/index.cdx", "pages/pages.jsonl", "datapackage.json",
            "behaviors/runtime.js", "behaviors/custom.jsonl", "preload/scripts.jsonl"} <= set(m)
    # unsigned: no datapackage-digest.json (contracts.md §B.5 "only when signed"; decision 391)
    assert "datapackage-digest.json" not in m
    pkg = json.loads(m["datapackage.json"])
    assert m["datapackage.json"].endswith(b"}\n") and pkg["profile"] == "data-package" and pkg["wacz_version"] == "1.1.1"
    listed = {r["path"]: r for r in pkg["resources"]}
    assert set(listed) == set(m) - {"datapackage.json"}
    for path, res in listed.items():
        assert res["hash"] == "sha256:" + hashlib.sha256(m[path]).hexdigest() and res["bytes"] == len(m[path])
    header, page = [json.loads(x) for x in m["pages/pages.jsonl"].decode().splitlines()]
    rep = site_capture["body"]["report"]
    assert header["format"] == "json-pages-1.0"
    assert page["url"] == rep["url"] and page["title"] == "Waggle test page"
    assert page["ts"] == pkg["mainPageDate"] and page["ts"] < rep["timestamp"]  # start vs end of capture
    cap = pkg["browserhive:capture"]
    assert cap["settings"]["behaviors"] == [{"id": "scroll", "origin": "custom", "sourceStored": True,
                                             "sha256": "sha256:" + hashlib.sha256(SCROLL.encode()).hexdigest()}]
    assert cap["settings"]["preload"] == [{"id": "mark"}] and cap["settings"]["urlPolicies"] == []
    assert [json.loads(x)["source"] for x in m["behaviors/custom.jsonl"].decode().splitlines()] == [SCROLL]
    assert [json.loads(x)["source"] for x in m["preload/scripts.jsonl"].decode().splitlines()] == [PRELOAD]
    reports = behavior_reports(m)
    assert reports[0]["id"] == "scroll" and reports[0]["data"]["y"] > 1000
    assert reports[0]["data"]["budgetLeft"] is True and reports[0]["data"]["opt"] == 7
    # preload ran once in the main frame and once in the iframe; __bh exists only in the main frame
    assert reports[0]["data"]["preloadMain"] == 1 and reports[0]["data"]["preloadFrame"] == 1
    assert reports[0]["data"]["frameHasBh"] == "okundefined"


def test_wacz_passes_wacz_validate_and_warcio_check(site_capture, tmp_path):
    f = tmp_path / "c.wacz"
    f.write_bytes(site_capture["wacz"])
    v = subprocess.run([str(VENV_BIN / "wacz"), "validate", "-f", str(f)], capture_output=True, text=True, timeout=120)
    assert v.returncode == 0, v.stdout + v.stderr
    assert "is valid" in v.stdout
    w = tmp_path / "data.warc.gz"
    w.write_bytes(site_capture["members"]["archive/data.warc.gz"])
    c = subprocess.run([str(VENV_BIN / "warcio"), "check", "-v", str(w)], capture_output=True, text=True, timeout=60)
    assert c.returncode == 0, c.stdout


def test_every_cdxj_entry_reads_back_its_record(site_capture, test_site):
    m = site_capture["members"]
    warc = m["archive/data.warc.gz"]
    lines = cdxj_lines(m["indexes/index.cdx"])
    assert [ln[0] for ln in lines] == sorted(ln[0] for ln in lines)
    urls = {ln[2]["url"] for ln in lines}
    assert {test_site.url(p) for p in ("/start", "/page", "/api/data.json", "/frame.html", "/img/lazy.png")} <= urls
    for _key, ts, entry in lines:
        assert all(isinstance(v, str) for v in entry.values()) and entry["filename"] == "data.warc.gz"
        chunk = warc[int(entry["offset"]):int(entry["offset"]) + int(entry["length"])]
        rec = next(iter(ArchiveIterator(io.BytesIO(chunk))))
        assert rec.rec_type == "response"
        assert rec.rec_headers.get_header("WARC-Target-URI") == entry["url"]
        assert rec.http_headers.get_statuscode() == entry["status"]
        assert len(ts) == 14


def test_warc_records_are_http11_with_decoded_bodies(site_capture, test_site):
    warc = site_capture["members"]["archive/data.warc.gz"]
    types, responses, requests = [], {}, {}
    for rec in ArchiveIterator(io.BytesIO(warc)):
        types.append(rec.rec_type)
        if rec.rec_type == "response":
            responses[rec.rec_headers.get_header("WARC-Target-URI")] = (rec, rec.content_stream().read())
        elif rec.rec_type == "request":
            requests[rec.rec_headers.get_header("WARC-Target-URI")] = rec
    assert types[0] == "warcinfo"
    info = next(iter(ArchiveIterator(io.BytesIO(warc))))
    fields = info.content_stream().read().decode().splitlines()
    assert [f.split(":")[0] for f in fields] == ["software", "format"]  # decision 391
    assert info.rec_headers.get_header("WARC-Filename") == f"{site_capture['body']['taskId']}.warc.gz"
    redirect, _ = responses[test_site.url("/start")]
    assert redirect.http_headers.get_statuscode() == "302"
    assert redirect.http_headers.get_header("Location") == "/page"
    for url, (rec, payload) in responses.items():
        h = rec.http_headers
        assert h.protocol == "HTTP/1.1"
        assert h.get_header("Content-Encoding") is None and h.get_header("Transfer-Encoding") is None
        assert int(h.get_header("Content-Length")) == len(payload)
        assert rec.rec_headers.get_header("WARC-Payload-Digest").startswith("sha256:")
        req = requests[url]
        assert req.rec_headers.get_header("WARC-Concurrent-To") == rec.rec_headers.get_header("WARC-Record-ID")
        # a GET's empty payload has no payload digest (decision 391); the block is still digested
        if req.http_headers.protocol == "GET":  # warcio keeps a request line's method as its protocol
            assert req.rec_headers.get_header("WARC-Payload-Digest") is None
        assert req.rec_headers.get_header("WARC-Block-Digest").startswith("sha256:")
    assert FETCHED_MESSAGE.encode() in responses[test_site.url("/api/data.json")][1]
    assert responses[test_site.url("/img/lazy.png")][1].startswith(b"\x89PNG")
    assert "sid=abc" in responses[test_site.url("/page")][0].http_headers.get_header("Set-Cookie")


def test_pywb_imports_the_wacz_and_replays_fetched_data(site_capture, test_site, tmp_path):
    """C8: pywb finds the index (wb-manager add --unpack-wacz) and replays the page and the
    data the page fetched with fetch()."""
    f = tmp_path / "site.wacz"
    f.write_bytes(site_capture["wacz"])
    root = tmp_path / "pywb"
    root.mkdir()
    replay = subprocess.run(
        [sys.executable, str(Path(__file__).with_name("pywb_replay.py")), str(root), "coll", str(f),
         test_site.url("/api/data.json"), "mp:" + test_site.url("/page"), test_site.url("/img/lazy.png"),
         test_site.url("/never-captured")],
        capture_output=True, text=True, timeout=120)
    got = [json.loads(line) for line in replay.stdout.splitlines() if line.startswith("{")]
    assert len(got) == 5, replay.stderr[-2000:]
    imported = got.pop(0)
    assert not any("indices" in w for w in imported["warnings"]), imported["warnings"]
    ours = {e["url"] for _k, _t, e in cdxj_lines(site_capture["members"]["indexes/index.cdx"])}
    assert set(imported["indexed"]) == ours and len(imported["indexed"]) == len(ours)
    data, page, img, missing = got
    assert data["status"] == 200 and FETCHED_MESSAGE in data["body"]
    assert page["status"] == 200 and "Hello capture" in page["body"] and "/api/data.json" in page["body"]
    assert img["status"] == 200
    assert missing["status"] == 404


def test_c9_chunked_gzip_stored_decoded(capture_server, test_site, s3_server, tmp_path):
    r = capture(capture_server, url=test_site.url("/gzip"), captureFormats=ONLY_WACZ, trace=True)
    rep = r.json()["report"]
    assert rep["status"] == "success", rep
    members = wacz_members(s3_get(s3_server, rep["artifacts"]["wacz"]))
    warc = members["archive/data.warc.gz"]
    rec_body = None
    for rec in ArchiveIterator(io.BytesIO(warc)):
        if rec.rec_type == "response" and rec.rec_headers.get_header("WARC-Target-URI") == test_site.url("/gzip"):
            h = rec.http_headers
            assert h.get_header("Content-Encoding") is None and h.get_header("Transfer-Encoding") is None
            rec_body = rec.content_stream().read()
            assert int(h.get_header("Content-Length")) == len(rec_body)
    assert rec_body == GZIP_TEXT.encode()
    w = tmp_path / "gz.warc.gz"
    w.write_bytes(warc)
    check = subprocess.run([str(VENV_BIN / "warcio"), "check", "-v", str(w)], capture_output=True, text=True, timeout=60)
    assert check.returncode == 0, check.stdout


def test_deny_policy_blocks_before_sending(capture_server, test_site, s3_server):
    before = test_site.hits["/tracker.js"]
    r = capture(capture_server, url=test_site.url("/page"), captureFormats=ONLY_WACZ,
                urlPolicies=[{"pattern": "*/tracker.js", "action": "deny"}])
    rep = r.json()["report"]
    assert rep["status"] == "success"
    assert test_site.hits["/tracker.js"] == before  # never sent
    assert rep["waczStats"]["totalDenied"] == 1 and rep["waczStats"]["totalBlocked"] == 1
    recs = warc_records(wacz_members(s3_get(s3_server, rep["artifacts"]["wacz"]))["archive/data.warc.gz"])
    tracker = [(x, p) for x, p in recs if x.rec_headers.get_header("WARC-Target-URI") == test_site.url("/tracker.js")]
    assert [x.rec_type for x, _ in tracker] == ["metadata"]
    assert b"action: deny" in tracker[0][1]


def test_no_archive_no_body_and_content_type_policies(capture_server, test_site, s3_server):
    scroll = script("scroll", "window.scrollTo(0, document.body.scrollHeight); new Promise(r => setTimeout(r, 400))")
    rep = capture(capture_server, url=test_site.url("/page"), captureFormats=ONLY_WACZ, behaviors=[scroll],
                  urlPolicies=[{"pattern": "*/tracker.js", "action": "no-archive"},
                               {"pattern": "*/api/data.json", "action": "no-body"}],
                  contentTypePolicies=[{"prefix": "image/", "action": "no-body"}]).json()["report"]
    assert rep["status"] == "success"
    stats = rep["waczStats"]
    assert (stats["totalBlocked"], stats["totalDenied"], stats["totalSkippedUrlPolicy"], stats["totalSkippedContentType"]) == (1, 0, 1, 1)
    assert rep["completeness"]["complete"] is True  # policy omissions are never "truncated"
    recs = warc_records(wacz_members(s3_get(s3_server, rep["artifacts"]["wacz"]))["archive/data.warc.gz"])
    by_url: dict[str, dict[str, bytes]] = {}
    for r, payload in recs:
        by_url.setdefault(r.rec_headers.get_header("WARC-Target-URI"), {})[r.rec_type] = payload
    assert set(by_url[test_site.url("/tracker.js")]) == {"metadata"}
    assert b"action: no-archive" in by_url[test_site.url("/tracker.js")]["metadata"]
    assert by_url[test_site.url("/api/data.json")]["response"] == b""
    assert by_url[test_site.url("/img/lazy.png")]["response"] == b""
    assert by_url[test_site.url("/page")]["response"].startswith(b"<!doctype html>")


def test_withheld_main_document_yields_no_page_formats(capture_server, test_site):
    rep = capture(capture_server, url=test_site.url("/other"), captureFormats={**ALL_FORMATS, "webp": False, "mhtml": False},
                  contentTypePolicies=[{"prefix": "text/html", "action": "no-body"}]).json()["report"]
    assert rep["status"] == "success" and rep["document"]["withheld"] == "content-type"
    assert set(rep["artifacts"]) == {"wacz"}


def test_deny_of_the_first_navigation_is_success_without_artifacts(capture_server, test_site, s3_server):
    before = test_site.hits["/other"]
    r = capture(capture_server, url=test_site.url("/other"), captureFormats=ALL_FORMATS,
                urlPolicies=[{"pattern": "http://127.0.0.1:*/other", "action": "deny"}]).json()
    rep = r["report"]
    assert rep["status"] == "success" and rep["artifacts"] == {} and "httpStatusCode" not in rep
    assert "waczStats" not in rep and rep["document"] == {"withheld": "deny"}
    assert test_site.hits["/other"] == before
    assert json.loads(s3_get(s3_server, r["manifest"]["location"])) == rep
