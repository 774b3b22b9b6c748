"""End to end on real input (issue 6 item 6): crawl a copy of the Python 3.11 docs.

Two loopback ports serve Debian's ``python3.11-doc`` HTML (two hosts for the crawler) with a
robots.txt that disallows ``/library/`` and asks for ``Crawl-delay: 1``; the crawl asks for a
shorter gap (500 ms), so robots.txt must win. The whole stack runs as in ``waggle dev up``
and the crawl is started with the real client, ``waggle crawl``. Politeness is judged from the
sites' own access logs, archives from the ledger, the store and two independent readers of
WACZ (``wacz validate`` and pywb).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from ledger.useragent import VERSION
from tests.e2e.site import Site, captures

pytestmark = pytest.mark.e2e

DOCS = Path("/usr/share/doc/python3.11/html")
CRAWL_DELAY_S = 1.0  # robots.txt Crawl-delay; the crawl itself asks for 500 ms
ROBOTS = f"User-agent: *\nDisallow: /library/\nCrawl-delay: {CRAWL_DELAY_S:g}\n"
MAX_PAGES = 6
BIN = Path(sys.executable).parent


@pytest.fixture(scope="module")
def sites() -> Iterator[tuple[Site, Site]]:
    assert (DOCS / "index.html").is_file(), "python3.11-doc is not installed: run scripts/bootstrap"
    a, b = Site(DOCS, ROBOTS), Site(DOCS, ROBOTS)
    try:
        yield a, b
    finally:
        a.stop()
        b.stop()


@pytest.fixture(scope="module")
def crawl(local_stack, sites, tmp_path_factory) -> dict:
    """Run ``waggle crawl`` once for the module; returns what the checks below need."""
    a, b = sites
    seeds = [f"{a.url}/index.html", f"{b.url}/index.html", f"{b.url}/library/index.html"]
    download = tmp_path_factory.mktemp("download")
    t0 = time.monotonic()
    done = subprocess.run(
        [str(BIN / "waggle"), "crawl", *seeds, "--depth", "1", "--max-pages", str(MAX_PAGES),
         "--delay-ms", "500", "--parallelism", "2", "--download", str(download)],
        env=local_stack.client_env(), capture_output=True, text=True, timeout=300,
    )
    elapsed = time.monotonic() - t0
    print(f"waggle crawl took {elapsed:.1f} s")  # shown with -s / on failure
    output = done.stdout + done.stderr
    assert done.returncode == 0, f"waggle crawl exited {done.returncode}:\n{output}"
    match = re.search(r"crawl ([0-9a-f-]{36}) started", output)
    assert match, output
    token = local_stack.token()
    http = httpx.Client(base_url=local_stack.api_url, headers={"Authorization": f"Bearer {token}"}, timeout=10)
    body = http.get(f"/api/crawls/{match.group(1)}").json()
    print({k: body.get(k) for k in ("state", "stopReason", "pagesCaptured", "pagesDiscovered", "failures")})
    for site in sites:
        print(site.url, [(round(c.first - t0, 1), round(c.last - c.first, 1), c.page) for c in captures(site.hits)])
    return {"id": match.group(1), "crawl": body, "output": output, "download": download,
            "http": http, "seeds": seeds, "elapsed_s": elapsed}


def test_crawl_succeeded_within_budget(crawl) -> None:
    body = crawl["crawl"]
    assert body["state"] == "succeeded", body
    assert 3 <= body["pagesCaptured"] <= MAX_PAGES, body


def test_robots_disallowed_section_never_requested(crawl, sites) -> None:
    for site in sites:
        hits = site.hits
        assert any(h.path == "/robots.txt" for h in hits), "robots.txt was never fetched"
        assert any(h.path == "/index.html" and h.dest == "document" for h in hits), "the seed was not captured"
        forbidden = [h.path for h in hits if h.path.startswith("/library/")]
        assert forbidden == [], f"robots.txt disallows /library/, yet {site.url} served {forbidden}"
    # the seed under /library/ was in the frontier (not vacuous) and is reported as skipped, not captured
    archived = {a["sourceUrl"] for a in _archives(crawl)}
    assert crawl["seeds"][2] not in archived


def test_every_request_names_waggle(crawl, sites) -> None:
    """The sites' logs: robots.txt (plan_level) and every page request (the capture server's
    Chromium: documents, subresources) carry the same ``waggle/<version>`` token, and no request
    announces a headless browser (issue 11, docs/capture-server.md extension 7)."""
    for site in sites:
        robots = [h.user_agent for h in site.hits if h.path == "/robots.txt"]
        pages = [h for h in site.hits if h.path != "/robots.txt"]
        assert robots and pages, f"{site.url}: robots {len(robots)}, page requests {len(pages)}"
        assert {re.search(r"waggle/\S+", ua).group(0) for ua in robots} == {f"waggle/{VERSION}"}
        wrong = {h.user_agent for h in pages if f" waggle/{VERSION} " not in h.user_agent or "Headless" in h.user_agent}
        assert not wrong, f"{site.url}: page requests without the token or headless: {wrong}"
        assert {h.dest for h in pages} > {"document"}, "no subresource was requested"


def test_per_host_gaps_respect_crawl_delay_across_levels(crawl, sites) -> None:
    seeds = {"/index.html"}
    gaps_within, gaps_across = [], []
    for site in sites:
        caps = captures(site.hits)
        assert all(c.page for c in caps), f"requests before any navigation on {site.url}: {caps[0].hits}"
        for prev, nxt in zip(caps, caps[1:]):
            gap = nxt.first - prev.last
            assert gap >= CRAWL_DELAY_S, (
                f"{site.url}: only {gap * 1000:.0f} ms between the last request of {prev.page}"
                f" and the first of {nxt.page} (Crawl-delay {CRAWL_DELAY_S:g} s)"
            )
            (gaps_across if prev.page in seeds and nxt.page not in seeds else gaps_within).append(gap)
    # both kinds of gap were exercised, so the checks above are not vacuous
    assert gaps_across, "no host had a capture in level 1 after its level-0 capture"
    assert gaps_within, "no host had two captures in one level"


def test_archives_admitted_and_downloadable(crawl, sites) -> None:
    archives = _archives(crawl)
    captured_pages = {f"{s.url}{c.page}" for s in sites for c in captures(s.hits)}
    assert {a["sourceUrl"] for a in archives} >= captured_pages
    files = sorted(crawl["download"].glob("*.wacz"))
    assert len(files) == len(archives), (files, crawl["output"])

    seed = next(a for a in archives if a["sourceUrl"] == crawl["seeds"][0])
    resp = crawl["http"].post(f"/api/archives/{seed['id']}/url")
    assert resp.status_code == 200, resp.text
    signed = resp.json()["url"]
    body = httpx.get(signed, timeout=30)
    assert body.status_code == 200
    assert body.content[:2] == b"PK"  # a zip


def test_wacz_validates_and_replays_in_pywb(crawl, tmp_path) -> None:
    seed = next(a for a in _archives(crawl) if a["sourceUrl"] == crawl["seeds"][0])
    signed = crawl["http"].post(f"/api/archives/{seed['id']}/url").json()["url"]
    wacz = tmp_path / "seed.wacz"
    wacz.write_bytes(httpx.get(signed, timeout=30).content)

    valid = subprocess.run([str(BIN / "wacz"), "validate", "-f", str(wacz)], capture_output=True, text=True, timeout=120)
    assert valid.returncode == 0, valid.stdout + valid.stderr

    # pywb's own import (wb-manager add --unpack-wacz) and replay code, through the helper of
    # the capture tests (it shims pywb's proxy-mode import, see its docstring)
    helper = Path(__file__).resolve().parents[1] / "devstack" / "pywb_replay.py"
    root = tmp_path / "pywb"
    root.mkdir()
    seed_url = crawl["seeds"][0]
    replay = subprocess.run([sys.executable, str(helper), str(root), "e2e", str(wacz), f"mp:{seed_url}"],
                            capture_output=True, text=True, timeout=180)
    lines = [json.loads(line) for line in replay.stdout.splitlines() if line.startswith("{")]
    assert len(lines) == 2, replay.stdout[-2000:] + replay.stderr[-2000:]
    imported, page = lines
    assert seed_url in imported["indexed"], imported
    assert page["status"] == 200, page["body"][:500]
    assert "Python 3.11" in page["body"] and "documentation" in page["body"].lower()


def test_user_outside_the_organization_gets_404(crawl, local_stack) -> None:
    archive = _archives(crawl)[0]
    outsider = local_stack.token(subject="mallory", organizations=["elsewhere"])
    headers = {"Authorization": f"Bearer {outsider}"}
    resp = httpx.post(f"{local_stack.api_url}/api/archives/{archive['id']}/url", headers=headers, timeout=10)
    assert resp.status_code == 404, resp.text
    listed = httpx.get(f"{local_stack.api_url}/api/archives", headers=headers, timeout=10).json()["archives"]
    assert archive["id"] not in {a["id"] for a in listed}


def _archives(crawl) -> list[dict]:
    """This crawl's archives as the local user sees them (all seeds' hosts are the test's sites)."""
    hosts = tuple(s.rsplit("/", 1)[0] + "/" for s in crawl["seeds"][:2])
    rows = crawl["http"].get("/api/archives").json()["archives"]
    return [a for a in rows if a["sourceUrl"].startswith(hosts)]


def test_the_flows_index_level_makes_the_pages_searchable(crawl, local_stack) -> None:
    """index_level (the flow's last step) indexed the crawl's WACZ files from the real capture
    server: the docs' start page is found by its text, in this crawl, and never by an outsider."""
    deadline = time.monotonic() + 90  # the crawl reads succeeded at the last report; index_level runs after it
    hits: list[dict] = []
    while time.monotonic() < deadline:
        resp = crawl["http"].get("/api/search", params={"q": '"official documentation"', "crawl": crawl["id"], "size": 50})
        assert resp.status_code == 200, resp.text
        hits = resp.json()["hits"]
        if crawl["seeds"][0] in {h["url"] for h in hits}:
            break
        time.sleep(1)
    assert crawl["seeds"][0] in {h["url"] for h in hits}, hits
    assert all(h["crawlId"] == crawl["id"] for h in hits)
    outsider = local_stack.token(subject="mallory", organizations=["elsewhere"])
    resp = httpx.get(f"{local_stack.api_url}/api/search", params={"q": '"official documentation"'},
                     headers={"Authorization": f"Bearer {outsider}"}, timeout=30)
    assert resp.status_code == 200 and resp.json()["hits"] == [], resp.text
