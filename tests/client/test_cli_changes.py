"""``waggle changes`` against the real ledger over HTTP (issue 27 item 3, decision 211): the same
site crawled twice by the fake flow; the command resolves short ids, defaults to the previous
crawl of the same seeds, and says why pages could not be compared (the fake flow's WACZ index
names no payload digest) — never a traceback; a crawl with no earlier one is a clear error."""

from __future__ import annotations

import json
import re
import uuid

from typer.testing import CliRunner

from ledger.cli import app
from tests.client.conftest import RealLedger

runner = CliRunner()


def crawl(seed: str) -> str:
    result = runner.invoke(app, ["crawl", seed, "--depth", "1", "--delay-ms", "0", "--no-scripts",
                                 "--poll-interval", "0.05", "--archive-wait", "20"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return re.search(r"crawl (\S+) started", result.output).group(1)


def test_changes_of_a_recrawl_from_the_command_line(ledger_env: RealLedger):
    seed = f"http://site-a.example/changes-{uuid.uuid4().hex[:8]}/"  # the ledger is shared: no other crawl of it
    first = crawl(seed)
    none = runner.invoke(app, ["changes", first[:8]], catch_exceptions=False)
    assert none.exit_code == 1 and "Traceback" not in none.output
    assert "no earlier finished crawl" in none.output and "give --since CRAWL" in none.output
    assert "since=" not in none.output  # the API's parameter, not the command's option
    second = crawl(seed)
    shown = runner.invoke(app, ["changes", second[:8]], catch_exceptions=False)
    assert shown.exit_code == 0, shown.output
    assert f"since {first[:8]}" in shown.output and "same-seeds" in shown.output
    # captured in both, but the fake flow's CDXJ lines carry no digest: not compared, and why
    assert "0 new, 0 changed, 0 unchanged, 0 gone, 2 not compared" in shown.output, shown.output
    assert f"not compared  {seed}  (digest-unknown:" in shown.output
    as_json = runner.invoke(app, ["changes", second, "--since", first[:8], "--json"], catch_exceptions=False)
    body = json.loads(as_json.output)
    assert body["sinceChosen"] == "given" and body["counts"]["notCompared"] == 2
    bad = runner.invoke(app, ["changes", second, "--since", "zz"], catch_exceptions=False)
    assert bad.exit_code == 1 and "Traceback" not in bad.output
