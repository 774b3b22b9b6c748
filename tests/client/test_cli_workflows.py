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
