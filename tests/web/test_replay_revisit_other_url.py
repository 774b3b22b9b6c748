"""A recrawl whose pages are revisits of originals at another URL replays in ReplayWeb.page
(decision 322; found by a new-user trial: "Original Archived Page Missing").

One copy of a page is served on two loopback ports. Crawl A archives it on the first port,
crawl B on the second: B's seed is stored as a ``revisit`` of A's capture (another
``WARC-Target-URI``) naming A's member in ``WARC-Refers-To-Container``. "Replay this crawl" of B
shows the page with its text.
"""

from __future__ import annotations

import io
import re
import zipfile
from collections.abc import Iterator

import httpx
import pytest
from warcio.archiveiterator import ArchiveIterator

from tests.e2e.site import Site
from tests.fixtures.crawl_api import start_crawl, wait_for_collection
from tests.fixtures.tls import client_tls
from tests.web.test_browser import Watch, new_page, sign_in, wait_final
from tests.web.test_crawl_replay import replayed

pytestmark = pytest.mark.e2e
TITLE = "One copy on two ports"


@pytest.fixture(scope="module")
def two_ports(tmp_path_factory) -> Iterator[tuple[Site, Site]]:
    root = tmp_path_factory.mktemp("copy")
    filler = "<p>" + "The same docs page, served twice. " * 80 + "</p>"  # 2.7 kB: a revisit (≥ 1 KiB)
    (root / "index.html").write_text(f"<!doctype html><html><head><meta charset=utf-8><title>{TITLE}</title></head>"
                                     f"<body><h1>{TITLE}</h1>{filler}</body></html>")
    a, b = Site(root, "User-agent: *\nAllow: /\n"), Site(root, "User-agent: *\nAllow: /\n")
    try:
        yield a, b
    finally:
        a.stop()
        b.stop()


def crawl(api: httpx.Client, seed: str) -> tuple[str, dict]:
    crawl_id = start_crawl(api, {"seeds": [seed], "maxDepth": 0, "perHostDelayMs": 200})
    _state, body = wait_for_collection(api, crawl_id, lambda c: any(m.get("role") != "original" for m in c["resources"]))
    return crawl_id, body


def test_replay_this_crawl_shows_a_revisit_of_an_original_at_another_url(local_stack, browser, two_ports) -> None:
    site_a, site_b = two_ports
    headers = {"Authorization": "Bearer " + local_stack.token()}
    with httpx.Client(base_url=local_stack.api_url, headers=headers, timeout=30, verify=client_tls()) as api:
        _, first = crawl(api, site_a.url + "/index.html")
        crawl_b, body = crawl(api, site_b.url + "/index.html")
    [a_member] = first["resources"]
    [own] = [m for m in body["resources"] if m.get("role") != "original"]
    with httpx.Client(base_url=local_stack.api_url, headers=headers, timeout=30, verify=client_tls()) as api:
        wacz = api.get(own["path"], follow_redirects=True).content  # a ledger path: 302 to a signed URL
    with zipfile.ZipFile(io.BytesIO(wacz)) as z:
        warc = z.read("archive/data.warc.gz")
    [seed] = [r.rec_headers for r in ArchiveIterator(io.BytesIO(warc))
              if r.rec_headers.get_header("WARC-Target-URI") == site_b.url + "/index.html"
              and r.rec_headers.get_header("WARC-Type") in ("response", "revisit")]
    assert seed.get_header("WARC-Type") == "revisit"
    assert seed.get_header("WARC-Refers-To-Target-URI") == site_a.url + "/index.html"
    assert seed.get_header("WARC-Refers-To-Container") == a_member["name"]
    assert a_member["name"] in [m["name"] for m in body["resources"] if m.get("role") == "original"]

    context, page = new_page(browser)
    try:
        sign_in(local_stack, page)
        page.goto(local_stack.api_url + f"/#/crawls/{crawl_b}")
        assert wait_final(page) == "succeeded"
        watch = Watch(page.context)
        page.click("#replay-crawl")
        page.wait_for_url(re.compile(r"^http://localhost:\d+/replay\.html\?collection=.*"))
        frame = replayed(page, TITLE, watch)
        assert "The same docs page, served twice." in frame.inner_text("body")
    finally:
        context.close()
