"""The crawl view's "Changes" section in real Chromium (issue 27 item 3, decision 211): a site is
crawled, one page changed, and crawled again; the recrawl's view counts 1 changed and 2
unchanged, and the changed page's two links replay its two captures — the earlier text from the
earlier crawl's collection, the new text from the recrawl's."""

from __future__ import annotations

import re

import httpx
import pytest

from tests.e2e.site import Site
from tests.fixtures.crawl_api import start_crawl, wait_for_collection
from tests.fixtures.tls import client_tls
from tests.web.test_browser import Watch, facts_apart, new_page, sign_in, stray_nulls, wait_final
from tests.web.test_crawl_replay import replayed

pytestmark = pytest.mark.e2e


def html(title: str, links: list[str] = ()) -> str:
    anchors = "".join(f'<a href="{n}">{n}</a> ' for n in links)
    return (f"<!doctype html><html><head><meta charset=utf-8><title>{title}</title></head><body><h1>{title}</h1>"
            f"<p>{'Words of this page. ' * 80}</p>{anchors}</body></html>")


def crawl(local_stack, seed: str) -> str:
    headers = {"Authorization": "Bearer " + local_stack.token()}
    with httpx.Client(base_url=local_stack.api_url, headers=headers, timeout=30, verify=client_tls()) as api:
        crawl_id = start_crawl(api, {"seeds": [seed], "maxDepth": 1, "perHostDelayMs": 100})
        # every archive admitted: the recrawl's revisits need them
        state, _c = wait_for_collection(api, crawl_id, lambda c: all(m["why"] != "not-admitted-yet" for m in c["missing"]))
        assert state == "succeeded"
    return crawl_id


def test_the_recrawl_view_counts_changes_and_replays_both_captures(local_stack, browser, tmp_path) -> None:
    (tmp_path / "index.html").write_text(html("Home", ["a.html", "b.html"]))
    (tmp_path / "a.html").write_text(html("Tide tables, first edition"))
    (tmp_path / "b.html").write_text(html("Harbour"))
    site = Site(tmp_path, "User-agent: *\nAllow: /\n")
    try:
        first = crawl(local_stack, site.url + "/index.html")
        (tmp_path / "a.html").write_text(html("Tide tables, second edition"))
        second = crawl(local_stack, site.url + "/index.html")
    finally:
        site.stop()
    context, page = new_page(browser)
    try:
        sign_in(local_stack, page)
        # the first crawl has none before it: said in a muted line, with no error answer or console
        # error on the way (decision 354: the page asks changes/since, a 200 either way)
        errors: list[str] = []
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.on("response", lambda r: errors.append(f"{r.status} {r.url}") if r.status >= 400 else None)
        page.goto(local_stack.api_url + f"/#/crawls/{first[:8]}")  # the short id, as titles and the CLI show it
        assert wait_final(page) == "succeeded"
        assert page.url.endswith(f"#/crawls/{first}")  # the one crawl it starts, by its full id
        page.wait_for_selector("#changes-none:not(:empty)", timeout=60_000)
        assert "no earlier finished crawl" in page.inner_text("#changes-none")
        assert page.get_attribute("#changes-none", "class") == "muted"
        # the crawls list counts blocked pages and hosts (decision 231) in a column of its own
        page.goto(local_stack.api_url + "/#/crawls")
        page.wait_for_selector(f'table#crawls tr.crawl[data-id="{second}"]')
        assert "Blocked" in page.locator("table#crawls thead").inner_text()
        assert page.inner_text(f'tr.crawl[data-id="{second}"] td.blocked') == "0"
        assert errors == [], errors
        page.goto(local_stack.api_url + f"/#/crawls/{second}")
        assert wait_final(page) == "succeeded"
        page.wait_for_selector("#changes-summary", timeout=60_000)
        summary = page.inner_text("#changes-summary")
        assert "1 changed" in summary and "2 unchanged" in summary and "0 new" in summary and "0 gone" in summary
        assert page.get_attribute("#changes-summary a", "href") == f"#/crawls/{first}"
        # the empty lists (new, gone, not compared) are left out, not written as "nullnullnull"
        # (a trial saw it under the Changed table); the open one and the closed one show
        assert page.locator("details.changes-list").evaluate_all("ds => ds.map((d) => d.dataset.kind)") == ["changed", "unchanged"]
        assert stray_nulls(page, "main") == []
        # every fact's value beside its label, Seeds too (it sat in the next row's first column)
        assert page.inner_text('#crawl-facts dd[data-fact="seeds"]') == site.url + "/index.html"
        assert facts_apart(page) == []
        row = page.locator('tr.change[data-kind="changed"]')
        assert row.count() == 1 and "a.html" in row.inner_text()
        for side, title in (("before", "Tide tables, first edition"), ("now", "Tide tables, second edition")):
            page.goto(local_stack.api_url + f"/#/crawls/{second}")
            page.wait_for_selector(f'a.replay[data-side="{side}"]', timeout=60_000)
            watch = Watch(page.context)
            page.click(f'tr.change[data-kind="changed"] a.replay[data-side="{side}"]')
            page.wait_for_url(re.compile(r"^http://localhost:\d+/replay\.html\?collection=.*"))
            replayed(page, title, watch)
    finally:
        context.close()
