"""Sitemaps through the whole local stack (issue 29 items 2 and 8; docs/decisions/221): a logged
loopback site whose robots.txt names a sitemap index with a gzip child and lastmod dates; a crawl
with ``useSitemap`` and ``sitemapLastmodAfter`` queues the child's URLs in scope changed after the
date (and those without a lastmod) after the seed, never fetches the index's unchanged child, and
every gap the site feels — robots.txt and each sitemap fetch included as requests like any other —
is at least the delay."""

from __future__ import annotations

import gzip
import time

import httpx
import pytest

from tests.fixtures.logged_site import Logged, LoggedSite

pytestmark = pytest.mark.e2e

DELAY_MS = 1500
PAGES = ("/a", "/s1", "/s2", "/s3")
FETCHES = ("/robots.txt", "/sitemap-index.xml", "/sitemap-pages.xml.gz", "/sitemap-old.xml")
NS = 'xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"'


class SitemapSite(LoggedSite):
    """``/`` → ``/a``; robots.txt: ``Sitemap: /sitemap-index.xml``; the index names
    ``/sitemap-pages.xml.gz`` (gzip, lastmod 2025) and ``/sitemap-old.xml`` (lastmod 2020). The gzip
    child lists ``/a`` (linked too), ``/s1`` (2025), ``/s2`` (2020: older than the filter), ``/s3``
    (no lastmod) and a page of another origin (out of scope)."""

    def __init__(self) -> None:
        super().__init__(("/a",))
        self.other = self.url.replace("127.0.0.1", "localhost") + "/elsewhere"

    def page(self, path: str) -> tuple[int, str, bytes]:
        u = self.url
        if path == "/robots.txt":
            return 200, "text/plain", f"User-agent: *\nAllow: /\nSitemap: {u}/sitemap-index.xml\n".encode()
        if path == "/sitemap-index.xml":
            return 200, "application/xml", (
                f'<?xml version="1.0" encoding="UTF-8"?><sitemapindex {NS}>'
                f"<sitemap><loc>{u}/sitemap-pages.xml.gz</loc><lastmod>2025-06-01</lastmod></sitemap>"
                f"<sitemap><loc>{u}/sitemap-old.xml</loc><lastmod>2020-01-01</lastmod></sitemap>"
                "</sitemapindex>").encode()
        if path == "/sitemap-pages.xml.gz":
            xml = (f'<?xml version="1.0" encoding="UTF-8"?><urlset {NS}>'
                   f"<url><loc>{u}/a</loc><lastmod>2025-01-01</lastmod></url>"
                   f"<url><loc>{u}/s1</loc><lastmod>2025-02-01T10:00:00+00:00</lastmod></url>"
                   f"<url><loc>{u}/s2</loc><lastmod>2020-05-05</lastmod></url>"
                   f"<url><loc>{u}/s3</loc></url>"
                   f"<url><loc>{self.other}</loc><lastmod>2025-01-01</lastmod></url>"
                   "</urlset>")
            return 200, "application/gzip", gzip.compress(xml.encode())
        if path == "/sitemap-old.xml":
            return 200, "application/xml", f"<urlset {NS}><url><loc>{u}/old</loc></url></urlset>".encode()
        if path in PAGES:  # the same small page (a stylesheet, a slow image), titled by its path
            status, ctype, body = super().page("/a")
            return status, ctype, body.replace(b"/a</", path.encode() + b"</")
        return super().page(path)

    def visits(self) -> list[list[Logged]]:
        """The log split into single requests (robots.txt, sitemaps) and captures (each from its
        document request)."""
        out: list[list[Logged]] = []
        for hit in sorted(self.log, key=lambda h: h.start):
            if hit.path in FETCHES or hit.document or not out or out[-1][0].path in FETCHES:
                out.append([hit])
            else:
                out[-1].append(hit)
        return out


def test_sitemap_index_with_a_gzip_child_and_lastmod_keeps_every_gap(local_stack):
    site = SitemapSite()
    headers = {"Authorization": f"Bearer {local_stack.token()}"}
    try:
        with httpx.Client(base_url=local_stack.api_url, headers=headers, timeout=30) as api:
            r = api.post("/api/crawls", json={"seeds": [f"{site.url}/"], "maxDepth": 1, "maxPages": 10, "scripts": [],
                                              "perHostDelayMs": DELAY_MS, "useSitemap": True,
                                              "sitemapLastmodAfter": "2024-01-01"})
            assert r.status_code == 202, r.text
            crawl_id = r.json()["crawlId"]
            deadline = time.monotonic() + 300
            while (view := api.get(f"/api/crawls/{crawl_id}").json())["state"] == "running":
                assert time.monotonic() < deadline, view
                time.sleep(0.5)
            pages = api.get(f"/api/crawls/{crawl_id}/pages").json()["pages"]
    finally:
        site.stop()
    assert (view["state"], view["pagesCaptured"]) == ("succeeded", 4), view
    by_depth = sorted((p["depth"], p["url"].removeprefix(site.url)) for p in pages)
    assert by_depth == [(0, "/"), (1, "/a"), (1, "/s1"), (1, "/s3")], by_depth  # after the seed
    assert view["sitemap"] == {"files": 2, "found": 5, "older": 1, "queued": 2, "outOfScope": 1, "notQueued": 1,
                               "notes": [f"{site.url}/sitemap-old.xml: not fetched, its lastmod is not after"
                                         " 2024-01-01T00:00:00+00:00"]}, view["sitemap"]
    assert (view["useSitemap"], view["sitemapLastmodAfter"]) == (True, "2024-01-01T00:00:00.000Z")
    visits = site.visits()
    paths = [v[0].path for v in visits]
    print("visits:", paths)
    assert paths[:4] == ["/robots.txt", "/sitemap-index.xml", "/sitemap-pages.xml.gz", "/"], paths
    assert sorted(paths[4:]) == ["/a", "/s1", "/s3"] and "/sitemap-old.xml" not in paths, paths
    felt = [nxt[0].start - max(h.end for h in prev) for prev, nxt in zip(visits, visits[1:])]
    print("felt gaps (ms), robots.txt and sitemaps first:", [round(f * 1000) for f in felt])
    assert len(felt) == 6 and all(f >= DELAY_MS / 1000 for f in felt), felt
