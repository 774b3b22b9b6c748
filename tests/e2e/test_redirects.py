"""A seed that answers 301 through the whole local stack (issue 13 item 3): Chromium follows
it, the capture server reports ``finalUrl``, crawl_host passes it on, the ledger stores both
URLs and treats ``/new`` as known — the site's own log shows ``/new`` fetched as a document
once, although three pages link to it."""

from __future__ import annotations

import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import psycopg

PAGES = {
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


def test_seed_answering_301_is_captured_once_under_both_urls(local_stack):
    _Site.documents = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Site)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        with httpx.Client(base_url=local_stack.api_url, timeout=30,
                          headers={"Authorization": f"Bearer {local_stack.token()}"}) as api:
            r = api.post("/api/crawls", json={"seeds": [f"{base}/old"], "maxDepth": 2, "maxPages": 20,
                                              "perHostDelayMs": 200, "scope": "same-origin"})
            assert r.status_code == 202, r.text
            crawl_id = r.json()["crawlId"]
            deadline = time.monotonic() + 300
            while (view := api.get(f"/api/crawls/{crawl_id}").json())["state"] == "running":
                assert time.monotonic() < deadline, view
                time.sleep(1)
    finally:
        server.shutdown()
        server.server_close()
    assert view["state"] == "succeeded", view
    with psycopg.connect(local_stack.info["database_url"]) as conn:
        pages = conn.execute("SELECT url, final_url, state FROM crawl_pages WHERE crawl_id = %s ORDER BY id",
                             (crawl_id,)).fetchall()
    assert pages == [(f"{base}/old", f"{base}/new", "captured"), (f"{base}/other", f"{base}/other", "captured")]
    assert _Site.documents.count("/new") == 1, _Site.documents  # reached once, through the redirect
