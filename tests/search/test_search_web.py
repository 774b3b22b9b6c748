"""The web page's search in a real Chromium: the header's box on every view, the results page
(snippets with <mark>, filters, paging) against a real ledger in JWT mode (dev issuer)."""

from __future__ import annotations

import httpx
import pytest

from tests.archive.ledger_stack import serve, settings_for
from tests.web.test_auth_flow import _signed_in


@pytest.fixture(scope="module")
def page_as_alice(indexed_stack, dev_issuer, browser):
    s = indexed_stack
    server = serve(settings_for(s.db_url, s.fga, s.s3_server, oidc_issuer=dev_issuer.issuer,
                                oidc_audience=dev_issuer.audience, search_sweep_interval_s=3600.0))
    try:
        with httpx.Client(timeout=15) as client:
            _signed_in(client, server.url, "alice", "acme")
            context = browser.new_context()
            context.add_cookies([{"name": c.name, "value": c.value, "url": server.url} for c in client.cookies.jar])
        page = context.new_page()
        page.set_default_timeout(30_000)
        yield server.url, page
        context.close()
    finally:
        server.stop()


def test_search_from_the_header_of_another_view(page_as_alice):
    url, page = page_as_alice
    page.goto(url + "/#/archives")
    page.locator("#search-box-q").fill("lighthouse")
    page.locator("#search-box-q").press("Enter")
    page.wait_for_selector("#search-hits li.hit")
    titles = page.locator("#search-hits .hit-title").all_inner_texts()
    assert titles[0] == "The lighthouse keeper" and len(titles) == 3
    assert "Contoso" not in page.content()
    assert page.locator("#search-hits .snippet mark").first.inner_text().lower() == "lighthouse"
    href = page.locator("#search-hits .hit-title").first.get_attribute("href")
    assert href.startswith("/#/replay?archive=")
    assert page.locator("#search-q").input_value() == "lighthouse"


def test_filters_and_paging_on_the_results_page(page_as_alice):
    url, page = page_as_alice
    page.goto(url + "/#/search?q=lighthouse&host=coast.example")
    page.wait_for_selector("#search-hits li.hit")
    assert page.locator("#search-hits .hit-title").all_inner_texts() == ["Old coast"]
    page.goto(url + "/#/crawls")
    page.goto(url + "/#/search?q=lighthouse&page=1")
    page.wait_for_selector("#search-hits li.hit")
    page.locator("#search-host").fill("harbour.example")
    page.locator("#search-apply").click()
    page.wait_for_function("document.querySelectorAll('#search-hits li.hit').length === 2")


def test_a_bad_query_shows_the_reason(page_as_alice):
    url, page = page_as_alice
    page.goto(url + "/#/search?q=the%20and%20of")
    page.wait_for_selector("#search-status.error")
    assert "only stop words" in page.locator("#search-status").inner_text()


@pytest.mark.parametrize("length", [501, 600])
def test_a_long_pasted_query_reaches_the_ledger_whole_and_its_reason_shows(page_as_alice, length):
    """No maxlength cuts a paste short (a trial's 600 characters became 500 and "No pages you may
    view said that."): the ledger's 400 says the limit beside the search field."""
    url, page = page_as_alice
    query = ("lighthouse keeper " * 40)[:length - 1] + "x"
    page.goto(url + "/#/archives")
    page.locator("#search-box-q").fill(query)
    assert page.locator("#search-box-q").input_value() == query
    page.locator("#search-box-q").press("Enter")
    page.wait_for_selector("#search-status.error")
    said = page.locator("#search-status").inner_text()
    assert said == f"the query is {length} characters long; at most 500 are searched", said
    assert page.locator("#search-q").input_value() == query
    assert page.locator("#search-q").get_attribute("aria-describedby") == "search-status"


def test_a_query_of_500_characters_is_searched(page_as_alice):
    url, page = page_as_alice
    query = ("lighthouse keeper " * 40)[:499] + "x"
    page.goto(url + "/#/archives")
    page.locator("#search-box-q").fill(query)
    page.locator("#search-box-q").press("Enter")
    page.wait_for_function("!/Searching/.test(document.getElementById('search-status')?.textContent ?? 'Searching')")
    assert page.get_attribute("#search-status", "class") == "muted", page.inner_text("#search-status")
