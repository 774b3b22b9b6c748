"""A crawl replayed as one site in real Chromium with ReplayWeb.page (issue 25 item 2).

A chain index → a → b → c is crawled to depth 2 (c is not captured). "Replay this crawl" on the
crawl view opens the player at the seed; clicking the archived links walks index → a → b, each
page from its own WACZ in the one collection; the link to c shows the player's "not archived"
page. Replay from the archives list opens a page inside its crawl's collection, where the links
to the crawl's other pages replay too.
"""

from __future__ import annotations

import io
import json
import re
import time
import zipfile
from collections.abc import Iterator

import httpx
import pytest

from tests.e2e.site import Site
from tests.fixtures.crawl_api import start_crawl, wait_for_collection
from tests.fixtures.tls import client_tls
from tests.web.test_browser import Watch, new_page, sign_in, wait_final

pytestmark = pytest.mark.e2e
NOT_ARCHIVED = "Archived Page Not Found"
SHARED_COLOR = "rgb(1, 2, 3)"


def chain_html(title: str, link: str | None) -> str:
    anchor = f'<a id="next" href="{link}">next: {link}</a>' if link else ""
    return (f"<!doctype html><html><head><meta charset=utf-8><title>{title}</title>"
            '<link rel="stylesheet" href="chain.css"></head>'
            f"<body><h1>{title}</h1><p>A page of the chain.</p>{anchor}</body></html>")


@pytest.fixture(scope="module")
def chain_site(tmp_path_factory) -> Iterator[Site]:
    root = tmp_path_factory.mktemp("chain")
    for name, title, link in (("index.html", "Chain 0", "a.html"), ("a.html", "Chain A", "b.html"),
                              ("b.html", "Chain B", "c.html"), ("c.html", "Chain C", None)):
        (root / name).write_text(chain_html(title, link))
    (root / "chain.css").write_text(f"h1 {{ color: {SHARED_COLOR}; }}\n")  # every page's: stored once (decision 321)
    s = Site(root, "User-agent: *\nAllow: /\n")
    try:
        yield s
    finally:
        s.stop()


@pytest.fixture(scope="module")
def chain_crawl(local_stack, chain_site) -> str:
    """The chain crawled to depth 2 (index, a, b captured; c beyond the depth), every archive
    admitted and visible: the collection lists 3 members."""
    headers = {"Authorization": "Bearer " + local_stack.token()}
    with httpx.Client(base_url=local_stack.api_url, headers=headers, timeout=30, verify=client_tls()) as api:
        crawl_id = start_crawl(api, {"seeds": [chain_site.url + "/index.html"], "maxDepth": 2,
                                     "perHostDelayMs": 200})
        state, body = wait_for_collection(api, crawl_id, lambda c: len(c["resources"]) == 3)
    assert state == "succeeded"
    assert sorted(m["url"].rsplit("/", 1)[1] for m in body["resources"]) == ["a.html", "b.html", "index.html"]
    for m in body["resources"]:  # the seed stored chain.css; a and b left it out (decision 321)
        with httpx.Client(base_url=local_stack.api_url, headers=headers, timeout=30, verify=client_tls()) as api:
            wacz = api.get(m["path"], follow_redirects=True).content  # a ledger path: 302 to a signed URL
        with zipfile.ZipFile(io.BytesIO(wacz)) as z:
            pkg = json.loads(z.read("datapackage.json"))["browserhive:capture"]
        left = (pkg.get("revisits") or {}).get("sameCrawl", {}).get("resources", [])
        assert left == ([] if m["url"].endswith("index.html") else [chain_site.url + "/chain.css"]), (m["url"], pkg)
    return crawl_id


def crawled(local_stack, seed: str, members: int) -> tuple[str, dict]:
    """``seed`` crawled to depth 1 → (crawl id, its collection) once it ended with ``members``
    archives admitted."""
    headers = {"Authorization": "Bearer " + local_stack.token()}
    with httpx.Client(base_url=local_stack.api_url, headers=headers, timeout=30, verify=client_tls()) as api:
        crawl_id = start_crawl(api, {"seeds": [seed], "maxDepth": 1, "perHostDelayMs": 200})
        _state, coll = wait_for_collection(api, crawl_id, lambda c: len(c["resources"]) == members)
        return crawl_id, coll


def replayed(page, title: str, watch: Watch, timeout_s: float = 120):
    """The player's innermost frame under /replay/w/ once its h1 is ``title``."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for frame in page.frames:
            if "/replay/w/" in frame.url:
                try:
                    if frame.inner_text("h1", timeout=1000) == title:
                        return frame
                except Exception:  # the frame navigates while loading
                    continue
        page.wait_for_timeout(300)
    raise AssertionError(f"{title!r} was not replayed: frames " + ", ".join(f.url for f in page.frames)
                         + f"\nconsole and network:\n{watch}")


def styled(frame, watch: Watch, timeout_s: float = 30) -> None:
    """The replayed page's h1 has the shared style sheet's colour (wherever the sheet is stored)."""
    deadline = time.monotonic() + timeout_s
    color = None
    while time.monotonic() < deadline:
        color = frame.evaluate("getComputedStyle(document.querySelector('h1')).color")
        if color == SHARED_COLOR:
            return
        time.sleep(0.3)
    raise AssertionError(f"h1 is {color}, not the style sheet's {SHARED_COLOR}\n{watch}")


def not_archived(page, url_part: str, watch: Watch, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for frame in page.frames:
            try:
                text = frame.inner_text("body", timeout=1000)
            except Exception:
                continue
            if NOT_ARCHIVED in text and url_part in text:
                return
        page.wait_for_timeout(300)
    raise AssertionError(f"no 'not archived' page for {url_part}\n{watch}")


@pytest.fixture(scope="module")
def local(local_stack, browser):
    context, page = new_page(browser)
    try:
        sign_in(local_stack, page)
        yield page
    finally:
        context.close()


def test_replay_this_crawl_walks_three_pages_and_says_not_archived(local_stack, local, chain_crawl, chain_site) -> None:
    local.goto(local_stack.api_url + f"/#/crawls/{chain_crawl}")
    assert wait_final(local) == "succeeded"
    watch = Watch(local.context)
    local.click("#replay-crawl")
    local.wait_for_url(re.compile(r"^http://localhost:\d+/replay\.html\?collection=.*"))
    frame = replayed(local, "Chain 0", watch)
    styled(frame, watch)
    frame.click("#next")
    frame = replayed(local, "Chain A", watch)  # another WACZ of the same collection
    styled(frame, watch)  # its style sheet is in the seed's WACZ only
    frame.click("#next")
    frame = replayed(local, "Chain B", watch)
    styled(frame, watch)
    frame.click("#next")  # c.html: beyond the crawl's depth, never captured
    not_archived(local, "c.html", watch)
    # the collection came from the ledger with the ticket; the members from S3, nothing else
    assert any("/collection.json?ticket=" in u for u in watch.urls), watch
    assert local.evaluate("document.cookie") == ""


def test_replay_from_the_archives_list_opens_the_page_in_its_crawl(local_stack, local, chain_crawl) -> None:
    local.goto(local_stack.api_url + f"/#/archives?crawl={chain_crawl}&url=a.html")
    local.wait_for_function("document.querySelectorAll('tr.archive').length === 1")
    watch = Watch(local.context)
    local.locator("tr.archive button.replay").click()
    local.wait_for_url(re.compile(r"^http://localhost:\d+/replay\.html\?collection=.*"))
    frame = replayed(local, "Chain A", watch)
    frame.click("#next")  # b.html is another archive of the crawl: it replays inside the collection
    replayed(local, "Chain B", watch)


WIDE = [f"p{i}.html" for i in range(1, 10)]


@pytest.fixture(scope="module")
def wide_crawl(local_stack, tmp_path_factory) -> Iterator[tuple[str, dict]]:
    """index → p1 … p9, every page with the shared style sheet, crawled to depth 1: 10 members,
    the sheet stored by the seed's capture only (decision 321) → (crawl id, its collection)."""
    root = tmp_path_factory.mktemp("wide")
    links = "".join(f'<a href="{n}">{n}</a> ' for n in WIDE)
    (root / "index.html").write_text(chain_html("Wide 0", None).replace("</body>", links + "</body>"))
    for n in WIDE:
        (root / n).write_text(chain_html("Wide " + n, None))
    (root / "chain.css").write_text(f"h1 {{ color: {SHARED_COLOR}; }}\n")
    site = Site(root, "User-agent: *\nAllow: /\n")
    try:
        yield crawled(local_stack, site.url + "/index.html", 10)
    finally:
        site.stop()


def test_a_page_opened_first_is_styled_by_the_sheet_another_page_stored(local_stack, browser, wide_crawl) -> None:
    """A fresh browser (nothing of the collection loaded) opens p9 straight from the archives
    list. Its style sheet is in the seed's member only; the player looks in the page's own member,
    then in a few others — not all 10. The collection names the seed's member in
    preloadResources (decision 421), so p9 shows styled (the trial saw 14 resources 404)."""
    crawl_id, coll = wide_crawl
    seed = next(m for m in coll["resources"] if m["url"].endswith("/index.html"))
    assert coll["preloadResources"] == [{"name": seed["name"]}], coll["preloadResources"]
    context, page = new_page(browser)
    try:
        sign_in(local_stack, page)
        page.goto(local_stack.api_url + f"/#/archives?crawl={crawl_id}&url=p9.html")
        page.wait_for_function("document.querySelectorAll('tr.archive').length === 1")
        watch = Watch(page.context)
        page.locator("tr.archive button.replay").click()
        page.wait_for_url(re.compile(r"^http://localhost:\d+/replay\.html\?collection=.*"))
        styled(replayed(page, "Wide p9.html", watch), watch)
    finally:
        context.close()

def test_the_pages_list_says_what_is_in_each_page(local_stack, local, chain_crawl) -> None:
    """Issue 25 item 5 on the page: each captured page's title, HTTP status, content type and
    size; the crawl's archive bytes."""
    local.goto(local_stack.api_url + f"/#/crawls/{chain_crawl}")
    local.wait_for_selector("table#pages tr.page .contents .title")
    rows = local.locator("table#pages tr.page[data-state='captured']")
    titles = sorted(rows.locator(".contents .title").all_inner_texts())
    assert titles == ["“Chain 0”", "“Chain A”", "“Chain B”"], titles
    assert set(rows.locator(".contents .http").all_inner_texts()) == {"HTTP 200"}
    assert all(t.startswith("text/html") for t in rows.locator(".contents .type").all_inner_texts())
    assert all(re.match(r"^\d+(\.\d)? (B|kB|MB)$", b) for b in rows.locator(".contents .bytes").all_inner_texts())
    local.reload()  # the crawl's facts after the pages list measured its archives
    local.wait_for_selector("#crawl-facts")
    assert re.match(r"^\d+(\.\d)? (kB|MB)$", local.inner_text("dd[data-fact='archive bytes']").strip())


@pytest.fixture(scope="module")
def big_chain_crawl(local_stack, tmp_path_factory) -> Iterator[str]:
    """index → a, each page ~200 kB of incompressible text: its WARC record lies far before the
    64 KiB the player first reads from the end of each WACZ, so it is fetched only when shown."""
    import base64
    import os

    root = tmp_path_factory.mktemp("bigchain")
    for name, title, link in (("index.html", "Big 0", "a.html"), ("a.html", "Big A", None)):
        ballast = "<!-- " + base64.b64encode(os.urandom(150_000)).decode() + " -->"
        (root / name).write_text(chain_html(title, link).replace("</body>", ballast + "</body>"))
    site = Site(root, "User-agent: *\nAllow: /\n")
    try:
        yield crawled(local_stack, site.url + "/index.html", 2)[0]
    finally:
        site.stop()


@pytest.fixture
def short_lived_ledger(local_stack):
    """A second ledger on the stack's database, OpenFGA, S3 and issuer whose signed URLs live 4 s
    (``WAGGLE_COLLECTION_URL_EXPIRY_S``), serving its replay origin on its own localhost twin."""
    from devstack.layout import StackConfig
    from devstack.services import ledger_env
    from ledger.api.app import create_app
    from ledger.settings import Settings
    from tests.fixtures.ledger import ServerThread

    info = local_stack.info
    config = StackConfig(state_dir=local_stack.state_dir, captures=info["captures"], ports=info["ports"])
    env = ledger_env(config, info["database_url"])
    values = {k.removeprefix("WAGGLE_").lower(): v for k, v in env.items()
              if k not in ("WAGGLE_API_PORT", "WAGGLE_PUBLIC_URL")}
    settings = Settings(_env_file=None, collection_url_expiry_s=4, **values)  # type: ignore[call-arg]
    app = create_app(settings, periodic=False)
    server = ServerThread(app)
    app.state.replay_origin = f"http://localhost:{server.port}"  # its own twin (the app was built before the port)
    server.start(60)
    try:
        yield server
    finally:
        server.stop()


def test_a_replay_session_outlives_its_signed_urls(local_stack, browser, big_chain_crawl, short_lived_ledger) -> None:
    """The player shows the seed, the S3 URLs its reads were redirected to expire (4 s here, 300 s
    in use), then a click needs bytes of another member: the player reads it through the
    member's ledger path again, which redirects to a URL signed now — the page shows, S3 never
    answers 403 (decision 371; before, the player had to meet the 403 and ask the collection again)."""
    ledger = short_lived_ledger
    r = httpx.post(f"{ledger.url}/api/crawls/{big_chain_crawl}/collection/ticket",
                   headers={"Authorization": "Bearer " + local_stack.token()}, timeout=30)
    assert r.status_code == 201, r.text
    seed = httpx.get(f"{ledger.url}{r.json()['path']}", timeout=30).json()["resources"][0]["url"]
    context, page = new_page(browser)
    try:
        watch = Watch(context)
        from urllib.parse import urlencode

        page.goto(f"http://localhost:{ledger.port}/replay.html?" + urlencode({"collection": r.json()["path"], "url": seed}))
        frame = replayed(page, "Big 0", watch)
        reads = sum("/members/" in u for u in watch.urls)
        assert reads > 0, watch  # members are read through their ledger paths
        page.wait_for_timeout(6000)  # past the 4 s signatures
        frame.click("#next")
        replayed(page, "Big A", watch)
        assert sum("/members/" in u for u in watch.urls) > reads, watch  # read again through the ledger
        assert not any(line.startswith("403 ") for line in watch.lines), watch  # never an expired URL
    finally:
        context.close()
