"""``waggle search "query" [--crawl ID] [--host H] [--from D] [--to D] [--page N] [--json]``:
find archived pages by their text (GET /api/search; web-search syntax: words, "phrases",
-excluded, OR). Only archives you may view are found."""

from __future__ import annotations

from typing import Annotated, Optional

import typer
from rich.console import Console, Group
from rich.table import Table
from rich.text import Text

from ledger.client import render


def hits_table(body: dict) -> Table:
    """Rank, title + URL + snippet (hits in bold), capture time, archive id."""
    table = Table(title=f"page {body.get('page', 1)}: {len(body.get('hits', []))} hit(s)", show_lines=True)
    table.add_column("#", justify="right")
    table.add_column("page")
    table.add_column("captured")
    table.add_column("archive")
    first = (body.get("page", 1) - 1) * body.get("size", 10)
    for n, hit in enumerate(body.get("hits", []), first + 1):
        snippet = hit.get("snippetHtml") or ""
        # the URL on one line, cut in the middle to the column (render.Cut); title and snippet fold
        cell = Group(Text(hit.get("title") or "(no title)", style="bold"), render.Cut(hit.get("url", ""), style="cyan"),
                     *([_marked(snippet)] if snippet else []))
        table.add_row(str(n), cell, render.short_time(hit.get("capturedAt")), render.short_id(hit.get("archiveId")))
    return table


def _marked(snippet_html: str) -> Text:
    """The ledger's escaped snippet with ``<mark>`` as bold text."""
    import html

    out = Text()
    for i, part in enumerate(snippet_html.replace("</mark>", "<mark>").split("<mark>")):
        out.append(html.unescape(part), style="bold yellow" if i % 2 else None)
    return out


def search_command(
    query: Annotated[str, typer.Argument(help='What to find: words, "a phrase", -excluded, a OR b (a query may start with -).')],
    crawl: Annotated[Optional[str], typer.Option("--crawl", help="Only pages of this crawl (its id or a unique prefix).")] = None,
    host: Annotated[Optional[str], typer.Option("--host", help="Only pages of this host, e.g. docs.python.org, or of one port of it: 127.0.0.1:8631.")] = None,
    captured_from: Annotated[Optional[str], typer.Option("--from", help="Captured on or after (2026-09-24 or a date-time).")] = None,
    captured_to: Annotated[Optional[str], typer.Option("--to", help="Captured on or before (a date is the whole day).")] = None,
    page: Annotated[int, typer.Option("--page", min=1, max=100, help="Page of hits, from 1.")] = 1,
    size: Annotated[int, typer.Option("--size", min=1, max=50, help="Hits per page.")] = 10,
    as_json: Annotated[bool, typer.Option("--json", help="The ledger's JSON, one document on stdout (for scripts).")] = False,
) -> None:
    """Search the text of the pages you may view, best match first."""
    from ledger.client.api import ApiError
    from ledger.client.cli import _client, _console, _fail, _print_json, resolve_crawl_id
    from ledger.client.config import ClientConfigError

    console: Console = _console()
    try:
        with _client() as client:
            crawl_id = resolve_crawl_id(client, crawl) if crawl else None
            body = client.search(query, crawl=crawl_id, host=host, captured_from=captured_from,
                                 captured_to=captured_to, page=page, size=size)
    except (ApiError, ClientConfigError) as exc:
        raise _fail(console, str(exc)) from None
    if as_json:
        _print_json(body)
        return
    if not body.get("hits"):
        console.print("no pages found" + (" on this page" if page > 1 else "") + ".")
    else:
        console.print(hits_table(body))
    if body.get("more"):
        console.print(f"more: waggle search {_quote(query)} --page {page + 1}" + (f" --crawl {crawl_id}" if crawl_id else ""))
    if body.get("rankedNewest"):
        console.print("[yellow]many pages match: the newest 1,000 of those you may see were ranked; add --from/--to, --crawl or"
                      " --host to reach older ones[/yellow]")
    if body.get("incomplete"):
        console.print(f"[yellow]only the best 1,000 matches were checked for your access; narrow the"
                      " query (--crawl, --host, --from) to see further[/yellow]")


def _quote(text: str) -> str:
    import shlex

    return shlex.quote(text)


def register(app: typer.Typer) -> None:
    """Add ``search`` to the root ``waggle`` app."""
    # a query may start with "-" (``waggle search -async``): an option waggle does not know is
    # taken as the query rather than refused as "No such option"
    app.command("search", context_settings={"ignore_unknown_options": True})(search_command)
