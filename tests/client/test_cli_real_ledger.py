"""The client against the real ledger over HTTP: JWTs from the dev issuer, real Postgres, the
real OpenFGA server, the S3 stand-in, and a fake flow behind the webhook that reports levels back
the way f/waggle/crawl_level does (captures written to S3 as manifest + WACZ + links)."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import time

import httpx
from typer.testing import CliRunner

from ledger.cli import app
from tests.client.conftest import RealLedger
from tests.client.test_cli import Proc

runner = CliRunner()


def test_crawl_to_the_end_with_archives_and_downloads(ledger_env: RealLedger, tmp_path):
    dest = tmp_path / "wacz"
    result = runner.invoke(app, ["crawl", "http://site-a.example/", "--depth", "1", "--delay-ms", "0", "--no-scripts",
                                 "--poll-interval", "0.05", "--archive-wait", "20", "--download", str(dest), "--urls"],
                           catch_exceptions=False)
    out = result.output
    assert result.exit_code == 0, out
    crawl_id = re.search(r"crawl (\S+) started", out).group(1)
    # progress went through both levels, then the summary of the real ledger
    assert re.search(rf"crawl {crawl_id} running: level 0", out), out
    assert re.search(rf"crawl {crawl_id} succeeded: level 1 · captured 2", out), out
    assert "max_depth" in out
    assert "http://site-a.example/broken" in out and "http: 500 Internal Server Error" in out
    assert "archives (2)" in out
    assert len(re.findall(r"X-Amz-Signature=", out)) == 2
    files = list(dest.glob("*.wacz"))
    saved = {p.name.split("-", 1)[1]: p.read_bytes() for p in files}  # <archive id as listed>-<key name>
    assert saved == {k.rsplit("/", 1)[-1]: v for k, v in ledger_env.flow.wacz.items() if crawl_id in k}
    assert len(saved) == 2
    archives = httpx.get(f"{ledger_env.url}/api/archives", params={"crawl": crawl_id},
                         headers={"Authorization": f"Bearer {ledger_env.env['WAGGLE_TOKEN']}"}).json()["archives"]
    assert {p.name for p in files} == {f"{a['id'][:8]}-{a['objectKey'].rsplit('/', 1)[-1]}" for a in archives}

    listing = runner.invoke(app, ["crawls"], catch_exceptions=False)
    assert listing.exit_code == 0 and crawl_id[:8] in listing.output
    assert crawl_id in runner.invoke(app, ["crawls", "--wide"], catch_exceptions=False).output


def test_crawls_run_side_by_side_up_to_the_org_limit_then_fail_one(ledger_env: RealLedger):
    ledger_env.flow.hold = True  # levels never report: every crawl stays running
    limit = ledger_env.settings.max_running_crawls_per_org
    started = []
    for i in range(limit):
        run = runner.invoke(app, ["crawl", f"http://site-{i}.example/", "--no-scripts", "--detach"],
                            catch_exceptions=False)
        assert run.exit_code == 0, run.output  # a running crawl no longer blocks another
        started.append(re.search(r"crawl (\S+) started", run.output).group(1))
    over = runner.invoke(app, ["crawl", "http://site-x.example/", "--no-scripts", "--detach"], catch_exceptions=False)
    assert over.exit_code == 1
    assert f"already has {limit} running crawls" in over.output and "Traceback" not in over.output
    failed = runner.invoke(app, ["crawls", started[0], "--fail", "--reason", "not today"], catch_exceptions=False)
    assert failed.exit_code == 0 and "failed." in failed.output
    shown = runner.invoke(app, ["crawls", started[0], "--archive-wait", "0"], catch_exceptions=False)
    assert shown.exit_code == 1 and "not today" in shown.output
    again = runner.invoke(app, ["crawl", "http://site-y.example/", "--no-scripts", "--detach"], catch_exceptions=False)
    assert again.exit_code == 0, again.output  # the failed crawl freed its place


def test_sigint_without_terminal_fails_the_real_crawl(ledger_env: RealLedger):
    ledger_env.flow.hold = True
    proc = Proc(ledger_env.env, "crawl", "http://site-a.example/", "--no-scripts", "--poll-interval", "0.05",
                stdin=subprocess.DEVNULL)
    try:
        proc.wait_for(" running: level 0")
        proc.proc.send_signal(signal.SIGINT)
        code = proc.finish()
    finally:
        proc.kill()
    crawl_id = re.search(r"crawl (\S+) started", proc.text).group(1)
    assert code == 130, proc.text
    view = httpx.get(f"{ledger_env.url}/api/crawls/{crawl_id}",
                     headers={"Authorization": f"Bearer {ledger_env.env['WAGGLE_TOKEN']}"}).json()
    assert view["state"] == "failed" and view["stopReason"] == "failed"
    assert view["error"] == "stopped by the user (Ctrl-C in `waggle crawl`)"


def test_outsider_token_is_refused_with_a_clear_message(ledger_env: RealLedger, dev_issuer, monkeypatch):
    monkeypatch.setenv("WAGGLE_TOKEN", dev_issuer.mint("mallory", ["evil"]))
    result = runner.invoke(app, ["crawl", "http://site-a.example/", "--no-scripts"], catch_exceptions=False)
    assert result.exit_code == 1
    # a denial is a 404 (never a stack trace); the client names who and the grant
    assert "mallory may not start crawls for evil" in result.output
    assert "waggle grant submitter mallory evil" in result.output
    assert "Traceback" not in result.output
    # and its archive listing is empty
    listing = runner.invoke(app, ["archives"], catch_exceptions=False)
    assert listing.exit_code == 0 and "archives (0)" in listing.output


def test_stack_json_with_the_real_dev_issuer(real_ledger: RealLedger, dev_issuer, monkeypatch, tmp_path):
    """No WAGGLE_API_URL/WAGGLE_TOKEN: the URL comes from stack.json, the token from its issuer."""
    import json

    for key in ("WAGGLE_API_URL", "WAGGLE_TOKEN"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("WAGGLE_STATE_DIR", str(tmp_path))
    (tmp_path / "stack.json").write_text(json.dumps({
        "services": {"ledger": real_ledger.url, "issuer": dev_issuer.url}, "subject": "alice", "organization": "acme"}))
    result = runner.invoke(app, ["crawls"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert "crawls" in result.output and "refused" not in result.output


def test_every_page_listed_table_at_80_columns_and_json(ledger_env: RealLedger, monkeypatch):
    result = runner.invoke(app, ["crawl", "http://site-a.example/", "--depth", "1", "--delay-ms", "0", "--no-scripts",
                                 "--poll-interval", "0.05", "--archive-wait", "0"], catch_exceptions=False)
    crawl_id = re.search(r"crawl (\S+) started", result.output).group(1)
    monkeypatch.setenv("COLUMNS", "80")
    table = runner.invoke(app, ["crawls", crawl_id, "--pages"], catch_exceptions=False)
    assert table.exit_code == 0, table.output
    lines = table.output.splitlines()
    assert max(len(line) for line in lines) <= 80, table.output
    assert f"pages of crawl {crawl_id}: 3" in table.output
    assert "http://site-a.example/broken" in table.output and "transient" in table.output
    assert "http: 500 Internal Server Error" in table.output
    assert len(re.findall(r"archive [0-9a-f-]{36}", table.output)) == 2  # the captured pages' archives
    as_json = runner.invoke(app, ["crawls", crawl_id, "--pages", "--state", "failed", "--json"],
                            catch_exceptions=False)
    rows = json.loads(as_json.output)
    assert [(r["url"], r["state"], r["failureClass"], r["reason"]) for r in rows] == [
        ("http://site-a.example/broken", "failed", "transient", "http: 500 Internal Server Error")]
    shown = runner.invoke(app, ["crawls", crawl_id, "--archive-wait", "0"], catch_exceptions=False)
    assert "transient" in shown.output  # the summary's failures carry their class


def test_pages_options_need_an_id_and_each_other(ledger_env: RealLedger):
    no_id = runner.invoke(app, ["crawls", "--pages"], catch_exceptions=False)
    alone = runner.invoke(app, ["crawls", "0193b6a1-3c1d-7a2e-9f00-1234567890ab", "--state", "failed"],
                          catch_exceptions=False)
    assert no_id.exit_code == 1 and "need a crawl id" in no_id.output
    assert alone.exit_code == 1 and "--state goes with --pages" in alone.output
    # --json without --pages prints the crawl itself (issue 15): an unknown one is named as such
    unknown = runner.invoke(app, ["crawls", "0193b6a1-3c1d-7a2e-9f00-1234567890ab", "--json"], catch_exceptions=False)
    assert unknown.exit_code == 1 and "not found" in unknown.output


def test_unusable_seeds_and_settings_are_refused_with_the_reason(ledger_env: RealLedger):
    before = httpx.get(f"{ledger_env.url}/api/crawls",
                       headers={"Authorization": f"Bearer {ledger_env.env['WAGGLE_TOKEN']}"}).json()["crawls"]
    long_seed = "http://site-a.example/" + "p" * 2100
    run = runner.invoke(app, ["crawl", long_seed, "--no-scripts", "--detach"], catch_exceptions=False)
    assert run.exit_code == 1, run.output
    assert "longer than 2,048 characters are refused" in run.output and "Traceback" not in run.output
    # a setting that is not a number never reaches the ledger: typer names the option
    run = runner.invoke(app, ["crawl", "http://site-a.example/", "--delay-ms", "500ms", "--detach"])
    assert run.exit_code == 2 and "Invalid value for '--delay-ms'" in run.output and "integer" in run.output
    # an empty format entry is named, never read as the formats around it
    run = runner.invoke(app, ["crawl", "http://site-a.example/", "--formats", "wacz,,png", "--detach"],
                        catch_exceptions=False)
    assert run.exit_code == 1 and "formats: empty format at position 1" in run.output, run.output
    after = httpx.get(f"{ledger_env.url}/api/crawls",
                      headers={"Authorization": f"Bearer {ledger_env.env['WAGGLE_TOKEN']}"}).json()["crawls"]
    assert len(after) == len(before)  # nothing half-created


def test_short_crawl_id_still_resolves_after_many_newer_crawls(ledger_env: RealLedger):
    """The trial's bug: a short id stopped resolving once 20 newer crawls existed (the client
    matched only the recent list); the ledger now looks the prefix up (``?idPrefix=``)."""
    ledger_env.flow.hold = True
    headers = {"Authorization": f"Bearer {ledger_env.env['WAGGLE_TOKEN']}"}

    def start_and_fail(seed: str) -> str:
        run = runner.invoke(app, ["crawl", seed, "--no-scripts", "--detach"], catch_exceptions=False)
        assert run.exit_code == 0, run.output
        crawl_id = re.search(r"crawl (\S+) started", run.output).group(1)
        httpx.post(f"{ledger_env.url}/api/crawls/{crawl_id}/failed", json={"reason": "made room"}, headers=headers)
        return crawl_id

    old = start_and_fail("http://site-old.example/")
    for i in range(21):
        start_and_fail(f"http://site-new-{i}.example/")
    recent = runner.invoke(app, ["crawls"], catch_exceptions=False).output
    assert old[:8] not in recent  # no longer among the recent ones
    shown = runner.invoke(app, ["crawls", old[:8], "--json"], catch_exceptions=False)
    assert shown.exit_code == 0, shown.output
    assert json.loads(shown.output)["crawlId"] == old
    archives = runner.invoke(app, ["archives", "--crawl", old[:8]], catch_exceptions=False)
    assert archives.exit_code == 0 and "archives (0)" in archives.output, archives.output
    short = runner.invoke(app, ["crawls", old[:3]], catch_exceptions=False)
    assert short.exit_code == 1 and "at least 4 characters" in short.output

    # the route: only matching visible crawls; a malformed prefix is a 400 with the reason
    r = httpx.get(f"{ledger_env.url}/api/crawls", params={"idPrefix": old[:8].upper()}, headers=headers)
    assert r.status_code == 200 and [c["crawlId"] for c in r.json()["crawls"]] == [old]
    for bad in ("abc", "xyz12345", "abcd%", "a" * 37):
        r = httpx.get(f"{ledger_env.url}/api/crawls", params={"idPrefix": bad}, headers=headers)
        assert r.status_code == 400 and "idPrefix must be" in r.text, (bad, r.text)


def test_a_running_crawl_that_reached_max_pages_will_stop_it_has_not_stopped(ledger_env: RealLedger):
    """The ledger records ``stopReason: max_pages`` when the budget is reached, while the crawl
    still runs its last level: the CLI says "will stop at max pages" until the crawl ends."""
    ledger_env.flow.hold_from = 1  # level 0 reports (finds /one and /broken, budget 2), level 1 runs on
    run = runner.invoke(app, ["crawl", "http://site-a.example/", "--depth", "2", "--max-pages", "2", "--no-scripts",
                              "--detach"], catch_exceptions=False)
    crawl_id = re.search(r"crawl (\S+) started", run.output).group(1)
    headers = {"Authorization": f"Bearer {ledger_env.env['WAGGLE_TOKEN']}"}
    for _ in range(400):  # the level report lands within a second or so
        view = httpx.get(f"{ledger_env.url}/api/crawls/{crawl_id}", headers=headers).json()
        if view["currentDepth"] == 1:
            break
        time.sleep(0.05)
    assert (view["state"], view["stopReason"]) == ("running", "max_pages")
    listing = runner.invoke(app, ["crawls"], catch_exceptions=False).output
    row = next(line for line in listing.splitlines() if crawl_id[:8] in line)
    assert "will stop" in row, listing  # the list cuts it to its 10-cell column; the crawl view says it whole
    shown = runner.invoke(app, ["crawls", crawl_id[:8], "--archive-wait", "0"], catch_exceptions=False).output
    assert "will stop at max pages" in shown
    httpx.post(f"{ledger_env.url}/api/crawls/{crawl_id}/failed", json={"reason": "done"}, headers=headers)
    ended = runner.invoke(app, ["crawls"], catch_exceptions=False).output
    row = next(line for line in ended.splitlines() if crawl_id[:8] in line)
    # ended: the reason itself (columns one space apart, decision 265: state and stop reason are one word each)
    assert "will stop" not in row and row.split()[1:3] == ["failed", "failed"], ended
