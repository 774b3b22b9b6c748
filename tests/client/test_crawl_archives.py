"""``crawl_archives`` asks the ledger for one crawl's archives (several crawls run at once: a
time window would also take a neighbour's captures, as a new user found)."""

from __future__ import annotations

from ledger.client.follow import crawl_archives


class TwoCrawlsLedger:
    """Archives of two crawls captured in the same minutes; filters like ``GET /api/archives``."""

    rows = [{"id": f"a{i}", "crawl": crawl, "capturedAt": f"2026-12-01T04:00:0{i}.000Z"}
            for i, crawl in enumerate(["X", "Y", "X", "Y"])]

    def __init__(self) -> None:
        self.asked: list[str | None] = []

    def iter_archives(self, since=None, max_pages=200, crawl=None):
        self.asked.append(crawl)
        return iter([r for r in reversed(self.rows) if crawl is None or r["crawl"] == crawl])


def test_only_the_crawls_own_archives_are_listed():
    ledger = TwoCrawlsLedger()
    crawl = {"crawlId": "X", "startedAt": "2026-12-01T04:00:00.000Z", "finishedAt": "2026-12-01T04:00:09.000Z",
             "pagesCaptured": 2}
    found = crawl_archives(ledger, crawl, wait_s=0, sleep=lambda s: None)
    assert ledger.asked == ["X"]
    assert [r["id"] for r in found] == ["a0", "a2"]
