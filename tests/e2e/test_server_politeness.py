"""Politeness per server through the whole local stack (issue 29 items 7–8; decisions 241–242).

* Two hostnames, one loopback server: seeds on ``127.0.0.1:P`` and ``localhost:P`` (the ledger's
  resolver gives ``localhost`` the loopback addresses without a look-up) are one server: from the
  site's access log, no visit of either name — a page with its subresources, or a robots.txt
  fetch — starts less than the delay after the previous visit of *either* name ended. (Before,
  each hostname had its own gap: the two were captured side by side.)
* A slow host: documents answered after 400 ms with a 1.2 s delay and the default delay factor 5:
  within a level every felt gap is ≥ 5 × 400 ms = 2 s, never the 1.2 s delay.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler

import httpx
import pytest

from tests.fixtures.loopback import LoopbackSite

pytestmark = pytest.mark.e2e


@dataclass(frozen=True)
class Hit:
    start: float
    end: float
    host: str
    path: str
    document: bool


class Site(LoopbackSite):
    """``/`` links to ``/a``, ``/b``; every page loads ``/style.css``; documents answered after
    ``document_s``. Logs each request (monotonic start and end, Host header)."""

    def __init__(self, document_s: float = 0.0, pages: tuple[str, ...] = ("/a", "/b")) -> None:
        self.log: list[Hit] = []
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
                if path == "/robots.txt":
                    status, ctype, body = 200, "text/plain", b"User-agent: *\nAllow: /\n"
                elif path == "/style.css":
                    status, ctype, body = 200, "text/css", b"body{margin:1em}"
                elif path == "/" or path in pages:
                    time.sleep(document_s)
                    links = "".join(f'<a href="{p}">{p}</a>' for p in pages) if path == "/" else ""
                    status, ctype = 200, "text/html; charset=utf-8"
                    body = (f'<!doctype html><html><head><title>{path}</title><link rel="stylesheet"'
                            f' href="/style.css"></head><body><h1>{path}</h1>{links}</body></html>').encode()
                else:
                    status, ctype, body = 404, "text/plain", b"not found"
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
                self.wfile.flush()
                site.log.append(Hit(self._start, time.monotonic(), self.headers.get("Host", ""), path,
                                    self.headers.get("Sec-Fetch-Dest", "") == "document"))

        super().__init__(Handler)

    def visits(self) -> list[list[Hit]]:
        """The log split into visits: a robots.txt fetch, or a document with what follows it."""
        out: list[list[Hit]] = []
        for hit in sorted(self.log, key=lambda h: h.start):
            if hit.path == "/robots.txt" or hit.document or not out or out[-1][0].path == "/robots.txt":
                out.append([hit])
            else:
                out[-1].append(hit)
        return out

    @staticmethod
    def gaps(visits: list[list[Hit]]) -> list[float]:
        """Seconds from each visit's last response to the next visit's first request."""
        return [nxt[0].start - max(h.end for h in prev) for prev, nxt in zip(visits, visits[1:])]


def crawl(local_stack, body: dict) -> dict:
    headers = {"Authorization": f"Bearer {local_stack.token()}"}
    with httpx.Client(base_url=local_stack.api_url, headers=headers, timeout=30) as api:
        r = api.post("/api/crawls", json={"maxDepth": 1, "maxPages": 20, "scripts": [], **body})
        assert r.status_code == 202, r.text
        crawl_id = r.json()["crawlId"]
        deadline = time.monotonic() + 300
        while (view := api.get(f"/api/crawls/{crawl_id}").json())["state"] == "running":
            assert time.monotonic() < deadline, view
            time.sleep(0.5)
    return view


def test_two_hostnames_of_one_loopback_server_share_one_gap(local_stack):
    delay_ms = 800
    site = Site()
    try:
        names = (f"127.0.0.1:{site.port}", f"localhost:{site.port}")
        view = crawl(local_stack, {"seeds": [f"http://{n}/" for n in names], "perHostDelayMs": delay_ms})
    finally:
        site.stop()
    assert (view["state"], view["pagesCaptured"]) == ("succeeded", 6), view
    assert view["servers"] == [{"server": f"127.0.0.1:{site.port}", "hosts": sorted(names)}], view["servers"]
    visits = site.visits()
    assert {v[0].host for v in visits} == set(names)  # both names were visited
    assert sum(1 for v in visits if v[0].document) == 6
    gaps = site.gaps(visits)
    print("felt gaps across both names (ms):", [(v[0].host, v[0].path, round(g * 1000))
                                                 for v, g in zip(visits[1:], gaps)])
    assert min(gaps) >= delay_ms / 1000, gaps


def test_a_slow_host_gets_k_times_its_document_time(local_stack):
    delay_ms, document_s, factor = 1200, 0.4, 5.0
    site = Site(document_s=document_s, pages=("/a", "/b", "/c"))
    try:
        view = crawl(local_stack, {"seeds": [f"http://127.0.0.1:{site.port}/"], "perHostDelayMs": delay_ms})
    finally:
        site.stop()
    assert (view["state"], view["pagesCaptured"], view["delayFactor"]) == ("succeeded", 4, factor), view
    pages = [v for v in site.visits() if v[0].document]
    level_1 = [v for v in pages if v[0].path in ("/a", "/b", "/c")]
    assert len(level_1) == 3
    gaps = Site.gaps(level_1)  # within the level: after a page whose document took ≥ 400 ms
    print("felt gaps within level 1 (ms):", [round(g * 1000) for g in gaps])
    assert min(gaps) >= factor * document_s, gaps  # 2 s, not the 1.2 s delay
    assert min(Site.gaps(site.visits())) >= delay_ms / 1000  # and nowhere below the delay
