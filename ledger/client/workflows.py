"""``waggle workflows list|create|show|edit|run|delete|history|grants|grant|revoke``: saved crawl
workflows (decision 201) and who else may view, run or edit one (decision 351).

A workflow is named by its id, a unique start of its id, or its exact name. Its crawl options
are the ``POST /api/crawls`` body: ``--options JSON`` gives them whole, and the crawl flags of
``waggle crawl`` (``ledger.client.crawl_flags``: the same definitions) set theirs on top.
Exit codes: 0 done, 1 an error (the ledger's reason printed), 3 a run skipped (one of the
workflow's crawls still runs).
"""

from __future__ import annotations

import json
from typing import Annotated, Optional

import typer
from rich.console import Group
from rich.table import Table
from rich.text import Text

from ledger.client import render
from ledger.client.api import ApiError, LedgerClient
from ledger.client.cli import AsJson, _client, _console, _fail, _print_json
from ledger.client.config import ClientConfigError
from ledger.client.crawl_flags import CrawlFlags, crawl_flags

EXIT_SKIPPED = 3

app = typer.Typer(name="workflows", help="Saved crawl workflows: run now or on a schedule, with their history.",
                  no_args_is_help=True)

Seeds = Annotated[Optional[list[str]], typer.Option("--seed", help="A seed URL (repeatable).")]
FromTargets = Annotated[bool, typer.Option("--from-targets", help="Crawl the organization's saved targets (read at each run) instead of seeds.")]
Options = Annotated[Optional[str], typer.Option("--options", help='The crawl options as POST /api/crawls JSON, e.g. \'{"maxDepth": 1, "scope": "prefix"}\'; the flags win over it.')]
Cron = Annotated[Optional[str], typer.Option("--cron", help="Schedule: a 5-field cron expression, e.g. '0 4 * * *'.")]
Tz = Annotated[Optional[str], typer.Option("--tz", help="The schedule's IANA time zone (default UTC), e.g. Europe/Paris.")]
Notes = Annotated[Optional[str], typer.Option("--notes", help="Free text kept with the workflow.")]


def _options(given: str | None, seeds: list[str] | None, from_targets: bool, crawl: CrawlFlags,
             base: dict | None = None) -> dict | None:
    """``--options`` (else ``base``, the saved options) with the flags set on top; None when
    neither ``--options`` nor a flag was given."""
    if seeds and from_targets:
        raise typer.BadParameter("--seed and --from-targets exclude each other")
    if why := crawl.conflict():
        raise typer.BadParameter(why)
    if given is not None:
        try:
            options = json.loads(given)
        except ValueError as exc:
            raise typer.BadParameter(f"--options is not JSON ({exc})") from None
        if not isinstance(options, dict):
            raise typer.BadParameter("--options must be a JSON object (the POST /api/crawls body)")
    else:
        options = dict(base or {})
    before = dict(options)
    flags = crawl.body(seeds or [])
    if seeds:
        options.pop("fromTargets", None)
    else:
        flags.pop("seeds")
    if from_targets:
        options.pop("seeds", None)
        options["fromTargets"] = {}
    options.update(flags)
    return None if given is None and options == before else options


def _resolve(client: LedgerClient, given: str) -> dict:
    """The workflow named ``given`` (id, unique id start, or exact name) from the list."""
    workflows = client._call("GET", "/api/workflows").json()["workflows"]
    exact = [w for w in workflows if w["workflowId"] == given or w["name"] == given]
    found = exact or [w for w in workflows if w["workflowId"].startswith(given.lower())]
    if not found:
        raise ApiError(404, f"no workflow {given!r} that you may see (`waggle workflows list`)")
    if len(found) > 1:
        raise ApiError(400, f"{given!r} names {len(found)} workflows: give more of the id")
    return found[0]


def _schedule_text(wf: dict) -> str:
    s = wf.get("schedule")
    return f"{s['cron']} ({s['timeZone']})" if s else "—"


def _show(console, wf: dict) -> None:
    console.print(f"[bold]{wf['name']}[/bold]  {wf['workflowId']}  ({wf['organization']}, by {wf['createdBy']})")
    if wf.get("notes"):
        console.print(wf["notes"], soft_wrap=True)
    console.print(f"schedule: {_schedule_text(wf)}")
    if warning := (wf.get("schedule") or {}).get("warning"):  # saved, but too often (decision 403)
        console.print(Text.assemble(("warning: ", "yellow"), warning))  # no markup read; folded at the width
    for t in (wf.get("schedule") or {}).get("nextRuns") or []:
        console.print(f"  next: {t}")
    console.print("options: " + json.dumps(wf["options"], ensure_ascii=False), soft_wrap=True)
    if wf.get("grants"):
        console.print("grants: " + ", ".join(f"{g['user']} {g['role']}" for g in wf["grants"]), soft_wrap=True)
    if "canRun" in wf:
        console.print(f"you may run it: {'yes' if wf['canRun'] else 'no'}; edit it: {'yes' if wf['canEdit'] else 'no'}")


def _guard(console):
    """Decorator-free error funnel: run ``fn`` and turn client errors into exit 1."""
    def run(fn):
        try:
            return fn()
        except (ApiError, ClientConfigError) as exc:
            raise _fail(console, str(exc)) from None
    return run


@app.command("list")
def list_command(as_json: AsJson = False) -> None:
    """The workflows you may see, with their schedule and last crawl."""
    console = _console()

    def go():
        with _client() as client:
            workflows = client._call("GET", "/api/workflows").json()["workflows"]
        if as_json:
            return _print_json(workflows)
        table = Table("id", "name", "schedule", "last crawl", "state", title="workflows")
        for w in workflows:
            last = w.get("lastCrawl") or {}
            table.add_row(render.short_id(w["workflowId"]), w["name"], _schedule_text(w),
                          render.short_id(last.get("crawlId")) if last else "—", last.get("state") or "—")
        console.print(table)
    _guard(console)(go)


@app.command("create")
@crawl_flags
def create_command(
    name: Annotated[str, typer.Argument(help="A name, unique in the organization.")],
    seed: Seeds = None, from_targets: FromTargets = False, options: Options = None, crawl: CrawlFlags = None,
    cron: Cron = None, tz: Tz = None, notes: Notes = None,
    org: Annotated[Optional[str], typer.Option("--org", help="The organization (default: your first).")] = None,
    as_json: AsJson = False,
) -> None:
    """Save a workflow: seeds (or the saved targets), crawl options, an optional schedule."""
    console = _console()
    if tz and not cron:
        raise _fail(console, "--tz goes with --cron", 2)
    body: dict = {"name": name, "options": _options(options, seed, from_targets, crawl) or {}}
    if notes is not None:
        body["notes"] = notes
    if cron:
        body["schedule"] = {"cron": cron, **({"timeZone": tz} if tz else {})}
    if org:
        body["organization"] = org

    def go():
        with _client() as client:
            wf = client._call("POST", "/api/workflows", json=body).json()
        _print_json(wf) if as_json else _show(console, wf)
    _guard(console)(go)


@app.command("show")
def show_command(workflow: Annotated[str, typer.Argument(help="Id, start of the id, or name.")],
                 as_json: AsJson = False) -> None:
    """One workflow: options, schedule and its next runs, what you may do with it."""
    console = _console()

    def go():
        with _client() as client:
            wf = client._call("GET", f"/api/workflows/{_resolve(client, workflow)['workflowId']}").json()
        _print_json(wf) if as_json else _show(console, wf)
    _guard(console)(go)


@app.command("edit")
@crawl_flags
def edit_command(
    workflow: Annotated[str, typer.Argument(help="Id, start of the id, or name.")],
    name: Annotated[Optional[str], typer.Option("--name", help="A new name.")] = None,
    seed: Seeds = None, from_targets: FromTargets = False, options: Options = None, crawl: CrawlFlags = None,
    cron: Cron = None, tz: Tz = None, notes: Notes = None,
    no_schedule: Annotated[bool, typer.Option("--no-schedule", help="Remove the schedule.")] = False,
    as_json: AsJson = False,
) -> None:
    """Change a workflow: flags change those options only (--options replaces them all)."""
    console = _console()
    if no_schedule and cron:
        raise _fail(console, "--cron and --no-schedule exclude each other", 2)

    def go():
        with _client() as client:
            current = client._call("GET", f"/api/workflows/{_resolve(client, workflow)['workflowId']}").json()
            body: dict = {}
            changed = _options(options, seed, from_targets, crawl, base=current["options"])
            if changed is not None:
                body["options"] = changed
            if name is not None:
                body["name"] = name
            if notes is not None:
                body["notes"] = notes
            if no_schedule:
                body["schedule"] = None
            elif cron or tz:
                old = current.get("schedule") or {}
                body["schedule"] = {"cron": cron or old.get("cron") or "", "timeZone": tz or old.get("timeZone") or "UTC"}
            if not body:
                raise ApiError(2, "nothing to change: give an option")
            wf = client._call("PATCH", f"/api/workflows/{current['workflowId']}", json=body).json()
        _print_json(wf) if as_json else _show(console, wf)
    _guard(console)(go)


@app.command("run")
def run_command(workflow: Annotated[str, typer.Argument(help="Id, start of the id, or name.")],
                follow_it: Annotated[bool, typer.Option("--follow", help="Follow the crawl live until it ends, as `waggle crawl` does (its exit code).")] = False,
                as_json: AsJson = False) -> None:
    """Run the workflow now (a crawl with its saved options); skipped (exit 3) while one of its crawls runs."""
    from ledger.client.cli import follow_to_end
    from ledger.client.follow import POLL_INTERVAL_S

    console = _console()
    try:
        with _client() as client:
            wid = _resolve(client, workflow)["workflowId"]
            out = client._call("POST", f"/api/workflows/{wid}/run", json={"trigger": "manual"}).json()
            if follow_it and not as_json:  # a trial's "run, wait, then changes" needed a polling loop
                console.print(f"crawl {out['crawlId']} started")
                code = follow_to_end(client, out["crawlId"], console, None, 30.0, POLL_INTERVAL_S)
                raise typer.Exit(code)
    except ApiError as exc:
        if exc.status == 409 and isinstance(exc.body, dict) and exc.body.get("runningCrawl"):
            reason = str(exc.body["error"]).removeprefix("skipped: ")  # the ledger's reason may say it already
            console.print(f"[yellow]skipped:[/yellow] {reason}", soft_wrap=True)
            raise typer.Exit(EXIT_SKIPPED) from None
        raise _fail(console, str(exc)) from None
    except ClientConfigError as exc:
        raise _fail(console, str(exc)) from None
    if as_json:
        return _print_json(out)
    console.print(f"crawl {out['crawlId']} started (follow it: waggle crawls {out['crawlId'][:8]} --follow)")


@app.command("delete")
def delete_command(workflow: Annotated[str, typer.Argument(help="Id, start of the id, or name.")]) -> None:
    """Delete a workflow and its schedule; its crawls and their archives are kept."""
    console = _console()

    def go():
        with _client() as client:
            wid = _resolve(client, workflow)["workflowId"]
            out = client._call("DELETE", f"/api/workflows/{wid}").json()
        console.print(f"workflow {wid} deleted; its {out['crawlsKept']} crawl(s) and their archives are kept")
    _guard(console)(go)


@app.command("history")
def history_command(workflow: Annotated[str, typer.Argument(help="Id, start of the id, or name.")],
                    limit: Annotated[int, typer.Option("--limit", min=1, max=500)] = 50,
                    as_json: AsJson = False) -> None:
    """The workflow's runs, newest first: each crawl started, and each run skipped or refused with why."""
    console = _console()

    def go():
        with _client() as client:
            wid = _resolve(client, workflow)["workflowId"]
            runs = client._call("GET", f"/api/workflows/{wid}/history", params={"limit": limit}).json()["runs"]
        if as_json:
            return _print_json(runs)
        console.print(history_view(runs))
    _guard(console)(go)


def history_view(runs: list[dict]) -> Group:
    """The runs as one line each at 80 columns (decision 265), the reasons below the table,
    numbered, whole and folding: a reason is prose that names a crawl, never cut."""
    table = render._one_line_table("runs")
    for col in ("at", "trigger", "by", "outcome", "crawl", "state"):
        table.add_column(col, no_wrap=True)
    table.add_column("pages", justify="right", no_wrap=True)
    reasons = []
    for r in runs:
        c = r.get("crawl") or {}
        outcome = r["outcome"]
        if r.get("reason"):
            reasons.append(r["reason"])
            outcome += f" [{len(reasons)}]"
        table.add_row(render.short_time(r["at"])[:16], r["trigger"], render.Cut(r["requestedBy"], minimum=8, end=True),
                      outcome, render.short_id(c.get("crawlId")) if c else "—", c.get("state") or "—",
                      str(c.get("pagesCaptured")) if c and c.get("pagesCaptured") is not None else "—")
    notes = [Text(f"[{i}] {why}", overflow="fold") for i, why in enumerate(reasons, 1)]
    return Group(table, *notes)


Role = Annotated[str, typer.Argument(help="viewer (may view it), runner (view and run) or editor (also edit and grant).")]
User = Annotated[str, typer.Argument(help="The user's subject, as the identity provider names the user.")]


def _grants_table(grants: list[dict]) -> Table:
    table = render._one_line_table("grants")
    for col in ("user", "role", "by", "since"):
        table.add_column(col, no_wrap=True)
    for g in grants:
        table.add_row(render.Cut(g["user"], minimum=8, end=True), g["role"], render.Cut(g["grantedBy"], minimum=8, end=True),
                      render.short_time(g["grantedAt"])[:16])
    return table


@app.command("grants")
def grants_command(workflow: Annotated[str, typer.Argument(help="Id, start of the id, or name.")],
                   as_json: AsJson = False) -> None:
    """Who was granted what on the workflow (its organization's members view it, submitters run it, admins edit it)."""
    console = _console()

    def go():
        with _client() as client:
            wid = _resolve(client, workflow)["workflowId"]
            out = client._call("GET", f"/api/workflows/{wid}/grants").json()
        _print_json(out["grants"]) if as_json else console.print(_grants_table(out["grants"]))
    _guard(console)(go)


@app.command("grant")
def grant_command(workflow: Annotated[str, typer.Argument(help="Id, start of the id, or name.")], user: User,
                  role: Role, as_json: AsJson = False) -> None:
    """Give a user a role on the workflow (replacing the role it had); an editor or the organization's admin may."""
    console = _console()

    def go():
        with _client() as client:
            wid = _resolve(client, workflow)["workflowId"]
            out = client._call("PUT", f"/api/workflows/{wid}/grants", json={"user": user, "role": role}).json()
        if as_json:
            return _print_json(out)
        was = f" (was {out['previousRole']})" if out.get("previousRole") else ""
        console.print(f"{out['grant']['user']} is now {out['grant']['role']} of workflow {wid[:8]}{was}", soft_wrap=True)
    _guard(console)(go)


@app.command("revoke")
def revoke_command(workflow: Annotated[str, typer.Argument(help="Id, start of the id, or name.")], user: User,
                   as_json: AsJson = False) -> None:
    """Take back a user's grant on the workflow."""
    console = _console()

    def go():
        from urllib.parse import quote

        with _client() as client:
            wid = _resolve(client, workflow)["workflowId"]
            out = client._call("DELETE", f"/api/workflows/{wid}/grants/{quote(user, safe='')}").json()
        if as_json:
            return _print_json(out)
        console.print(f"{out['revoked']['user']} is no longer {out['revoked']['role']} of workflow {wid[:8]}", soft_wrap=True)
    _guard(console)(go)


def register(root: typer.Typer) -> None:
    root.add_typer(app, name="workflows")
