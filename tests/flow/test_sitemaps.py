"""f/waggle/sitemaps.py and plan_level's sitemap phase (issue 29 item 2): robots.txt Sitemap
lines, sitemap indexes, gzip children, the lastmod filter, the protocol's limits, bad XML and XML
bombs, same-host redirects, and every sitemap request keeping the host's gap (real timers)."""

from __future__ import annotations

import gzip
import time
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler

import pytest

from f.waggle import plan_level
from f.waggle import sitemaps as sm
from f.waggle.robots import ALLOWED, UNREACHABLE, RobotsOutcome, RobotsRules
from tests.fixtures.loopback import LoopbackSite

NS = 'xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"'


def urlset(*entries: tuple[str, str | None]) -> bytes:
    items = "".join(f"<url><loc>{loc}</loc>" + (f"<lastmod>{mod}</lastmod>" if mod else "") + "</url>"
                    for loc, mod in entries)
    return f'<?xml version="1.0" encoding="UTF-8"?>\n<urlset {NS}>{items}</urlset>'.encode()


def index(*entries: tuple[str, str | None]) -> bytes:
    items = "".join(f"<sitemap><loc>{loc}</loc>" + (f"<lastmod>{mod}</lastmod>" if mod else "") + "</sitemap>"
                    for loc, mod in entries)
    return f'<?xml version="1.0" encoding="UTF-8"?>\n<sitemapindex {NS}>{items}</sitemapindex>'.encode()


# --- robots.txt Sitemap lines, W3C dates --------------------------------------------------------

def test_robots_sitemap_lines_any_case_anywhere_resolved_once():
    text = ("User-agent: *\nDisallow: /x\nSITEMAP: https://h.test/a.xml\nsitemap:/rel.xml # comment\n"
            "User-agent: waggle\nSitemap: https://h.test/a.xml\nSitemap: ftp://h.test/no.xml\n")
    assert sm.robots_sitemaps(text, "https://h.test/robots.txt") == ["https://h.test/a.xml", "https://h.test/rel.xml"]
    assert RobotsRules(text).sitemap_lines.count("\n") == 3  # kept beside the rules, not in the normal form
    assert "sitemap" not in (RobotsRules(text).text or "").lower()


@pytest.mark.parametrize("text, expected", [
    ("2024", datetime(2024, 1, 1, tzinfo=timezone.utc)),
    ("2024-05", datetime(2024, 5, 1, tzinfo=timezone.utc)),
    ("2024-05-06", datetime(2024, 5, 6, tzinfo=timezone.utc)),
    ("2024-05-06T10:20+02:00", datetime(2024, 5, 6, 8, 20, tzinfo=timezone.utc)),
    ("2024-05-06T10:20:30.5Z", datetime(2024, 5, 6, 10, 20, 30, 500000, tzinfo=timezone.utc)),
    ("2024-05-06T10:20:30", datetime(2024, 5, 6, 10, 20, 30, tzinfo=timezone.utc)),  # no offset: UTC
    ("yesterday", None), ("", None), (None, None),
])
def test_w3c_datetimes(text, expected):
    assert sm.parse_w3c_datetime(text) == expected


# --- parsing ------------------------------------------------------------------------------------

def test_urlset_and_index_in_any_namespace():
    parsed = sm.parse_sitemap(urlset(("https://h.test/a", "2024-01-02"), ("https://h.test/b", None)))
    assert parsed.kind == "urlset" and parsed.entries == [
        ("https://h.test/a", datetime(2024, 1, 2, tzinfo=timezone.utc)), ("https://h.test/b", None)]
    bare = b"<sitemapindex><sitemap><loc> https://h.test/s1.xml </loc></sitemap></sitemapindex>"
    assert sm.parse_sitemap(bare).entries == [("https://h.test/s1.xml", None)]


@pytest.mark.parametrize("data, needle", [
    (b"<urlset><url><loc>https://h.test/a</loc></url>", "not well-formed"),  # cut
    (b"not xml at all", "not well-formed"),
    (b"<html><body>sitemap</body></html>", "root element is <html>"),
    (b"", "not well-formed"),
])
def test_bad_xml_is_a_named_error(data, needle):
    with pytest.raises(sm.SitemapError, match=needle):
        sm.parse_sitemap(data)


BILLION_LAUGHS = (b'<?xml version="1.0"?>\n<!DOCTYPE lolz [<!ENTITY lol "lol">'
                  + b"".join(b'<!ENTITY lol%d "%s">' % (i, (b"&lol%d;" % (i - 1) if i > 1 else b"&lol;") * 10)
                             for i in range(1, 10))
                  + b']>\n<urlset><url><loc>https://h.test/&lol9;</loc></url></urlset>')
EXTERNAL = (b'<?xml version="1.0"?><!DOCTYPE u [<!ENTITY e SYSTEM "file:///etc/passwd">]>'
            b"<urlset><url><loc>https://h.test/&e;</loc></url></urlset>")


@pytest.mark.parametrize("bomb", [BILLION_LAUGHS, EXTERNAL], ids=["billion-laughs", "external-entity"])
def test_xml_bombs_are_refused_quickly(bomb):
    started = time.monotonic()
    with pytest.raises(sm.SitemapError, match="DTD"):
        sm.parse_sitemap(bomb)
    assert time.monotonic() - started < 1.0


def test_an_entity_bomb_past_the_doctype_check_still_stops_in_libxml2():
    """The DTD check is the first guard; lxml's parser settings are the second (no entity is
    expanded, libxml2's amplification limit): a bomb reaching the parser is an error, fast."""
    started = time.monotonic()
    with pytest.raises(sm.SitemapError, match="not well-formed"):
        _parse_without_dtd_check(BILLION_LAUGHS)
    assert time.monotonic() - started < 1.0


def _parse_without_dtd_check(data: bytes):
    original = sm._DOCTYPE
    sm._DOCTYPE = __import__("re").compile(rb"(?!x)x")  # never matches
    try:
        return sm.parse_sitemap(data)
    finally:
        sm._DOCTYPE = original


def test_at_most_50000_urls_per_file_the_rest_counted():
    assert sm.MAX_URLS_PER_FILE == 50_000 and sm.MAX_FILE_BYTES == 52_428_800
    data = urlset(*((f"https://h.test/{i}", None) for i in range(50_003)))
    parsed = sm.parse_sitemap(data)
    assert len(parsed.entries) == 50_000 and parsed.cut == 3 and parsed.entries[-1][0] == "https://h.test/49999"


# --- gzip -----------------------------------------------------------------------------------------

def test_gzip_by_magic_and_multi_member():
    data = urlset(("https://h.test/a", None))
    assert sm.inflate(gzip.compress(data)) == data
    assert sm.inflate(gzip.compress(data[:20]) + gzip.compress(data[20:])) == data
    assert sm.inflate(data) == data  # plain XML stays as it is


def test_gzip_bomb_stops_at_the_limit():
    bomb = gzip.compress(b"\0" * (20 * 1024 * 1024), compresslevel=9)  # 20 MiB of zeros in ~20 KB
    assert len(bomb) < 100_000
    with pytest.raises(sm.SitemapError, match="larger than 1,048,576 bytes uncompressed"):
        sm.inflate(bomb, limit=1024 * 1024)
    assert len(sm.inflate(bomb)) == 20 * 1024 * 1024  # under the protocol's 50 MB: read


@pytest.mark.parametrize("data", [gzip.compress(b"<urlset/>", mtime=0)[:-12], b"\x1f\x8bnot gzip at all"],
                         ids=["cut-short", "not-gzip"])  # ids stable across xdist workers (gzip header time)
def test_broken_gzip_is_a_named_error(data):
    with pytest.raises(sm.SitemapError, match="gzip"):
        sm.inflate(data)


def test_plain_file_over_the_limit_is_refused():
    with pytest.raises(sm.SitemapError, match="larger than 10 bytes"):
        sm.inflate(b"x" * 11, limit=10)


# --- one host's sitemaps, politely (fake fetch, real timers) ----------------------------------------

class FakeSite:
    """``fetch(url)`` over a dict of bodies; records when each request was made and ended."""

    def __init__(self, files: dict[str, bytes], took_s: float = 0.05) -> None:
        self.files, self.took_s, self.calls = files, took_s, []

    def fetch(self, url: str) -> sm.Fetched:
        start = time.time()
        time.sleep(self.took_s)
        done = time.time()
        self.calls.append((url, start, done))
        if url not in self.files:
            return sm.Fetched(url, None, "HTTP 404", done)
        return sm.Fetched(url, sm.inflate(self.files[url]), None, done)


ROBOTS = "User-agent: *\nDisallow: /private/\nSitemap: http://h.test/index.xml\n"
AFTER = datetime(2024, 1, 1, tzinfo=timezone.utc)


def test_index_with_a_gzip_child_lastmod_filter_and_gaps():
    site = FakeSite({
        "http://h.test/index.xml": index(("/pages.xml.gz", "2024-02-01"), ("http://h.test/old.xml", "2023-06-01"),
                                         ("http://h.test/posts.xml", None), ("http://other.test/x.xml", None),
                                         ("http://h.test/private/p.xml", None)),
        "http://h.test/pages.xml.gz": gzip.compress(urlset(("http://h.test/new", "2024-03-01"),
                                                           ("http://h.test/stale", "2023-12-31T23:59:59Z"),
                                                           ("http://h.test/undated", None),
                                                           ("/relative", "2024-01-01T00:00:01Z"))),
        "http://h.test/posts.xml": urlset(("http://h.test/new", "2024-05-01"), ("http://h.test/p1", "2024-01-01")),
    })
    rules = RobotsRules(ROBOTS)
    delay_ms, started = 300, time.time()
    got = sm.read_host("h.test", "http", rules.sitemap_lines, allowed=rules.allowed, delay_ms=delay_ms,
                       not_before=started + 0.2, fetch=site.fetch, now=time.time, lastmod_after=AFTER, log=lambda _m: None)
    assert [c[0] for c in site.calls] == ["http://h.test/index.xml", "http://h.test/pages.xml.gz",
                                          "http://h.test/posts.xml"]
    assert got.urls == ["http://h.test/new", "http://h.test/undated", "http://h.test/relative"]
    assert (got.files, got.found, got.older) == (3, 6, 2)  # stale, and p1 (lastmod exactly the date: not after)
    assert any("old.xml: not fetched" in n for n in got.notes)
    assert any("other.test/x.xml: on another host" in n for n in got.notes)
    assert any("private/p.xml: disallowed by robots.txt" in n for n in got.notes)
    assert site.calls[0][1] >= started + 0.2
    gaps = [nxt[1] - prev[2] for prev, nxt in zip(site.calls, site.calls[1:])]
    assert all(g >= delay_ms / 1000 for g in gaps), gaps
    assert got.last_request == site.calls[-1][2]


def test_without_sitemap_lines_sitemap_xml_is_read_and_limits_hold():
    site = FakeSite({"http://h.test/sitemap.xml": index(*((f"/s{i}.xml", None) for i in range(5))),
                     **{f"http://h.test/s{i}.xml": urlset(*((f"/p{i}-{j}", None) for j in range(4))) for i in range(5)}},
                    took_s=0.0)
    got = sm.read_host("h.test", "http", None, allowed=lambda _u: True, delay_ms=0, not_before=0, fetch=site.fetch,
                       now=time.time, max_files=3, max_urls=5, log=lambda _m: None)
    assert [c[0] for c in site.calls] == ["http://h.test/sitemap.xml", "http://h.test/s0.xml", "http://h.test/s1.xml"]
    assert len(got.urls) == 5 and got.found == 8 and any("3 more sitemap file(s) not fetched" in n for n in got.notes)


def test_bad_files_are_noted_and_the_others_read():
    site = FakeSite({"http://h.test/a.xml": b"<urlset><url>", "http://h.test/b.xml": urlset(("/ok", None))},
                    took_s=0.0)
    got = sm.read_host("h.test", "http", "Sitemap: /a.xml\nSitemap: /missing.xml\nSitemap: /b.xml",
                       allowed=lambda _u: True, delay_ms=0, not_before=0, fetch=site.fetch, now=time.time,
                       log=lambda _m: None)
    assert got.urls == ["http://h.test/ok"] and got.files == 3
    assert len(got.notes) == 2 and "a.xml: not well-formed XML" in got.notes[0], got.notes
    assert got.notes[1] == "http://h.test/missing.xml: HTTP 404"


# --- fetch over real HTTP on loopback -----------------------------------------------------------------

class Served(LoopbackSite):
    def __init__(self, routes: dict[str, tuple[int, dict, bytes]]) -> None:
        self.routes, self.paths = routes, []
        served = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:
                pass

            def do_GET(self) -> None:
                served.paths.append(self.path)
                status, headers, body = served.routes.get(self.path, (404, {}, b"no"))
                self.send_response(status)
                for k, v in headers.items():
                    self.send_header(k, v.replace("PORT", str(served.port)))
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        super().__init__(Handler, daemon_threads=False)


def test_fetch_gzip_encoding_gz_file_redirects_and_limits():
    xml = urlset(("http://h.test/a", None))
    site = Served({
        "/enc.xml": (200, {"Content-Encoding": "gzip"}, gzip.compress(xml)),
        "/file.xml.gz": (200, {"Content-Type": "application/gzip"}, gzip.compress(xml)),
        "/moved.xml": (301, {"Location": "/file.xml.gz"}, b""),
        "/away.xml": (302, {"Location": "http://localhost:PORT/file.xml.gz"}, b""),
        "/blocked.xml": (302, {"Location": "/private/x.xml"}, b""),
        "/big.xml": (200, {}, b"x" * 2000),
        "/bomb.xml": (200, {"Content-Encoding": "gzip"}, gzip.compress(b"\0" * 5_000_000)),
    })
    try:
        def fetch(path, limit=sm.MAX_FILE_BYTES):
            return sm.fetch_sitemap(site.url + path, allowed=lambda u: "/private/" not in u, transport=None,
                                    now=time.time, limit=limit)
        assert fetch("/enc.xml").body == xml
        assert fetch("/file.xml.gz").body == xml
        moved = fetch("/moved.xml")
        assert moved.body == xml and moved.done is not None
        assert "another host" in fetch("/away.xml").error
        assert "robots.txt disallows" in fetch("/blocked.xml").error
        assert fetch("/nothing.xml").error == "HTTP 404"
        assert "larger than 1,000 bytes" in fetch("/big.xml", limit=1000).error
        assert "uncompressed" in fetch("/bomb.xml", limit=1_000_000).error
    finally:
        site.stop()
    assert "/private/x.xml" not in site.paths and site.paths.count("/file.xml.gz") == 2


# --- plan_level: sitemaps after robots.txt, the first capture a whole delay after them ---------------

def test_plan_reads_sitemaps_after_robots_and_the_first_capture_waits_the_delay():
    robots_done: list[float] = []

    def fetch_robots(url: str) -> RobotsOutcome:
        robots_done.append(time.time())
        if "down.test" in url:
            return RobotsOutcome(UNREACHABLE, detail="503")
        return RobotsOutcome(ALLOWED, RobotsRules("User-agent: *\nCrawl-delay: 0.4\nSitemap: http://h.test/s.xml\n"))

    site = FakeSite({"http://h.test/s.xml": urlset(("http://h.test/a", "2025-01-01"), ("http://h.test/b", "2020-01-01"))})
    asked = []

    def fetch_sitemap(url, allowed):
        asked.append(url)
        return site.fetch(url)

    out = plan_level.plan([{"host": "h.test", "url": "http://h.test/"}, {"host": "down.test", "url": "http://down.test/"}],
                          100, True, 4, fetch=fetch_robots, read_endpoints=lambda: '["http://x"]', now=time.time,
                          log=lambda _m: None, sitemap={"lastmodAfter": "2024-01-01T00:00:00.000Z", "maxUrls": 10},
                          fetch_sitemap=fetch_sitemap)
    planned = time.time()
    assert asked == ["http://h.test/s.xml"]  # down.test: robots.txt unreachable, no sitemap request
    (entry,) = out["sitemaps"]
    assert (entry["host"], entry["urls"], entry["found"], entry["older"], entry["files"]) == (
        "h.test", ["http://h.test/a"], 2, 1, 1)
    (_url, start, done) = site.calls[0]
    assert start - min(robots_done) >= 0.4  # Crawl-delay 0.4 s wins over the 100 ms setting, after robots.txt
    assert datetime.fromisoformat(entry["lastRequestAt"].replace("Z", "+00:00")).timestamp() >= done
    (group,) = out["groups"]
    assert group["notBefore"] >= done + 0.4 - 0.002 and group["initialDelayMs"] >= round((done + 0.4 - planned) * 1000) - 2


def test_plan_without_sitemap_input_has_no_sitemaps_key():
    out = plan_level.plan([{"host": "h.test", "url": "http://h.test/"}], 0, True, 4,
                          fetch=lambda _u: RobotsOutcome(ALLOWED, RobotsRules("Sitemap: /s.xml\n")),
                          read_endpoints=lambda: '["http://x"]', log=lambda _m: None,
                          fetch_sitemap=lambda *_a: pytest.fail("no sitemap fetch without the input"))
    assert "sitemaps" not in out
