"""Where a search hit opens: the one place that builds the link (switch it here).

``#/replay?archive=…&crawl=…``: the web page opens the page inside its crawl's collection (the
whole crawl as one site, at this page; ledger/web/static/search.js), and the archive alone —
its signed URL, then ReplayWeb.page on the replay origin — when the hit has no crawl or the
caller may not open the crawl.
"""

from __future__ import annotations

from urllib.parse import urlencode


def replay_link(archive_id: str, crawl_id: str | None, url: str, captured_at: str) -> str:
    """A path on the ledger's web page that opens this capture in replay."""
    query = {"archive": archive_id, "url": url, "captured": captured_at}
    return "/#/replay?" + urlencode({**query, "crawl": crawl_id} if crawl_id else query)
