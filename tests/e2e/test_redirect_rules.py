"""Politeness holes of redirects (decision 105), through the whole local stack: a page whose
HTTP redirect or script navigation leads to a path robots.txt disallows (``Disallow:
/private``), or that an exclude pattern of the crawl matches, is ``failed``/``permanent`` and
the site's access log shows the forbidden path never requested; nothing of it is archived."""

from __future__ import annotations

import time
from http.server import BaseHTTPRequestHandler

import httpx
import psycopg

from tests.fixtures.loopback import LoopbackSite

INDEX = b'<html><title>index</title><a href="/redir">r</a> <a href="/jsredir.html">js</a> <a href="/fine">f</a></html>'


class _Site(BaseHTTPRequestHandler):
    log: list[str] = []
    robots = b"User-agent: *\nDisallow: /private\n"

    def do_GET(self) -> None:  # noqa: N802
        path = self.path.split("?", 1)[0]
        self.log.append(path)
        if path == "/redir":
            self.send_response(302)
            self.send_header("Location", "/private/r.html")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        if path == "/robots.txt":
            body, kind = self.robots, "text/plain"
        elif path == "/jsredir.html":
            body, kind = b'<html><title>js</title><script>location.href="/private/js.html"</script></html>', "text/html"
        elif path == "/":
            body, kind = INDEX, "text/html"
        else:
            body, kind = b"<html><title>page</title>" + path.encode() + b"</html>", "text/html"
        self.send_response(200)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args) -> None:
        pass


def _crawl(local_stack, robots: bytes, **extra) -> tuple[str, list[tuple]]:
    """Crawl the site from ``/`` to depth 2 → (base URL, [(url, state, failure_class, skip_reason)])."""
    _Site.log, _Site.robots = [], robots
    with LoopbackSite(_Site, daemon_threads=False) as served:
        base = served.url
        with httpx.Client(base_url=local_stack.api_url, timeout=30,
                          headers={"Authorization": f"Bearer {local_stack.token()}"}) as api:
            r = api.post("/api/crawls", json={"seeds": [f"{base}/"], "maxDepth": 2, "maxPages": 20,
                                              "perHostDelayMs": 200, "scope": "same-origin", **extra})
            assert r.status_code == 202, r.text
            crawl_id = r.json()["crawlId"]
            deadline = time.monotonic() + 300
            while (view := api.get(f"/api/crawls/{crawl_id}").json())["state"] == "running":
                assert time.monotonic() < deadline, view
                time.sleep(0.2)
    assert view["state"] == "succeeded", view
    with psycopg.connect(local_stack.info["database_url"]) as conn:
        pages = conn.execute(
            "SELECT p.url, p.state, p.failure_class, p.skip_reason,"
            " EXISTS (SELECT 1 FROM archives a WHERE a.task_id::text = p.task_id)"
            " FROM crawl_pages p WHERE p.crawl_id = %s ORDER BY p.id", (crawl_id,)).fetchall()
    return base, pages


def _check(base: str, pages: list[tuple], why: str) -> None:
    by_url = {p[0]: p for p in pages}
    for path in ("/redir", "/jsredir.html"):
        url, state, failure_class, reason, archived = by_url[base + path]
        assert (state, failure_class, archived) == ("failed", "permanent", False), by_url[base + path]
        assert why in reason and "/private/" in reason and "not requested" in reason, reason
    assert by_url[base + "/fine"][1] == "captured" and by_url[base + "/"][1] == "captured", pages
    assert not any(u.startswith(base + "/private") for u in by_url), pages
    assert [p for p in _Site.log if p.startswith("/private")] == [], _Site.log


def test_redirects_to_a_path_robots_disallows_are_never_requested(local_stack):
    base, pages = _crawl(local_stack, b"User-agent: *\nDisallow: /private\n")
    _check(base, pages, "robots.txt disallows it")


def test_redirects_to_an_excluded_url_are_never_requested(local_stack):
    base, pages = _crawl(local_stack, b"User-agent: *\nDisallow:\n", exclude=[r"private/r\.html", r"private/js\.html"])
    _check(base, pages, "the crawl excludes it")
