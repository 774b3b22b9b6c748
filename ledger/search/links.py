"""Where a search hit opens: the one place that builds the link (switch it here).

Today the per-archive replay of the web page (``#/replay?archive=…``: the page asks for the
archive's signed URL, then opens ReplayWeb.page on the replay origin). When the crawl's
collection replay exists, a hit with a crawl should open ``#/crawls/<crawl>/replay?url=…``
instead — the whole crawl as one site, at this page.
"""

from __future__ import annotations

from urllib.parse import urlencode


def replay_link(archive_id: str, crawl_id: str | None, url: str, captured_at: str) -> str:
    """A path on the ledger's web page that opens this capture in replay."""
    del crawl_id  # used once the crawl collection replay is there (module doc)
    return "/#/replay?" + urlencode({"archive": archive_id, "url": url, "captured": captured_at})
