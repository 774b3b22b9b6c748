"""Page formats: ``.links.json`` bytes as ``json.dumps(indent=2)`` writes them (spliced from the
page's own JSON text), valid UTF-8 whatever the link texts; with ``fullPage`` the shots and the
DOM serialisations taken together still give every format, in order (waggle_capture/formats.py)."""

from __future__ import annotations

import json

from tests.devstack.helpers import ALL_FORMATS, capture, s3_get

LINKS_ONLY = {"png": False, "webp": False, "html": False, "links": True, "mhtml": False, "wacz": False}


def test_links_json_is_pretty_printed_valid_utf8(capture_server, test_site, s3_server):
    body = capture(capture_server, url=test_site.url("/tricky-links"), captureFormats=LINKS_ONLY,
                   correlationId="tricky").json()
    rep = body["report"]
    assert rep["status"] == "success", rep
    raw = s3_get(s3_server, rep["artifacts"]["links"])
    doc = json.loads(raw.decode("utf-8"))  # strict: a lone surrogate would not decode
    assert raw == (json.dumps(doc, indent=2, ensure_ascii=False) + "\n").encode("utf-8")
    assert list(doc) == ["taskId", "url", "finalUrl", "labels", "correlationId", "capturedAt", "links"]
    texts = {link["href"].rsplit("/", 1)[1]: link["text"] for link in doc["links"]}
    assert texts["t0"] == 'say "hi" \\ back' and texts["t1"] == "tab\there" and texts["t3"] == "café ü 日本"
    assert texts["t4"] == "line\u2028sep" and "\x01" in texts["t2"]
    assert texts["t5"] == "x" * 199  # the 200-unit cut split the emoji: its first half is dropped
    assert body["links"] == doc["links"]  # the answer's inline links are the same items


def test_full_page_all_formats_in_order(capture_server, test_site, s3_server):
    rep = capture(capture_server, url=test_site.url("/page"), captureFormats=ALL_FORMATS, fullPage=True,
                  viewport={"width": 400, "height": 300}).json()["report"]
    assert rep["status"] == "success", rep
    assert list(rep["artifacts"]) == ["png", "webp", "html", "links", "mhtml", "wacz"]
    html = s3_get(s3_server, rep["artifacts"]["html"]).decode("utf-8")
    assert "<h1>Hello capture</h1>" in html and "playwright" not in html.lower()
    mhtml = s3_get(s3_server, rep["artifacts"]["mhtml"])
    assert mhtml.startswith(b"From: <Saved by Blink>") and b"Hello capture" in mhtml
    assert s3_get(s3_server, rep["artifacts"]["png"])[:8] == b"\x89PNG\r\n\x1a\n"


def test_together_cancels_the_rest_and_raises_the_first_failure_as_it_is():
    import asyncio

    from waggle_capture.formats import together

    cancelled = []

    async def slow():
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            cancelled.append(True)
            raise

    async def fails():
        await asyncio.sleep(0.01)
        raise asyncio.TimeoutError()  # the capture's failure mapping reads this type

    async def main():
        assert await together(asyncio.sleep(0, "a"), asyncio.sleep(0, "b")) == ["a", "b"]
        try:
            await together(slow(), fails())
        except asyncio.TimeoutError:
            return cancelled
        raise AssertionError("no failure raised")

    assert asyncio.run(main()) == [True]
