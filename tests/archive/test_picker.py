"""The picker page (``GET /``) in real headless Chromium, against a real ledger over HTTP."""

from __future__ import annotations

import re
from pathlib import Path

import httpx
import pytest

from ledger.api.picker import render_picker
from tests.archive.ledger_stack import serve, settings_for


@pytest.fixture
def page(browser, tmp_path: Path):
    context = browser.new_context(accept_downloads=True)
    p = context.new_page()
    p.set_default_timeout(15000)
    yield p
    context.close()


def rows(page) -> list[str]:
    return page.locator("tr.archive").evaluate_all("els => els.map(e => e.dataset.id)")


def test_header_mode_lists_flags_and_downloads(archive_ledger, page) -> None:
    a = archive_ledger.archives
    page.goto(archive_ledger.url + "/")
    assert page.locator("#token").count() == 0
    page.fill("#subject", "bob")
    page.fill("#orgs", "acme")
    page.click("#reload")
    page.wait_for_selector("tr.archive")
    assert rows(page) == [a["acme_new"]["id"], a["acme_old"]["id"]]  # newest first
    first, second = page.locator("tr.archive").nth(0), page.locator("tr.archive").nth(1)
    assert first.locator(".badge.incomplete").count() == 1 and second.locator(".badge.incomplete").count() == 0
    assert "https://acme.example/acme_new" in first.inner_text()
    with page.expect_download() as info:
        second.locator("button.download").click()
    download = info.value
    assert Path(download.path()).read_bytes() == a["acme_old"]["body"]
    assert download.url.startswith(archive_ledger.s3.endpoint)  # straight from the store (C12)
    assert "300 s" in page.inner_text("#status")
    # names are remembered across visits
    page.reload()
    assert page.input_value("#subject") == "bob" and page.input_value("#orgs") == "acme"


def test_header_mode_outsider_and_empty_subject(archive_ledger, page) -> None:
    page.goto(archive_ledger.url + "/")
    page.fill("#subject", "mallory")
    page.fill("#orgs", "")
    page.click("#reload")
    page.wait_for_function("document.getElementById('status').textContent.includes('No archives')")
    assert rows(page) == [] and page.locator("#archives").is_hidden()
    page.fill("#subject", "")
    page.click("#reload")
    page.wait_for_function("document.getElementById('status').className === 'error'")
    assert "subject is empty" in page.inner_text("#status")


def test_jwt_mode_serves_the_web_page_instead(archive_ledger, dev_issuer) -> None:
    server = serve(settings_for(archive_ledger.db_url, archive_ledger.fga, archive_ledger.s3,
                                oidc_issuer=dev_issuer.issuer, oidc_audience=dev_issuer.audience))
    try:
        r = httpx.get(server.url + "/", timeout=10)
        assert r.status_code == 200 and 'src="/static/app.js"' in r.text and 'id="token"' not in r.text
    finally:
        server.stop()


def test_deny_mode_shows_only_a_warning(archive_ledger, page) -> None:
    server = serve(settings_for(archive_ledger.db_url, archive_ledger.fga, archive_ledger.s3, dev_identity=False))
    try:
        r = httpx.get(server.url + "/", timeout=10)
        assert r.headers["content-type"] == "text/html; charset=utf-8"
        assert "<script" not in r.text
        page.goto(server.url + "/")
        assert "No identity is configured" in page.inner_text("#notice")
        assert page.locator("input").count() == 0 and page.locator("#reload").count() == 0
    finally:
        server.stop()


def test_header_mode_warns_when_listening_beyond_loopback() -> None:
    wide = render_picker("header", host="0.0.0.0", port=7070)
    assert re.search(r'id="notice"[^>]*>The API listens on 0\.0\.0\.0:7070.*anyone on the network can be anyone', wide)
    assert 'const MODE = "names";' in wide
    assert 'id="notice"' not in render_picker("header", host="127.0.0.1", port=7070)
