"""How the CLI shows blocked hosts (decision 231): hosts paused for the rest of a crawl after
answering with challenge or block pages, and how many of their pages were not captured."""

from __future__ import annotations

from rich.table import Table


def blocked_hosts_table(crawl: dict) -> Table | None:
    """``blocked hosts`` (host, level, pages, reason) from the crawl view's ``blockedHosts``; None
    when there are none (or an older ledger does not say)."""
    hosts = [b for b in crawl.get("blockedHosts") or [] if isinstance(b, dict)]
    if not hosts:
        return None
    table = Table(title="blocked hosts (paused for the rest of the crawl)", title_justify="left")
    table.add_column("host", overflow="fold")
    table.add_column("level", justify="right")
    table.add_column("pages", justify="right")
    table.add_column("reason", overflow="fold")
    for b in hosts:
        table.add_row(str(b.get("host", "")), str(b.get("depth", "–")), str(b.get("pages", "–")),
                      str(b.get("reason") or "–"))
    return table


def blocked_text(crawl: dict) -> str:
    """`` · blocked N`` for the status line when pages are blocked, else empty."""
    n = crawl.get("pagesBlocked")
    return f" · blocked {n}" if isinstance(n, int) and n > 0 else ""
