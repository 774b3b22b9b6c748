"""The gap the site feels, through the whole local stack (issue 11 item 6): a logged loopback
site whose pages each load a stylesheet and a slow image; every server-felt gap — from the end
of one page's last request (the response written) to the first request of the host's next
page — is at least the delay, within a level and across the level boundary, with the gap now
running from the page's last request (``sinceLastRequestMs`` → ``gapFrom``)."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import psycopg
import pytest

pytestmark = pytest.mark.e2e

DELAY_MS = 500
SLOW_IMAGE_S = 0.3  # the page's last request ends well after its document
SVG = b'<svg xmlns="http://www.w3.org/2000/svg" width="9" height="9"><circle cx="4" cy="4" r="3"/></svg>'


@dataclass(frozen=True)
class Logged:
    """One request as the site saw it: ``start`` when its request line was read, ``end`` when its
    response was written (``time.monotonic()`` s); ``document`` = a top-level navigation."""

    start: float
    end: float
    path: str
    document: bool


class LoggedSite:
    """``/`` → ``/a``, ``/b``; every page with ``/style.css`` and ``/slow.svg`` (answered after
    SLOW_IMAGE_S); robots.txt allows all. On 127.0.0.1, OS-chosen port, until :meth:`stop`."""

    def __init__(self) -> None:
        self.log: list[Logged] = []
        site = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def parse_request(self) -> bool:
                self._start = time.monotonic()
                return super().parse_request()

            def log_message(self, *args) -> None:
                pass

            def do_GET(self) -> None:
                path = self.path.split("?", 1)[0]
                status, ctype, body = site.page(path)
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
                self.wfile.flush()
                site.log.append(Logged(self._start, time.monotonic(), path,
                                       self.headers.get("Sec-Fetch-Dest", "") == "document"))

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def page(self, path: str) -> tuple[int, str, bytes]:
        if path == "/robots.txt":
            return 200, "text/plain", b"User-agent: *\nAllow: /\n"
        if path == "/style.css":
            return 200, "text/css", b"body{margin:2em}"
        if path == "/slow.svg":
            time.sleep(SLOW_IMAGE_S)
            return 200, "image/svg+xml", SVG
        if path not in ("/", "/a", "/b"):
            return 404, "text/plain", b"not found"
        links = '<a href="/a">a</a><a href="/b">b</a>' if path == "/" else ""
        html = (f'<!doctype html><html><head><meta charset="utf-8"><title>{path}</title>'
                f'<link rel="stylesheet" href="/style.css"></head><body><h1>{path}</h1>'
                f'<img src="/slow.svg" alt="">{links}</body></html>')
        return 200, "text/html; charset=utf-8", html.encode()

    def captures(self) -> list[list[Logged]]:
        """The log split at each document request (robots.txt, fetched by the flow, left out)."""
        out: list[list[Logged]] = []
        for hit in sorted(self.log, key=lambda h: h.start):
            if hit.path == "/robots.txt":
                continue
            if hit.document or not out:
                out.append([hit])
            else:
                out[-1].append(hit)
        return out

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()


def crawl(local_stack, seed: str, max_depth: int = 1) -> tuple[str, dict]:
    headers = {"Authorization": f"Bearer {local_stack.token()}"}
    with httpx.Client(base_url=local_stack.api_url, headers=headers, timeout=30) as api:
        r = api.post("/api/crawls", json={"seeds": [seed], "maxDepth": max_depth, "maxPages": 10, "scripts": [],
                                          "perHostDelayMs": DELAY_MS})
        assert r.status_code == 202, r.text
        crawl_id = r.json()["crawlId"]
        deadline = time.monotonic() + 300
        while (view := api.get(f"/api/crawls/{crawl_id}").json())["state"] == "running":
            assert time.monotonic() < deadline, view
            time.sleep(0.5)
    return crawl_id, view


def test_every_felt_gap_is_at_least_the_delay_from_the_last_request(local_stack):
    site = LoggedSite()
    wall_minus_mono = time.time() - time.monotonic()
    try:
        crawl_id, view = crawl(local_stack, f"{site.url}/")
    finally:
        site.stop()
    assert (view["state"], view["pagesCaptured"]) == ("succeeded", 3), view
    caps = site.captures()
    assert [c[0].path for c in caps][0] == "/" and sorted(c[0].path for c in caps[1:]) == ["/a", "/b"]
    felt = [nxt[0].start - max(h.end for h in prev) for prev, nxt in zip(caps, caps[1:])]
    print("felt gaps (ms):", [round(f * 1000) for f in felt])  # shown with -s / on failure
    assert all(f >= DELAY_MS / 1000 for f in felt), felt  # across the level boundary (/ → a) and within
    with psycopg.connect(local_stack.info["database_url"]) as conn:
        rows = conn.execute("SELECT url, submitted_at, gap_from, finished_at FROM crawl_pages WHERE crawl_id = %s",
                            (crawl_id,)).fetchall()
    # the capture server's sinceLastRequestMs reached the ledger: every gap ran from before the answer
    assert len(rows) == 3 and all(s <= g < f for _, s, g, f in rows), rows
    # ... and never from before the page's last request as the site saw it (same machine, wall
    # clocks; 20 ms for the per-process anchoring of crawl_host's monotonic clock)
    last_end = {c[0].path: max(h.end for h in c) + wall_minus_mono for c in caps}
    for url, _, gap_from, _ in rows:
        path = "/" + url.split("/", 3)[3]
        assert gap_from.timestamp() >= last_end[path] - 0.02, (url, gap_from.timestamp() - last_end[path])
