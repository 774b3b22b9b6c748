"""A generated loopback site for the politeness benchmark: one ``Host`` = one port = one host.

Each host serves a binary tree of pages (``/`` → ``/a``, ``/b`` → ``/aa`` …) down to
``levels`` levels, every page with a stylesheet and an image (a capture is several requests),
plus its own robots.txt. Every request is logged with ``time.monotonic()`` taken when the
request line was read (:class:`tests.e2e.site.Hit`) — the site's own view of the crawler.

``flaky``: paths whose first ``flaky_drops`` requests are answered by closing the connection
without a response (Chromium re-sends a navigation once by itself, so 2 drops make one capture
attempt fail with ``ERR_EMPTY_RESPONSE``; the flow retries it after the gap).
"""

from __future__ import annotations

import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from tests.e2e.site import Hit

CSS = b"body{font-family:sans-serif;margin:2em} a{display:block}"
SVG = b'<svg xmlns="http://www.w3.org/2000/svg" width="30" height="30"><circle cx="15" cy="15" r="12"/></svg>'


def tree_paths(levels: int) -> list[str]:
    """Every page path of a binary tree with ``levels`` levels (``/`` is level 0)."""
    out, frontier = ["/"], [""]
    for _ in range(levels - 1):
        frontier = [p + c for p in frontier for c in "ab"]
        out += ["/" + p for p in frontier]
    return out


class Host:
    """One host of the site on ``http://127.0.0.1:<port>`` (OS-chosen) until :meth:`stop`."""

    def __init__(self, levels: int, robots_txt: str = "User-agent: *\nAllow: /\n", flaky: tuple[str, ...] = (),
                 flaky_drops: int = 1):
        self.levels = levels
        self.robots_txt = robots_txt.encode()
        self.flaky = set(flaky)
        self.flaky_drops = flaky_drops
        self._drops: dict[str, int] = {}
        self.hits: list[Hit] = []
        self._lock = threading.Lock()
        host = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def parse_request(self) -> bool:
                self._t = time.monotonic()
                return super().parse_request()

            def log_message(self, *args) -> None:
                pass

            def do_GET(self) -> None:
                path = self.path.split("?", 1)[0]
                dest = self.headers.get("Sec-Fetch-Dest", "")
                with host._lock:
                    drop = path in host.flaky and host._drops.get(path, 0) < host.flaky_drops
                    if drop:
                        host._drops[path] = host._drops.get(path, 0) + 1
                if drop:
                    host._record(Hit(self._t, "GET", path, dest, self.headers.get("User-Agent", ""), 0))
                    self.close_connection = True
                    return  # no response at all
                status, ctype, body = host._page(path)
                host._record(Hit(self._t, "GET", path, dest, self.headers.get("User-Agent", ""), status))
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.port = self._server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.paths = set(tree_paths(levels))
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def _record(self, hit: Hit) -> None:
        with self._lock:
            self.hits.append(hit)

    def _page(self, path: str) -> tuple[int, str, bytes]:
        if path == "/robots.txt":
            return 200, "text/plain", self.robots_txt
        if path == "/style.css":
            return 200, "text/css", CSS
        if path == "/dot.svg":
            return 200, "image/svg+xml", SVG
        if path == "/favicon.ico":
            return 404, "text/plain", b"no favicon"
        if path not in self.paths:
            return 404, "text/plain", b"not found"
        stem = path.strip("/")
        children = [f"/{stem}{c}" for c in "ab" if f"/{stem}{c}" in self.paths]
        links = "".join(f'<a href="{c}">{c}</a>' for c in children)
        html = (f'<!doctype html><html><head><meta charset="utf-8"><title>{path}</title>'
                f'<link rel="stylesheet" href="/style.css"></head><body><h1>{path}</h1>'
                f'<img src="/dot.svg" alt="">{links}<p>{"text " * 100}</p></body></html>')
        return 200, "text/html; charset=utf-8", html.encode()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
