"""``waggle changes CRAWL [--since OTHER] [--json]``: what changed between two crawls (GET
/api/crawls/{id}/changes, issue 27 item 3): the counts of pages new, changed, unchanged, gone
and not compared, then the changed, new, gone and not compared pages — each changed page with
the web page's links that replay both captures, each inside its own crawl's collection."""

from __future__ import annotations

from typing import Annotated, Optional

import typer
from rich.console import Console

from ledger.client import render

SHOWN = 50  # rows per list on a terminal; --json has every listed entry


def _link(base: str, side: dict | None) -> str:
    """The replay link of one side, or why there is none."""
    if side is None:
        return "–"
    if side.get("replay"):
        return base + side["replay"]
    missing = side.get("missing")
    return f"not replayable: {missing['why']} ({missing['reason']})" if missing else side.get("state", "–")


def report_lines(body: dict, base: str, unchanged: bool = False) -> list[str]:
    """The changes as plain lines (what the command prints): the counts, then each list (the
    unchanged pages only with ``unchanged``: on a recrawl they are most of the pages)."""
    c = body["counts"]
    since = body["since"]
    lines = [f"crawl {render.short_id(body['crawl']['crawlId'])} since {render.short_id(since['crawlId'])}"
             f" (started {render.short_time(since['startedAt'])}, {body['sinceChosen']}):",
             f"  {c['new']} new, {c['changed']} changed, {c['unchanged']} unchanged, {c['gone']} gone"
             + (f", {c['notCompared']} not compared" if c["notCompared"] else "")]
    if body.get("goneNote") and c["gone"]:  # an older ledger does not say
        lines.append(f"  note: {body['goneNote']}")
    for entry in body["changed"][:SHOWN]:
        lines += [f"changed  {entry['url']}",
                  f"    now:    {_link(base, entry['now'])}",
                  f"    before: {_link(base, entry['before'])}"]
    for entry in body["new"][:SHOWN]:
        lines.append(f"new      {entry['url']}")
    for entry in body["gone"][:SHOWN]:
        now = entry.get("now")
        lines.append(f"gone     {entry['url']}" + (f"  (now {now['state']}: {now.get('reason') or ''})" if now else ""))
    for entry in body["notCompared"][:SHOWN]:
        lines.append(f"not compared  {entry['url']}  ({entry['why']}: {entry['reason']})")
    kinds = ["changed", "new", "gone", "notCompared"]
    if unchanged:
        kinds.append("unchanged")
        lines += [f"unchanged  {entry['url']}" for entry in body["unchanged"][:SHOWN]]
    more = [f"{k}: {c[k] - SHOWN} more" for k in kinds if c[k] > SHOWN]
    if more:
        lines.append("not shown: " + ", ".join(more) + " (--json lists up to " + f"{body['listed']:,} of each)")
    return lines


def changes_command(
    crawl: Annotated[str, typer.Argument(metavar="CRAWL", help="The crawl (its id or a unique prefix, as `waggle crawls` shows).")],
    since: Annotated[Optional[str], typer.Option("--since", help="Compare with this crawl (id or prefix); default: the previous finished crawl of the same workflow, else of the same seeds.")] = None,
    list_unchanged: Annotated[bool, typer.Option("--unchanged", help="Also list the unchanged pages (counted always).")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="The ledger's JSON, one document on stdout (for scripts).")] = False,
) -> None:
    """What changed between two crawls: pages new, changed, unchanged and gone."""
    from ledger.client.api import ApiError
    from ledger.client.cli import _client, _console, _fail, _print_json, resolve_crawl_id
    from ledger.client.config import ClientConfigError

    console: Console = _console()
    try:
        with _client() as client:
            crawl_id = resolve_crawl_id(client, crawl)
            since_id = resolve_crawl_id(client, since) if since else None
            body = client.changes(crawl_id, since_id)
            base = client.config.api_url
    except ApiError as exc:
        why = exc.body.get("noEarlierCrawl") if exc.status == 409 and isinstance(exc.body, dict) else None
        # the ledger's own how-to names its query parameter; here the option is --since
        raise _fail(console, f"{why}: give --since CRAWL (a crawl id or prefix, as `waggle crawls` shows)"
                    if why else str(exc)) from None
    except ClientConfigError as exc:
        raise _fail(console, str(exc)) from None
    if as_json:
        _print_json(body)
        return
    for line in report_lines(body, base, unchanged=list_unchanged):
        console.print(line, soft_wrap=True, markup=False)


def register(app: typer.Typer) -> None:
    app.command("changes")(changes_command)
