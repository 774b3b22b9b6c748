"""A blocked host through the whole local stack (issue 29 item 5, decision 231): ledger → Windmill
runner → crawl_host → our capture server (real Chromium) → S3 → level report.

A loopback site serves two pages, then answers every request with a Cloudflare-like managed
challenge (403, ``Server: cloudflare``, the challenge page's markup). The capture server matches
the signature; the flow's breaker pauses the host at once: the challenged page and the host's
other pages of the level are ``blocked``, its pages of the next level are held back by the ledger
(``blocked``, never dispatched), no challenge is archived, and the site's access log shows no
request for another page after the challenge."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import httpx
import pytest

from tests.fixtures.crawl_api import start_crawl, wait_for_end
from tests.fixtures.loopback import LoopbackSite

pytestmark = pytest.mark.e2e

CHALLENGE_BODY = (Path(__file__).parent.parent / "fixtures" / "challenge" / "cloudflare-managed-challenge.html").read_bytes()
SERVED_BEFORE_CHALLENGE = 2
DELAY_MS = 500  # a short gap: the next capture is pipelined (held behind the loading one)


def _html(*links: str) -> bytes:
    anchors = "".join(f'<a href="{href}">{href}</a> ' for href in links)
    return f"<!doctype html><html><head><title>p</title></head><body>{anchors}</body></html>".encode()


PAGES = {"/": _html("/p1", "/p2", "/p3", "/p4", "/p5"), "/p1": _html("/deep-1", "/deep-2")}


class ChallengingSite(LoopbackSite):
    """:data:`PAGES` until :data:`SERVED_BEFORE_CHALLENGE` pages were served, then the challenge for
    every request; ``log`` = ``(path, status)`` of every request in arrival order."""

    def __init__(self) -> None:
        self.log: list[tuple[str, int]] = []
        self.pages_served = 0
        lock = threading.Lock()
        site = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:
                pass

            def do_GET(self) -> None:  # noqa: N802
                headers = {"Content-Type": "text/html; charset=utf-8"}
                with lock:
                    if self.path == "/robots.txt":
                        status, body, headers = 200, b"User-agent: *\nAllow: /\n", {"Content-Type": "text/plain"}
                    elif site.pages_served < SERVED_BEFORE_CHALLENGE and self.path in PAGES:
                        site.pages_served += 1
                        status, body = 200, PAGES[self.path]
                    elif site.pages_served < SERVED_BEFORE_CHALLENGE:
                        status, body = 404, b"no"
                    else:
                        status, body = 403, CHALLENGE_BODY
                        headers.update({"Server": "cloudflare", "CF-RAY": "8f1a2b3c4d5e6f70-AMS",
                                        "Cache-Control": "private, max-age=0, no-store"})
                    site.log.append((self.path, status))
                self.send_response(status)
                for k, v in {**headers, "Content-Length": str(len(body))}.items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(body)

        super().__init__(Handler)


@pytest.fixture
def site():
    with ChallengingSite() as s:
        yield s


def test_a_host_that_starts_challenging_is_paused_and_nothing_of_it_archived(local_stack, site):
    headers = {"Authorization": f"Bearer {local_stack.token()}"}
    with httpx.Client(base_url=local_stack.api_url, headers=headers, timeout=30) as api:
        body = {"seeds": [f"{site.url}/"], "maxDepth": 2, "maxPages": 30, "scripts": [], "perHostDelayMs": DELAY_MS}
        crawl_id = start_crawl(api, body)
        view = wait_for_end(api, crawl_id, 240)
        pages = {p["url"].removeprefix(site.url): p
                 for p in api.get(f"/api/crawls/{crawl_id}/pages", params={"limit": 100}).json()["pages"]}
        deadline = time.monotonic() + 30  # archives are listed once their tuples reached OpenFGA (outbox)
        while len(archives := api.get("/api/archives", params={"crawl": crawl_id}).json()["archives"]) \
                < view["pagesCaptured"] and time.monotonic() < deadline:
            time.sleep(0.5)
        time.sleep(1.0)  # anything still on its way to the site arrives meanwhile

    # the CLI summary names the host and why
    shown = subprocess.run([str(Path(sys.executable).parent / "waggle"), "crawls", crawl_id],
                           env={**local_stack.client_env(), "COLUMNS": "220"}, capture_output=True, text=True, timeout=120)
    assert shown.returncode == 0, shown.stderr
    assert "blocked hosts (paused for the rest of the crawl)" in shown.stdout and "Cloudflare" in shown.stdout, shown.stdout
    assert view["state"] == "succeeded" and view["pagesCaptured"] == 2, view
    assert {u for u, p in pages.items() if p["state"] == "captured"} == {"/", "/p1"}
    # the challenged page: blocked, naming the vendor; nothing archived for it
    challenged = [u for u, p in pages.items() if p["state"] == "blocked" and "challenge page: Cloudflare" in p["reason"]
                  and not p["reason"].startswith("not captured")]
    assert len(challenged) == 1, pages
    assert {u for u, p in pages.items() if p["state"] == "blocked"} == {"/p2", "/p3", "/p4", "/p5", "/deep-1", "/deep-2"}
    for u in ("/deep-1", "/deep-2"):  # the next level's pages: held back by the ledger, never dispatched
        assert pages[u]["reason"].startswith("not captured: the host was paused for the rest of the crawl at depth 1"), pages[u]
    assert view["pagesBlocked"] == 6
    [paused] = view["blockedHosts"]
    assert paused["depth"] == 1 and paused["pages"] == 6 and "Cloudflare" in paused["reason"], paused
    # no challenge is archived as the page asked for
    assert sorted(a["sourceUrl"].removeprefix(site.url) for a in archives) == ["/", "/p1"]
    # the access log: after the first challenge, no request for another page (the challenge
    # page's own script, /cdn-cgi/…, is part of that one page's load)
    first = next(i for i, (_, status) in enumerate(site.log) if status == 403)
    after = [path for path, _ in site.log[first + 1:] if not path.startswith("/cdn-cgi/")]
    assert after == [], site.log
    assert [p for p, s in site.log if s == 200] == ["/robots.txt", "/", "/p1"] or \
        [p for p, s in site.log if s == 200] == ["/robots.txt", "/", "/robots.txt", "/p1"], site.log
