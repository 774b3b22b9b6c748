"""``waggle workflows …`` against the real ledger over HTTP (JWTs from the dev issuer, real
Postgres, the real OpenFGA server, a fake flow): create, list, show, edit, run, a skipped run
(exit 3), history, bad input with the ledger's reason, delete keeping the crawl."""

from __future__ import annotations

import json
import re
import uuid

from typer.testing import CliRunner

from ledger.cli import app
from tests.client.conftest import RealLedger

runner = CliRunner()


def waggle(*args: str):
    return runner.invoke(app, ["workflows", *args], catch_exceptions=False)


def test_workflow_commands_end_to_end(ledger_env: RealLedger):
    ledger_env.flow.hold = True  # its crawl keeps running: the second run is skipped
    name = f"site-a {uuid.uuid4().hex[:6]}"
    made = waggle("create", name, "--seed", "http://site-a.example/", "--depth", "0", "--no-scripts",
                  "--notes", "weekly check", "--options", '{"perHostDelayMs": 2500, "scope": "prefix"}', "--json")
    assert made.exit_code == 0, made.output
    wf = json.loads(made.output)
    assert wf["options"] == {"seeds": ["http://site-a.example/"], "maxDepth": 0, "scripts": [],
                             "perHostDelayMs": 2500, "scope": "prefix"}
    listed = waggle("list")
    assert listed.exit_code == 0 and name in listed.output and wf["workflowId"][:8] in listed.output
    edited = waggle("edit", name, "--depth", "1", "--json")
    assert edited.exit_code == 0, edited.output
    assert json.loads(edited.output)["options"]["maxDepth"] == 1
    assert json.loads(edited.output)["options"]["perHostDelayMs"] == 2500  # the other options kept
    shown = waggle("show", wf["workflowId"][:8])
    assert "weekly check" in shown.output and "edit it: yes" in shown.output

    ran = waggle("run", name)
    assert ran.exit_code == 0, ran.output
    crawl_id = re.search(r"crawl (\S+) started", ran.output).group(1)
    again = waggle("run", name)
    assert again.exit_code == 3 and "skipped" in again.output and crawl_id in again.output
    history = waggle("history", name, "--json")
    runs = json.loads(history.output)
    assert [r["outcome"] for r in runs] == ["skipped", "started"] and runs[1]["crawl"]["crawlId"] == crawl_id

    bad = waggle("edit", name, "--cron", "0 25 * * *")
    assert bad.exit_code == 1 and "'0 25 * * *' is not a valid cron expression" in bad.output
    assert "Traceback" not in bad.output
    zone = waggle("create", "other", "--seed", "http://site-a.example/", "--cron", "0 4 * * *", "--tz", "Moon/Base")
    assert zone.exit_code == 1 and "'Moon/Base' is not an IANA time zone" in zone.output
    none = waggle("create", "empty")
    assert none.exit_code == 1 and "exactly one of seeds or fromTargets" in none.output

    gone = waggle("delete", name)
    assert gone.exit_code == 0 and "1 crawl(s) and their archives are kept" in gone.output
    assert waggle("show", name).exit_code == 1


def _option_names(*path: str) -> set[str]:
    import typer.main

    from ledger.client.crawl_flags import FLAGS

    command = typer.main.get_command(app)
    for name in path:
        command = command.commands[name]
    return {opt for p in command.params if p.name in FLAGS for opt in [*p.opts, *p.secondary_opts]}


def test_workflows_take_every_crawl_flag_of_waggle_crawl():
    """One definition (ledger.client.crawl_flags): the options of `waggle crawl` are those of
    `workflows create` and `edit`, including --include, --exclude, --sign, --sitemap."""
    crawl = _option_names("crawl")
    assert {"--include", "--exclude", "--sign", "--no-sign", "--sitemap", "--sitemap-lastmod-after",
            "--formats", "--time-limit", "--max-bytes", "--extra-hops", "--group-hosts"} <= crawl
    assert _option_names("workflows", "create") == crawl == _option_names("workflows", "edit")


def test_create_with_crawl_flags_grant_revoke_and_history_at_80_columns(ledger_env: RealLedger):
    ledger_env.flow.hold = True
    name = f"flags {uuid.uuid4().hex[:6]}"
    made = waggle("create", name, "--seed", "http://site-a.example/", "--include", r"^http://site-b\.example/",
                  "--exclude", "/private/", "--exclude", r"\?print=", "--sitemap", "--sitemap-lastmod-after",
                  "2024-01-31", "--no-sign", "--scope", "prefix", "--max-pages-per-host", "5", "--time-limit", "600",
                  "--formats", "wacz,png", "--extra-hops", "1", "--no-scripts", "--json")
    assert made.exit_code == 0, made.output
    wf = json.loads(made.output)
    assert {k: wf["options"][k] for k in ("include", "exclude", "useSitemap", "sitemapLastmodAfter", "signing", "scope",
                                          "maxPagesPerHost", "timeLimitS", "formats", "extraHops")} == {
        "include": [r"^http://site-b\.example/"], "exclude": ["/private/", r"\?print="], "useSitemap": True,
        "sitemapLastmodAfter": "2024-01-31", "signing": False, "scope": "prefix", "maxPagesPerHost": 5,
        "timeLimitS": 600, "formats": ["png", "wacz"], "extraHops": 1}  # formats as the ledger orders them
    edited = json.loads(waggle("edit", name, "--sign", "--exclude", "/tmp/", "--json").output)["options"]
    assert (edited["signing"], edited["exclude"], edited["useSitemap"]) == (True, ["/tmp/"], True)  # the rest kept
    bad = waggle("create", "bad " + name, "--seed", "http://site-a.example/", "--exclude", "(")
    assert bad.exit_code == 1 and "exclude" in bad.output and "Traceback" not in bad.output

    given = waggle("grant", name, "frank", "runner")
    assert given.exit_code == 0 and "frank is now runner" in given.output, given.output
    changed = waggle("grant", name, "frank", "viewer")
    assert "frank is now viewer" in changed.output and "(was runner)" in changed.output
    listed = waggle("grants", name, "--json")
    assert [(g["user"], g["role"]) for g in json.loads(listed.output)] == [("alice", "editor"), ("frank", "viewer")]
    assert "frank viewer" in waggle("show", name).output
    wrong = waggle("grant", name, "frank", "owner")
    assert wrong.exit_code == 1 and "'owner' is not a workflow role" in wrong.output
    taken = waggle("revoke", name, "frank")
    assert taken.exit_code == 0 and "frank is no longer viewer" in taken.output
    again = waggle("revoke", name, "frank")
    assert again.exit_code == 1 and "has no grant" in again.output

    first = waggle("run", name)
    assert first.exit_code == 0, first.output
    assert waggle("run", name).exit_code == 3  # skipped: a long reason naming the running crawl
    shown = runner.invoke(app, ["workflows", "history", name], env={"COLUMNS": "80"}, catch_exceptions=False)
    lines = shown.output.splitlines()
    assert shown.exit_code == 0 and max(map(len, lines)) <= 80, shown.output
    rows = [ln for ln in lines if re.match(r"\d{4}-\d\d-\d\d \d\d:\d\d ", ln)]
    assert len(rows) == 2 and "skipped [1]" in rows[0] and "started" in rows[1], shown.output
    reason = " ".join(lines[lines.index(next(ln for ln in lines if ln.startswith("[1] "))):])
    assert "never runs twice at once" in reason  # the whole reason, folded, not squeezed into a column


def test_a_schedule_more_often_than_hourly_prints_the_ledgers_warning():
    """Decision 403: ``waggle workflows create|edit|show`` print the answer's ``schedule.warning``
    (the ledger's sentence, tests/ledger/test_workflows_api.py), and nothing for a calm schedule."""
    import io

    from rich.console import Console

    from ledger.client.workflows import _show

    def shown(schedule: dict) -> str:
        out = io.StringIO()
        wf = {"name": "often", "workflowId": "0" * 32, "organization": "acme", "createdBy": "alice",
              "options": {"seeds": ["http://site-a.example/"]}, "schedule": schedule}
        _show(Console(file=out, width=80), wf)
        return out.getvalue()

    warned = shown({"cron": "* * * * *", "timeZone": "UTC", "nextRuns": [],
                    "warning": "schedule '* * * * *' starts a crawl every 1 minute at its closest, more often than"
                               " once an hour: …"})
    assert "warning: schedule '* * * * *' starts a crawl every 1 minute" in " ".join(warned.split()), warned
    assert max(map(len, warned.splitlines())) <= 80
    assert "warning" not in shown({"cron": "0 4 * * *", "timeZone": "UTC", "nextRuns": []})


def test_run_follow_waits_for_the_crawl_and_ends_with_its_summary(ledger_env: RealLedger):
    """A trial's "run, wait, then changes" needed a polling loop: --follow follows as `waggle crawl` does."""
    name = f"follow {uuid.uuid4().hex[:6]}"
    made = waggle("create", name, "--seed", "http://site-a.example/", "--depth", "1", "--delay-ms", "0", "--no-scripts")
    assert made.exit_code == 0, made.output
    ran = waggle("run", name, "--follow")
    assert ran.exit_code == 0, ran.output
    crawl_id = re.search(r"crawl (\S+) started", ran.output).group(1)
    assert re.search(rf"crawl {crawl_id} succeeded: level 1 · captured 2", ran.output), ran.output
    shown = runner.invoke(app, ["crawls", crawl_id[:8]], catch_exceptions=False)
    assert shown.exit_code == 0 and re.search(rf"workflow\W+{re.escape(name)} \(", shown.output), shown.output
