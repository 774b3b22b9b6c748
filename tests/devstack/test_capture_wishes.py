"""The site's wishes and late links (issue 24 item 7), against the real capture server, real
Chromium and a loopback site of this file: ``<meta name="robots">`` / ``<meta name="waggle">`` and
``X-Robots-Tag`` (for every agent, for us, for another agent) reported as the answer's ``robots``
(extension robotsMeta); ``honourNoarchive`` ends a noarchive page as a ``policy`` failure with
nothing written to S3 but the manifest; links a script adds after the load event are read once
the DOM is quiet, the wait bounded and reported in ``settle.dom``."""

from __future__ import annotations

from http.server import BaseHTTPRequestHandler

import httpx
import pytest

from waggle_capture.domquiet import MAX_MS, QUIET_MS
from waggle_capture.robotsmeta import NOARCHIVE_MESSAGE, combine, directives, header_for_us, meta_for_us
from tests.devstack.helpers import capture
from tests.fixtures.loopback import LoopbackSite

FORMATS = {"png": False, "webp": False, "html": False, "links": True, "mhtml": False, "wacz": True}


def _page(head: str = "", body: str = "", script: str = "") -> bytes:
    return (f"<!doctype html><html><head><title>t</title>{head}</head><body><a href='/first'>first</a>{body}"
            f"<script>{script}</script></body></html>").encode()


ADD_LINK = "const a = document.createElement('a'); a.href = '/{0}'; a.textContent = '{0}'; document.body.append(a);"
ON_LOAD = "addEventListener('load', () => setTimeout(() => {{ {0} }}, {1}));"

PAGES: dict[str, tuple[dict[str, str], bytes]] = {
    "/static": ({}, _page()),
    "/late": ({}, _page(script=ON_LOAD.format(ADD_LINK.format("late-link"), 2000))),
    # a chain of timers: each link is added 300 ms after the previous one (the DOM is never quiet for 500 ms)
    "/chain": ({}, _page(script="let n = 0; const step = () => { " + ADD_LINK.replace("{0}", "chain-' + n + '")
                         + " if (++n < 6) setTimeout(step, 300); }; addEventListener('load', () => setTimeout(step, 300));")),
    "/busy": ({}, _page(script="addEventListener('load', () => setInterval(() => { const s = document.createElement('span');"
                               " document.body.append(s); }, 100));")),
    "/far": ({}, _page(script=ON_LOAD.format(ADD_LINK.format("far-link"), 9000))),
    "/meta-noarchive": ({}, _page(head='<meta name="robots" content="noarchive">')),
    "/meta-waggle": ({}, _page(head='<meta name="WAGGLE" content="NoArchive, nofollow">')),
    "/meta-googlebot": ({}, _page(head='<meta name="googlebot" content="noarchive, nofollow">')),
    "/meta-nofollow": ({}, _page(head='<meta name="robots" content="index, nofollow">')),
    "/meta-none": ({}, _page(head='<meta name="robots" content="none">')),
    "/meta-late": ({}, _page(script=ON_LOAD.format(
        "const m = document.createElement('meta'); m.name = 'robots'; m.content = 'noarchive';"
        " document.head.append(m);", 1000))),
    "/header-noarchive": ({"X-Robots-Tag": "noarchive"}, _page()),
    "/header-waggle": ({"X-Robots-Tag": "waggle: noarchive, nofollow"}, _page()),
    "/header-googlebot": ({"X-Robots-Tag": "googlebot: noarchive"}, _page()),
    "/header-unavailable": ({"X-Robots-Tag": "unavailable_after: 25 Jun 2010 15:00:00 PST"}, _page()),
    "/file.pdf": ({"X-Robots-Tag": "noarchive", "Content-Type": "application/pdf"}, b"%PDF-1.4\n%%EOF\n"),
}


class WishesSite(LoopbackSite):
    """Serves :data:`PAGES` on 127.0.0.1 (OS-chosen port); every other path 404."""

    def __init__(self) -> None:
        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:
                pass

            def do_GET(self) -> None:  # noqa: N802
                headers, body = PAGES.get(self.path, ({}, b"not here"))
                self.send_response(200 if self.path in PAGES else 404)
                for k, v in {"Content-Type": "text/html; charset=utf-8", **headers,
                             "Content-Length": str(len(body))}.items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(body)

        super().__init__(Handler)


@pytest.fixture(scope="module")
def site():
    with WishesSite() as s:
        yield s


def _capture(server: str, url: str, **extra) -> dict:
    r = capture(server, url=url, captureFormats=FORMATS, **extra)
    assert r.status_code == 200, r.text
    return r.json()


def _hrefs(answer: dict) -> set[str]:
    return {link["href"].rsplit("/", 1)[-1] for link in answer.get("links") or []}


def _objects(s3_server, task_id: str) -> list[str]:
    listed = s3_server.client().list_objects_v2(Bucket=s3_server.bucket)
    return sorted(o["Key"] for o in listed.get("Contents", []) if task_id in o["Key"])


# -- the rules, without a browser ------------------------------------------------------------------

def test_directives_and_agents():
    assert directives("NoArchive , nofollow") == {"noarchive", "nofollow"}
    assert directives("none") == {"none", "noindex", "nofollow"}
    assert header_for_us("noarchive") == "noarchive"
    assert header_for_us("waggle: noarchive").strip() == "noarchive"
    assert header_for_us("WAGGLE:nofollow") == "nofollow"
    assert header_for_us("googlebot: noarchive") is None
    assert header_for_us("unavailable_after: 25 Jun 2010 15:00:00 PST") == "unavailable_after: 25 Jun 2010 15:00:00 PST"
    assert header_for_us("max-snippet: 20") == "max-snippet: 20"
    assert meta_for_us([["robots", "noarchive"], ["googlebot", "nofollow"], ["Waggle", "nofollow"], ["x", 1]]) == [
        "noarchive", "nofollow"]
    assert combine([], []) is None
    assert combine(["index"], []) == {"noarchive": False, "nofollow": False, "meta": "index"}
    assert combine(["noarchive"], ["nofollow"]) == {"noarchive": True, "nofollow": True, "meta": "noarchive",
                                                   "header": "nofollow"}


# -- robots meta and X-Robots-Tag through the real server -----------------------------------------------

@pytest.mark.parametrize("path, noarchive, nofollow", [
    ("/meta-noarchive", True, False),
    ("/meta-waggle", True, True),
    ("/meta-nofollow", False, True),
    ("/meta-none", False, True),
    ("/meta-late", True, False),  # added by a script 1 s after the load: read after the DOM is quiet
    ("/header-noarchive", True, False),
    ("/header-waggle", True, True),
])
def test_what_the_page_said_is_reported_and_archived_when_not_honoured(capture_server, site, path, noarchive,
                                                                       nofollow):
    answer = _capture(capture_server, site.url + path)
    assert answer["report"]["status"] == "success"
    assert answer["robots"]["noarchive"] is noarchive and answer["robots"]["nofollow"] is nofollow
    assert answer["report"]["artifacts"].get("wacz")


@pytest.mark.parametrize("path", ["/static", "/meta-googlebot", "/header-googlebot", "/header-unavailable"])
def test_other_agents_and_other_directives_ask_nothing_of_us(capture_server, site, path):
    answer = _capture(capture_server, site.url + path, honourNoarchive=True)
    assert answer["report"]["status"] == "success", answer["report"]
    robots = answer.get("robots")
    assert robots is None or (robots["noarchive"] is False and robots["nofollow"] is False), robots


@pytest.mark.parametrize("path", ["/meta-noarchive", "/meta-waggle", "/meta-late", "/header-noarchive",
                                  "/header-waggle", "/file.pdf"])
def test_honoured_noarchive_is_a_policy_failure_with_no_archive(capture_server, s3_server, site, path):
    answer = _capture(capture_server, site.url + path, honourNoarchive=True)
    report = answer["report"]
    assert report["status"] == "failed" and report["errorDetails"] == {"type": "policy", "message": NOARCHIVE_MESSAGE}
    assert report["artifacts"] == {} and answer["robots"]["noarchive"] is True
    assert "links" not in answer
    keys = _objects(s3_server, answer["taskId"])
    assert keys and all(k.endswith(".result.json") for k in keys), keys  # the manifest only: no WACZ, no format


def test_nofollow_alone_is_archived_even_when_honouring(capture_server, site):
    answer = _capture(capture_server, site.url + "/meta-nofollow", honourNoarchive=True)
    assert answer["report"]["status"] == "success" and answer["robots"]["nofollow"] is True
    assert "first" in _hrefs(answer)  # the links are reported; not following them is the client's rule


def test_honour_noarchive_must_be_a_boolean(capture_server, site):
    r = capture(capture_server, url=site.url + "/static", captureFormats=FORMATS, honourNoarchive="yes")
    assert r.status_code == 400 and "/honourNoarchive" in r.text


def test_status_lists_the_extension(capture_server):
    assert "robotsMeta" in httpx.get(f"{capture_server}/status").json()["extensions"]


# -- late links ------------------------------------------------------------------------------------------

def test_a_link_added_two_seconds_after_the_load_is_read(capture_server, site):
    answer = _capture(capture_server, site.url + "/late")
    assert {"first", "late-link"} <= _hrefs(answer)
    dom = answer["report"]["settle"]["dom"]
    assert dom["endedBy"] == "quiet" and dom["quietMs"] == QUIET_MS and dom["maxMs"] == MAX_MS
    assert dom["lastMutationAtMs"] >= 2000 * 0.95
    assert dom["waitedMs"] > 0


def test_a_chain_of_late_links_is_read_to_its_end(capture_server, site):
    answer = _capture(capture_server, site.url + "/chain")
    assert {f"chain-{n}" for n in range(6)} <= _hrefs(answer)


def test_a_static_page_does_not_wait(capture_server, site):
    dom = _capture(capture_server, site.url + "/static")["report"]["settle"]["dom"]
    assert dom["endedBy"] == "quiet" and dom["waitedMs"] < QUIET_MS, dom


def test_a_dom_that_never_rests_is_waited_for_at_most_the_bound(capture_server, site):
    answer = _capture(capture_server, site.url + "/busy")
    dom = answer["report"]["settle"]["dom"]
    assert dom["endedBy"] == "limit", dom
    # the bound runs from the load event; the settle wait already took part of it
    assert dom["waitedMs"] <= MAX_MS * 1.1, dom
    assert answer["report"]["status"] == "success"


def test_a_link_due_after_the_bound_is_not_waited_for(capture_server, site):
    answer = _capture(capture_server, site.url + "/far")
    dom = answer["report"]["settle"]["dom"]
    assert dom["endedBy"] == "quiet" and dom["waitedMs"] < QUIET_MS, dom
    assert "far-link" not in _hrefs(answer)


def test_the_wait_is_a_phase_of_the_capture(capture_server, site):
    _capture(capture_server, site.url + "/late")
    phases = httpx.get(f"{capture_server}/status").json()["process"]["lastPhasesMs"]
    assert "dom-quiet" in phases and phases["dom-quiet"] >= 500, phases
    order = list(phases)
    assert order.index("dom-quiet") < order.index("seal")
