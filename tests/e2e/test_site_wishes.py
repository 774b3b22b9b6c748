"""The site's wishes, late links and the held page's wait through the whole local stack (issue 24
items 7 and 8): ledger → Windmill runner → crawl_host → our capture server (real Chromium) → S3 →
level report. A loopback site of this file logs every request.

Honoured (the default): the pages saying ``noarchive`` in a robots meta or in ``X-Robots-Tag`` are
``failed`` / ``policy`` "the site asked not to archive it (noarchive)" with no archive; the links of
the page saying ``nofollow`` are dropped (``drops.nofollow``) and never requested; a link added by
script 2 s after the load is followed. With ``ignoreRobotsMeta`` the same site is archived whole.
With a 500 ms gap the captures are held behind each other: the pages list the wait apart from the
capture time."""

from __future__ import annotations

import time
from http.server import BaseHTTPRequestHandler

import httpx
import psycopg
import pytest

from tests.fixtures.crawl_api import start_crawl, wait_for_end
from tests.fixtures.loopback import LoopbackSite

pytestmark = pytest.mark.e2e

DELAY_MS = 500
NOARCHIVE = "the site asked not to archive it (noarchive)"


def _html(head: str = "", links: tuple[str, ...] = (), script: str = "") -> bytes:
    anchors = "".join(f'<a href="{href}">{href}</a> ' for href in links)
    return f"<!doctype html><html><head><title>w</title>{head}</head><body>{anchors}<script>{script}</script></body></html>".encode()


LATE = ("addEventListener('load', () => setTimeout(() => { const a = document.createElement('a');"
        " a.href = '/late-child'; a.textContent = 'late'; document.body.append(a); }, 2000));")
PAGES: dict[str, tuple[dict[str, str], bytes]] = {
    "/": ({}, _html(links=("/keep", "/noarchive-meta", "/noarchive-header", "/nofollow", "/late"))),
    "/keep": ({}, _html(links=("/kept-child",))),
    "/noarchive-meta": ({}, _html('<meta name="robots" content="noarchive">', ("/after-noarchive",))),
    "/noarchive-header": ({"X-Robots-Tag": "noarchive"}, _html()),
    "/nofollow": ({}, _html('<meta name="robots" content="nofollow">', ("/hidden-1", "/hidden-2"))),
    "/late": ({}, _html(script=LATE)),
    "/kept-child": ({}, _html()),
    "/late-child": ({}, _html()),
    "/hidden-1": ({}, _html()),
    "/hidden-2": ({}, _html()),
    "/after-noarchive": ({}, _html()),
}


class WishesSite(LoopbackSite):
    """:data:`PAGES` on 127.0.0.1 (robots.txt allows all); ``paths`` = every path requested."""

    def __init__(self) -> None:
        self.paths: list[str] = []
        site = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:
                pass

            def do_GET(self) -> None:  # noqa: N802
                site.paths.append(self.path)
                if self.path == "/robots.txt":
                    headers, body, status = {"Content-Type": "text/plain"}, b"User-agent: *\nAllow: /\n", 200
                elif self.path in PAGES:
                    (headers, body), status = PAGES[self.path], 200
                    headers = {"Content-Type": "text/html; charset=utf-8", **headers}
                else:
                    headers, body, status = {"Content-Type": "text/plain"}, b"no", 404
                self.send_response(status)
                for k, v in {**headers, "Content-Length": str(len(body))}.items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(body)

        super().__init__(Handler)


def _crawl(local_stack, seed: str, **extra) -> tuple[dict, dict[str, dict], list[dict]]:
    headers = {"Authorization": f"Bearer {local_stack.token()}"}
    with httpx.Client(base_url=local_stack.api_url, headers=headers, timeout=30) as api:
        body = {"seeds": [seed], "maxDepth": 2, "maxPages": 30, "scripts": [], "perHostDelayMs": DELAY_MS, **extra}
        crawl_id = start_crawl(api, body)
        view = wait_for_end(api, crawl_id, 300)
        pages = {p["url"].removeprefix(seed.rstrip("/")): p
                 for p in api.get(f"/api/crawls/{crawl_id}/pages", params={"limit": 100}).json()["pages"]}
        deadline = time.monotonic() + 30  # archives are listed once their tuples reached OpenFGA (outbox)
        while len(archives := api.get("/api/archives", params={"crawl": crawl_id}).json()["archives"]) \
                < view["pagesCaptured"] and time.monotonic() < deadline:
            time.sleep(0.5)
    return view, pages, archives


@pytest.fixture
def site():
    s = WishesSite()
    yield s
    s.stop()


def test_noarchive_nofollow_and_late_links_honoured_and_the_wait_listed_apart(local_stack, site):
    view, pages, archives = _crawl(local_stack, f"{site.url}/")
    assert view["state"] == "succeeded" and view["ignoreRobotsMeta"] is False, view
    for path in ("/noarchive-meta", "/noarchive-header"):
        page = pages[path]
        assert (page["state"], page["failureClass"], page["reason"], page["archiveId"]) == (
            "failed", "policy", NOARCHIVE, None), page
    archived = {a["sourceUrl"].removeprefix(site.url) for a in archives}
    assert not archived & {"/noarchive-meta", "/noarchive-header"}, archived
    assert {"/", "/keep", "/nofollow", "/late", "/kept-child", "/late-child"} <= archived, archived
    # nofollow: the page is archived, its links dropped with their reason and never requested
    assert pages["/nofollow"]["state"] == "captured"
    assert view["drops"].get("nofollow", 0) >= 2, view["drops"]
    assert not [p for p in site.paths if p.startswith("/hidden")], site.paths
    # a link added by script 2 s after the load was read and followed
    assert pages["/late-child"]["state"] == "captured", pages.get("/late-child")
    # held captures: the wait behind the previous page is listed apart from the capture time
    waited = [p for p in pages.values() if p.get("waitMs")]
    assert waited, pages
    with psycopg.connect(local_stack.info["database_url"]) as conn:
        rows = {u: (s, f, w) for u, s, f, w in conn.execute(
            "SELECT url, submitted_at, finished_at, wait_ms FROM crawl_pages WHERE crawl_id = %s",
            (view["crawlId"],)).fetchall()}
    for p in waited:
        submitted, finished, wait_ms = rows[p["url"]]
        whole = round((finished - submitted).total_seconds() * 1000)
        assert p["waitMs"] == wait_ms and abs(p["captureMs"] - (whole - wait_ms)) <= 1, (p, whole)


def test_ignoring_robots_meta_archives_and_follows_everything(local_stack, site):
    view, pages, archives = _crawl(local_stack, f"{site.url}/", ignoreRobotsMeta=True)
    assert view["state"] == "succeeded" and view["ignoreRobotsMeta"] is True, view
    archived = {a["sourceUrl"].removeprefix(site.url) for a in archives}
    assert {"/noarchive-meta", "/noarchive-header", "/nofollow", "/hidden-1", "/hidden-2"} <= archived, archived
    assert view["drops"].get("nofollow", 0) == 0, view["drops"]
