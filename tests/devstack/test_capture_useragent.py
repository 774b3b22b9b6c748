"""The user agent a site sees (waggle_capture/useragent.py): Chromium's, ``HeadlessChrome``
written ``Chrome``, with waggle's product token and info URL appended, on the document, its
subresources and a worker's requests — the same product token robots.txt is fetched with."""

from __future__ import annotations

import re

import httpx

from waggle_capture.__main__ import parse_args
from waggle_capture.useragent import page_user_agent
from f.waggle.robots import fetch_robots
from ledger.useragent import suffix
from tests.devstack.helpers import ONLY_WACZ, capture

CHROMIUM_UA = ("Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) "
               "HeadlessChrome/156.0.0.0 Safari/537.36")


def test_page_user_agent_rewrites_headless_and_appends_the_suffix():
    assert page_user_agent(CHROMIUM_UA, "waggle/1.2 (+https://ops.example/bot)") == (
        "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/156.0.0.0 Safari/537.36"
        " waggle/1.2 (+https://ops.example/bot)")
    assert page_user_agent(CHROMIUM_UA, "") == CHROMIUM_UA.replace("HeadlessChrome/", "Chrome/")
    assert page_user_agent(None, "waggle/1.2") is None  # unknown: Chromium's own


def test_suffix_option_and_its_default():
    assert parse_args([])[1].user_agent_suffix == suffix()
    assert parse_args(["--user-agent-suffix", "waggle/0.1.0 (+https://ops.example/bot)"])[1].user_agent_suffix == (
        "waggle/0.1.0 (+https://ops.example/bot)")


def test_document_subresource_and_worker_requests_carry_the_token(capture_server, test_site):
    test_site.user_agents.clear()
    rep = capture(capture_server, url=test_site.url("/worker"), captureFormats=ONLY_WACZ).json()["report"]
    assert rep["status"] == "success", rep
    seen = {path: (ua, hints) for path, ua, hints in test_site.user_agents}
    ua, hints = seen["/worker"]  # the document
    assert ua.endswith(" " + suffix()) and "HeadlessChrome" not in ua and re.search(r" Chrome/\d+\.", ua), ua
    assert seen["/worker.js"][0] == ua  # a subresource
    assert seen["/from-worker"][0] == ua  # the worker's own fetch
    # Client hints left as Chromium's (sent to 127.0.0.1, a potentially trustworthy origin): its
    # brands, none of them headless, consistent with the Chrome/ token.
    assert hints is not None and '"Chromium"' in hints and "Headless" not in hints, hints


def test_robots_and_pages_carry_the_same_product_token(capture_server, test_site):
    test_site.user_agents.clear()
    fetch_robots(test_site.url("/robots.txt"), transport=httpx.HTTPTransport())  # 404 here: no rules
    rep = capture(capture_server, url=test_site.url("/other"), captureFormats=ONLY_WACZ).json()["report"]
    assert rep["status"] == "success", rep
    seen = {path: ua for path, ua, _ in test_site.user_agents}
    robots_token = re.findall(r"waggle/\S+", seen["/robots.txt"])
    assert robots_token and robots_token == re.findall(r"waggle/\S+", seen["/other"])
