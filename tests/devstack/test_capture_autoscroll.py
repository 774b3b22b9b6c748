"""The default ``autoscroll`` behavior through the capture server with its ``scrollHooks``
extension (issue 11 item 4): a long static document is not stepped through, pages that load
content on scroll still are, and what they load is in the WACZ. Real Chromium, pages served on
127.0.0.1 by this file."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from urllib.parse import urlsplit

import httpx
import pytest

from waggle_capture.scrollhooks import HOOKS_JS
from tests.devstack.helpers import ONLY_WACZ, behavior_reports, capture, cdxj_lines, s3_get, script, wacz_members
from tests.devstack.site import tiny_png
from tests.fixtures.loopback import LoopbackSite

TEXT = "<p>" + "A static paragraph of a long reference document. " * 12 + "</p>\n"
# ~120,000 px of text; a click listener and a resize listener react to nothing a scroll does.
LONG = ("<!doctype html><html><head><title>long</title></head><body>" + TEXT * 1500
        + "<script>addEventListener('click', () => {}); addEventListener('resize', () => {});"
        " document.body.addEventListener('keydown', () => {});</script></body></html>")
# A scroll listener that fetches the next chunk (an HTML fragment with an image) at the bottom.
INFINITE = """<!doctype html><html><head><title>infinite</title></head><body style="margin:0">
<div id="feed"><div style="height:1500px">first</div></div>
<script>
  var loaded = 0, busy = false;
  addEventListener('scroll', () => {
    if (busy || loaded >= 4 || scrollY + innerHeight < document.documentElement.scrollHeight - 200) return;
    busy = true;
    fetch('/chunk/' + (loaded + 1)).then(r => r.text()).then(html => {
      const d = document.createElement('div'); d.innerHTML = html;
      document.getElementById('feed').appendChild(d); loaded++; busy = false;
    });
  });
</script></body></html>"""
# IntersectionObserver lazy images (data-src → src), 1,200 px apart.
OBSERVED = ("<!doctype html><html><head><title>observed</title></head><body style='margin:0'>"
            + "".join(f"<div style='height:1200px'><img class='lazy' data-src='/img/io-{i}.png' width=10 height=10></div>"
                      for i in range(8))
            + """<script>
  const io = new IntersectionObserver((entries) => entries.forEach((e) => {
    if (e.isIntersecting) { e.target.src = e.target.dataset.src; io.unobserve(e.target); }
  }));
  document.querySelectorAll('img.lazy').forEach((img) => io.observe(img));
</script></body></html>""")
# Native lazy loading only (no script at all), far below the fold.
NATIVE = ("<!doctype html><html><head><title>native</title></head><body style='margin:0'>"
          + "".join(f"<div style='height:2500px'><img loading='lazy' src='/img/native-{i}.png' width=10 height=10></div>"
                    for i in range(6)) + "</body></html>")
# A scroll listener that loads nothing (a sticky header): scrolled, but without waiting per step.
STICKY = ("<!doctype html><html><head><title>sticky</title></head><body style='margin:0'>"
          "<header id='h'>header</header>" + TEXT * 250
          + "<script>addEventListener('scroll', () => { document.getElementById('h').className ="
            " scrollY > 100 ? 'stuck' : ''; });</script></body></html>")
# A scroll listener that loads images (data-src → src) once they are in view, the first one
# 12 viewports down: its markup keeps autoscroll stepping through every screen.
LISTENED = ("<!doctype html><html><head><title>listened</title></head><body style='margin:0'>"
            "<div style='height:9600px'>top</div>"
            + "".join(f"<div style='height:1500px'><img data-src='/img/listened-{i}.png' width=10 height=10></div>"
                      for i in range(5))
            + """<script>
  addEventListener('scroll', () => document.querySelectorAll('img[data-src]').forEach((img) => {
    const r = img.getBoundingClientRect();
    if (r.top < innerHeight && r.bottom > 0) { img.src = img.dataset.src; img.removeAttribute('data-src'); }
  }));
</script></body></html>""")
SHORT = "<!doctype html><html><head><title>short</title></head><body><h1>one screen</h1></body></html>"
# The same feed whose chunks answer after 1 s: longer than the behavior's settle rounds at the bottom
# (3 × 250 ms), as a loaded machine or a slow site makes them.
SLOW_INFINITE = INFINITE.replace("'/chunk/'", "'/slow-chunk/'")
PAGES = {"/slow-infinite": SLOW_INFINITE, "/long": LONG, "/sticky": STICKY, "/listened": LISTENED, "/infinite": INFINITE, "/observed": OBSERVED, "/native": NATIVE, "/short": SHORT}


class _Handler(BaseHTTPRequestHandler):
    def log_message(self, *args) -> None:
        pass

    def do_GET(self) -> None:  # noqa: N802
        path = urlsplit(self.path).path
        if path in PAGES:
            body, ctype = PAGES[path].encode(), "text/html; charset=utf-8"
        elif path.startswith(("/chunk/", "/slow-chunk/")):
            if path.startswith("/slow-chunk/"):
                time.sleep(1.0)
            n = path.rsplit("/", 1)[1]
            body, ctype = f"<div style='height:1500px'>chunk {n}<img src='/img/chunk-{n}.png'></div>".encode(), "text/html"
        elif path.startswith("/img/"):
            body, ctype = tiny_png(), "image/png"
        else:
            self.send_error(404)
            return
        self.send_response(200)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture(scope="module")
def site() -> Iterator[str]:
    with LoopbackSite(_Handler) as served:
        yield served.url


@pytest.fixture(scope="module")
def autoscroll() -> dict:
    """The shipped autoscroll, compiled as the crawl compiles it (TypeScript + host types)."""
    from devstack.tscompile.child import NodeCompiler
    from ledger.crawl.scripts import default_catalogue

    (shipped,) = [s for s in default_catalogue() if s["id"] == "autoscroll"]
    compiler = NodeCompiler(timeout_s=240)
    try:
        out = compiler.compile([{"id": "autoscroll", "source": shipped["source"]}])
    finally:
        compiler.close()
    assert "diagnostics" not in out, out.get("diagnostics")
    return script("autoscroll", out["outputs"]["autoscroll"], options={})


def _capture(capture_server: str, s3_server, url: str, autoscroll: dict, **extra) -> tuple[dict, set[str]]:
    """One WACZ capture with the default autoscroll; (its report data, the archived URLs)."""
    r = capture(capture_server, url=url, captureFormats=ONLY_WACZ, behaviors=[autoscroll], **extra)
    assert r.status_code == 200, r.text
    rep = r.json()["report"]
    assert rep["status"] == "success", rep
    members = wacz_members(s3_get(s3_server, rep["artifacts"]["wacz"]))
    (line,) = behavior_reports(members)
    assert line["id"] == "autoscroll", line
    urls = {u for _, _, rec in cdxj_lines(members["indexes/index.cdx"]) for u in [rec["url"]]}
    return line, urls


def test_status_advertises_scroll_hooks(capture_server):
    assert "scrollHooks" in httpx.get(f"{capture_server}/status").json()["extensions"]


def test_a_long_static_page_is_not_stepped_through(capture_server, s3_server, site, autoscroll):
    line, _ = _capture(capture_server, s3_server, site + "/long", autoscroll)
    data = line["data"]
    assert data["stoppedBy"] == "static" and data["steps"] == 0 and data["reacts"] == []
    assert data["finalHeight"] > 50 * 800  # long: today's steps would have taken minutes
    # One probe (100 ms), not one round of steps: less than the 3 idle rounds × 250 ms at the bottom.
    assert line["elapsedMs"] < 3 * 250


def test_an_infinite_scroll_page_is_scrolled_and_its_chunks_archived(capture_server, s3_server, site, autoscroll):
    line, urls = _capture(capture_server, s3_server, site + "/infinite", autoscroll)
    data = line["data"]
    assert data["stoppedBy"] == "bottom" and "scrollListeners" in data["reacts"]
    assert data["finalHeight"] == 5 * 1500  # the first screen and four fetched chunks
    for n in range(1, 5):
        assert site + f"/chunk/{n}" in urls and site + f"/img/chunk-{n}.png" in urls


def test_a_chunk_still_in_flight_at_the_bottom_is_waited_for(capture_server, s3_server, site, autoscroll):
    line, urls = _capture(capture_server, s3_server, site + "/slow-infinite", autoscroll)
    assert line["data"]["stoppedBy"] == "bottom"
    assert line["data"]["finalHeight"] == 5 * 1500  # every slow chunk arrived before the behavior stopped
    assert {site + f"/slow-chunk/{n}" for n in range(1, 5)} <= urls


def test_intersection_observer_images_are_loaded_and_archived(capture_server, s3_server, site, autoscroll):
    line, urls = _capture(capture_server, s3_server, site + "/observed", autoscroll)
    assert line["data"]["stoppedBy"] == "bottom" and line["data"]["reacts"] == ["intersectionObserver"]
    assert {site + f"/img/io-{i}.png" for i in range(8)} <= urls


def test_native_lazy_images_are_loaded_and_archived(capture_server, s3_server, site, autoscroll):
    line, urls = _capture(capture_server, s3_server, site + "/native", autoscroll)
    assert line["data"]["stoppedBy"] == "bottom" and line["data"]["reacts"] == ["lazyElements"]
    assert {site + f"/img/native-{i}.png" for i in range(6)} <= urls


def test_a_page_whose_listener_loads_nothing_is_jumped_to_the_bottom(capture_server, s3_server, site, autoscroll):
    line, _ = _capture(capture_server, s3_server, site + "/sticky", autoscroll)
    data = line["data"]
    assert data["stoppedBy"] == "bottom" and data["reacts"] == ["scrollListeners"]
    # 8 idle steps of quickMs (not delayMs), one jump, the settle rounds at the bottom
    assert data["steps"] == 8 + 1 + 2 and data["skippedPx"] > 10 * 800
    assert data["finalHeight"] > 20 * 800  # stepped all the way, that would have been > 30 steps


def test_a_preload_scripts_listener_counts(capture_server, s3_server, site, autoscroll):
    """The counters are installed before the crawl's preload scripts, not only the page's."""
    preload = script("listen", "addEventListener('scroll', () => {});")
    line, _ = _capture(capture_server, s3_server, site + "/long", autoscroll, preload=[preload])
    assert line["data"]["reacts"] == ["scrollListeners"] and line["data"]["skippedPx"] > 0


def test_a_listener_that_loads_images_is_stepped_through(capture_server, s3_server, site, autoscroll):
    line, urls = _capture(capture_server, s3_server, site + "/listened", autoscroll)
    data = line["data"]
    assert data["stoppedBy"] == "bottom" and data["reacts"] == ["scrollListeners"] and data["skippedPx"] == 0
    assert {site + f"/img/listened-{i}.png" for i in range(5)} <= urls
    # steps that started nothing waited quickMs (50 ms), not today's delayMs (250 ms) after every step
    assert line["elapsedMs"] < 0.75 * data["steps"] * 250


def test_a_one_screen_page_still_fits(capture_server, s3_server, site, autoscroll):
    line, _ = _capture(capture_server, s3_server, site + "/short", autoscroll)
    assert line["data"] == {"steps": 0, "scrolledPx": 0, "finalHeight": 800, "stoppedBy": "fits", "reacts": [],
                            "skippedPx": 0}


HOOKED = """<!doctype html><html><body><div id="inner" style="overflow:auto;height:50px"></div><script>
  addEventListener('scroll', () => {}); document.addEventListener('wheel', () => {}, {passive: true});
  document.getElementById('inner').addEventListener('scroll', () => {});  // never fires on a window scroll
  addEventListener('click', () => {});
  new IntersectionObserver(() => {}).observe(document.body);
  globalThis.slow = fetch('/never-answered');
  const sync = new XMLHttpRequest(); sync.open('GET', '/answered', false); sync.send();  // ends inside send()
  try { new XMLHttpRequest().send(); } catch (e) { globalThis.unopened = e.name; }  // throws: not counted
  globalThis.nativeLooking = String(EventTarget.prototype.addEventListener) + String(fetch);
  globalThis.keys = Object.keys(globalThis).filter((k) => k.startsWith('__waggle'));
</script></body></html>"""


def test_the_hooks_count_only_what_a_window_scroll_reaches():
    """HOOKS_JS on its own in Chromium: counts, pending requests, and what the page can see."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path="/usr/bin/chromium", args=["--no-sandbox", "--disable-gpu"])
        try:
            page = browser.new_page()
            page.add_init_script(script=HOOKS_JS)
            page.add_init_script(script=HOOKS_JS)  # idempotent
            answers = {"/hooked": HOOKED, "/answered": "ok"}
            page.route("**/*", lambda route: route.fulfill(body=answers[path], content_type="text/html")
                       if (path := urlsplit(route.request.url).path) in answers else None)  # the fetch stays pending
            page.goto("http://127.0.0.1:9/hooked")
            hooks = page.evaluate("() => ({...globalThis.__waggleScrollHooks})")
            assert hooks == {"version": 1, "scrollListeners": 2, "observed": 1, "pending": 1}
            assert page.evaluate("() => globalThis.nativeLooking").count("[native code]") == 2
            assert page.evaluate("() => globalThis.keys") == []
            assert page.evaluate("() => globalThis.unopened") == "InvalidStateError"
        finally:
            browser.close()
