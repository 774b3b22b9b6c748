"""A seed that answers 301 through the whole local stack (issue 13 item 3): Chromium follows
it, the capture server reports ``finalUrl``, crawl_host passes it on, the ledger stores both
URLs and treats ``/new`` as known — the site's own log shows ``/new`` fetched as a document
once, although three pages link to it."""

from __future__ import annotations

import time
from http.server import BaseHTTPRequestHandler

import httpx
import psycopg

from tests.fixtures.loopback import LoopbackSite

PAGES = {
    "/index": b'<html><title>index</title><a href="/old">old</a> <a href="/mid">mid</a> <a href="/new">new</a></html>',
    "/mid": b'<html><title>mid</title></html>',
    "/new": b'<html><title>new</title><a href="/new">self</a> <a href="/old">old</a> <a href="/other">other</a></html>',
    "/other": b'<html><title>other</title><a href="/new">new</a> <a href="/old">old</a></html>',
}


class _Site(BaseHTTPRequestHandler):
    documents: list[str] = []

    def do_GET(self) -> None:  # noqa: N802
        path = self.path.split("?", 1)[0]
        if self.headers.get("Sec-Fetch-Dest") == "document":
            self.documents.append(path)
        if path == "/old":
            self.send_response(301)
            self.send_header("Location", "/new")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        body = PAGES.get(path)
        self.send_response(200 if body else 404)
        body = body or b"not here"
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args) -> None:
        pass


def _crawl(local_stack, seed_path: str, max_depth: int) -> tuple[str, str, dict]:
    """Crawl the site from ``seed_path`` to the end → (base URL, crawl id, crawl view)."""
    _Site.documents = []
    with LoopbackSite(_Site, daemon_threads=False) as served:
        base = served.url
        with httpx.Client(base_url=local_stack.api_url, timeout=30,
                          headers={"Authorization": f"Bearer {local_stack.token()}"}) as api:
            r = api.post("/api/crawls", json={"seeds": [f"{base}{seed_path}"], "maxDepth": max_depth, "maxPages": 20,
                                              "perHostDelayMs": 200, "scope": "same-origin"})
            assert r.status_code == 202, r.text
            crawl_id = r.json()["crawlId"]
            deadline = time.monotonic() + 300
            while (view := api.get(f"/api/crawls/{crawl_id}").json())["state"] == "running":
                assert time.monotonic() < deadline, view
                time.sleep(0.2)
    return base, crawl_id, view


def test_seed_answering_301_is_captured_once_under_both_urls(local_stack):
    base, crawl_id, view = _crawl(local_stack, "/old", 2)
    assert view["state"] == "succeeded", view
    with psycopg.connect(local_stack.info["database_url"]) as conn:
        pages = conn.execute("SELECT url, final_url, state FROM crawl_pages WHERE crawl_id = %s ORDER BY id",
                             (crawl_id,)).fetchall()
    assert pages == [(f"{base}/old", f"{base}/new", "captured"), (f"{base}/other", f"{base}/other", "captured")]
    assert _Site.documents.count("/new") == 1, _Site.documents  # reached once, through the redirect


def test_a_redirect_target_listed_in_the_same_level_is_captured_once(local_stack):
    """/index links /old, /mid, /new (level 1, in that order); /old → 301 → /new. /mid is
    submitted at /old's seal, and /old must have answered before /new's turn: /new is then
    known as /old's final URL and reported skipped, not captured a second time."""
    base, crawl_id, view = _crawl(local_stack, "/index", 1)
    assert view["state"] == "succeeded", view
    with psycopg.connect(local_stack.info["database_url"]) as conn:
        pages = conn.execute("SELECT url, final_url, state, skip_reason FROM crawl_pages WHERE crawl_id = %s"
                             " ORDER BY id", (crawl_id,)).fetchall()
    assert pages == [
        (f"{base}/index", f"{base}/index", "captured", None),
        (f"{base}/old", f"{base}/new", "captured", None),
        (f"{base}/mid", f"{base}/mid", "captured", None),
        (f"{base}/new", None, "skipped", f"already captured in this level as the redirect target of {base}/old"),
    ], pages
    assert _Site.documents.count("/new") == 1, _Site.documents  # reached once, through the redirect
