"""What is in a page or archive, as the CLI prints it (issue 25 item 5): title, HTTP status,
content type, size, screenshot — each said ``unknown`` when the ledger does not know it."""

from __future__ import annotations

from rich.console import Console

from ledger.client import render


def shown(renderable) -> str:
    console = Console(width=160, record=True, color_system=None)
    console.print(renderable)
    return console.export_text()


def test_a_page_says_what_is_in_it_and_what_is_unknown():
    pages = [
        {"url": "http://a.test/", "depth": 0, "state": "captured", "archiveId": "1" * 36, "title": "Bees",
         "httpStatus": 200, "contentType": "text/html", "bytes": 12_345, "thumbnailUrl": "http://s3/x.png?sig"},
        {"url": "http://a.test/x", "depth": 1, "state": "captured", "archiveId": "2" * 36, "title": None,
         "httpStatus": None, "contentType": None, "bytes": None, "thumbnailUrl": None},
        {"url": "http://a.test/gone", "depth": 1, "state": "failed", "archiveId": None, "title": None},
    ]
    text = shown(render.pages_table(pages))
    assert "“Bees” · HTTP 200 · text/html · 12.3 kB · screenshot" in text
    assert "title unknown · status unknown · type unknown · size unknown" in text
    assert text.count("unknown") == 4  # the failed page has no archive: nothing claimed about it


def test_archives_and_the_crawl_say_sizes():
    rows = [{"id": "3" * 36, "sourceUrl": "http://a.test/", "capturedAt": "2026-12-01T04:00:00.000Z",
             "waczComplete": True, "title": "Bees", "bytes": 2_500_000}]
    assert "“Bees” · 2.5 MB" in shown(render.archives_table(rows))
    assert "title unknown · size unknown" in shown(render.archives_table([{**rows[0], "title": None, "bytes": None}]))
    old = {k: v for k, v in rows[0].items() if k not in ("title", "bytes")}  # a ledger that does not say
    assert "unknown" not in shown(render.archives_table([old]))
    crawl = {"crawlId": "c", "state": "succeeded", "totalBytes": 1_234_567, "bytesUnknown": 2}
    assert "1.2 MB (+ 2 archive(s) not measured yet)" in shown(render.summary_view(crawl))


def test_a_page_stored_as_a_revisit_shows_its_originals_type_and_a_revisit_marker():
    """Decision 341: the type of a recrawled page is its original's; ``revisit`` is said apart."""
    pages = [
        {"url": "http://a.test/", "depth": 0, "state": "captured", "archiveId": "1" * 36, "title": "Bees",
         "httpStatus": 200, "contentType": "text/html", "revisit": True, "bytes": 2_000, "thumbnailUrl": None},
        {"url": "http://a.test/new", "depth": 1, "state": "captured", "archiveId": "2" * 36, "title": "New",
         "httpStatus": 200, "contentType": "text/html", "revisit": False, "bytes": 3_000, "thumbnailUrl": None},
        {"url": "http://a.test/lost", "depth": 1, "state": "captured", "archiveId": "3" * 36, "title": "Lost",
         "httpStatus": 200, "contentType": None, "revisit": True, "bytes": 1_000, "thumbnailUrl": None},
    ]
    text = shown(render.pages_table(pages))
    assert "“Bees” · HTTP 200 · text/html · revisit · 2.0 kB" in text
    assert "“New” · HTTP 200 · text/html · 3.0 kB" in text
    assert "“Lost” · HTTP 200 · type unknown · revisit · 1.0 kB" in text  # the original is not known
    assert "warc/revisit" not in text and text.count("revisit") == 2
