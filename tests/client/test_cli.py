"""``waggle crawl / crawls / archives / url`` against a ledger that speaks the documented API."""

from __future__ import annotations

import io
import os
import pty
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from rich.console import Console
from typer.testing import CliRunner

from ledger.cli import app
from ledger.client import render
from tests.client.fake_ledger import FakeLedger, wacz_bytes

runner = CliRunner()
REPO = Path(__file__).resolve().parents[2]


def run(*args: str):
    return runner.invoke(app, list(args), catch_exceptions=False)


def test_crawl_submits_the_body_follows_progress_and_summarizes(fake_ledger: FakeLedger, client_env, tmp_path):
    script = tmp_path / "clicker.ts"
    script.write_text("__bh.report({clicked: 1});\n")
    result = run(
        "crawl", "http://a.test/", "http://b.test/", "--depth", "2", "--max-pages", "10", "--delay-ms", "150",
        "--parallelism", "2", "--scope", "same-host", "--script", "autoscroll@2", "--script", f"preload:{script}",
        "--poll-interval", "0.05", "--archive-wait", "5", "--urls",
    )
    assert result.exit_code == 0, result.output
    assert fake_ledger.bodies == [{
        "seeds": ["http://a.test/", "http://b.test/"], "scope": "same-host", "maxDepth": 2, "maxPages": 10,
        "perHostDelayMs": 150, "hostParallelism": 2,
        "scripts": ["autoscroll@2", {"name": "clicker", "phase": "preload", "source": "__bh.report({clicked: 1});\n"}],
    }]
    out = result.output
    # progress: one line per change, levels in order, counters growing
    lines = [ln for ln in out.splitlines() if ln.startswith("crawl ") and " running: level " in ln]
    levels = [int(re.search(r"level (\d+)", ln).group(1)) for ln in lines]
    assert levels == sorted(levels) and levels[0] == 0 and levels[-1] == 2, lines
    assert "hosts in flight 2" in out  # level 1 runs on a.test and b.test
    assert re.search(r"succeeded: level 2 · captured 4 · failed 2 · skipped 1", out), out
    # summary: state, stop reason, failures with their reasons
    assert "max_depth" in out and "succeeded" in out
    assert "http://b.test/slow" in out and "timeout: navigation exceeded 30 s" in out
    assert "http: 500" in out
    assert "nofollow 1, out_of_scope 3" in out  # links not followed, per reason
    # archives with signed URLs, one per captured page
    urls = re.findall(r"http://127\.0\.0\.1:\d+/s3/browserhive/\S+", out)
    assert len(urls) == 4, out
    assert "archives (4)" in out


def test_crawl_defaults_send_only_seeds(fake_ledger: FakeLedger, client_env):
    result = run("crawl", "http://a.test/", "--poll-interval", "0.05", "--archive-wait", "5")
    assert result.exit_code == 0, result.output
    assert fake_ledger.bodies == [{"seeds": ["http://a.test/"]}]


def test_no_scripts_sends_an_empty_list(fake_ledger: FakeLedger, client_env):
    result = run("crawl", "http://a.test/", "--no-scripts", "--detach")
    assert result.exit_code == 0, result.output
    assert fake_ledger.bodies == [{"seeds": ["http://a.test/"], "scripts": []}]
    crawl_id = re.search(r"crawl (\S+) started", result.output).group(1)
    assert crawl_id in fake_ledger.crawls


def test_missing_script_file_is_a_usage_error(fake_ledger: FakeLedger, client_env, tmp_path):
    result = run("crawl", "http://a.test/", "--script", str(tmp_path / "nope.ts"))
    assert result.exit_code == 2
    assert "no such script file" in result.output
    assert fake_ledger.bodies == []


def test_another_running_crawl_is_named(fake_ledger: FakeLedger, client_env):
    fake_ledger.endless = True
    other = fake_ledger.start_crawl({"seeds": ["http://x.test/"]})
    result = run("crawl", "http://a.test/")
    assert result.exit_code == 1
    assert f"crawl {other.id} is already running" in result.output
    assert f"waggle crawls {other.id} --fail" in result.output
    assert fake_ledger.bodies == []


def test_download_saves_each_wacz(fake_ledger: FakeLedger, client_env, tmp_path):
    dest = tmp_path / "out"
    fake_ledger.archive_lag_s = 0.4  # the listing lags the crawl (outbox delay): the client waits
    result = run("crawl", "http://a.test/", "--poll-interval", "0.05", "--archive-wait", "5", "--download", str(dest))
    assert result.exit_code == 0, result.output
    files = sorted(dest.glob("*.wacz"))
    assert len(files) == 4, result.output
    served = {wacz_bytes(u) for u in ("http://a.test/", "http://a.test/one", "http://b.test/", "http://b.test/two")}
    assert {f.read_bytes() for f in files} == served
    assert not list(dest.glob("*.part"))
    # each file starts with its archive's id as listed, then the storage key's name
    for row in fake_ledger.archives():
        path = dest / f"{row['id'][:8]}-{row['objectKey'].rsplit('/', 1)[-1]}"
        assert path.read_bytes() == wacz_bytes(row["sourceUrl"]), sorted(f.name for f in files)
        assert row["id"][:8] in result.output  # the id the listing shows


def test_the_end_summary_reads_the_final_totals(fake_ledger: FakeLedger, client_env):
    """The summary of `waggle crawl` is read once the archives are listed (CLI trial item 6):
    archives admitted after the crawl ended count in its archive bytes, as `waggle crawls ID`
    later says — not the total of the moment the crawl ended."""
    fake_ledger.archive_lag_s = 0.6  # the last level's archives are admitted after the crawl ends
    fake_ledger.archive_bytes = 300_000
    result = run("crawl", "http://a.test/", "--poll-interval", "0.05", "--archive-wait", "10")
    assert result.exit_code == 0, result.output
    (crawl,) = fake_ledger.crawls.values()
    assert "archive bytes" in result.output and "1.2 MB" in result.output, result.output  # 4 archives
    later = run("crawls", crawl.id)
    assert "1.2 MB" in later.output and "pages captured" in later.output
    said = [ln for ln in result.output.splitlines() if "pages captured" in ln]
    assert said == [ln for ln in later.output.splitlines() if "pages captured" in ln], (said, later.output)


def test_a_download_directory_that_cannot_hold_archives_stops_before_the_crawl(
        fake_ledger: FakeLedger, client_env, tmp_path):
    blocker = tmp_path / "afile"
    blocker.write_text("not a directory")
    for bad in ("/proc/nope", str(blocker / "sub")):
        result = run("crawl", "http://a.test/", "--download", bad)
        assert result.exit_code == 2, result.output
        assert "cannot save archives in" in result.output and "Traceback" not in result.output
    is_file = run("crawl", "http://a.test/", "--download", str(blocker))
    assert is_file.exit_code == 2 and "is a file" in is_file.output
    assert fake_ledger.bodies == []  # no crawl was started
    made = tmp_path / "new" / "dir"  # a missing directory is created, as before
    assert run("crawl", "http://a.test/", "--detach", "--download", str(made)).exit_code == 0
    assert made.is_dir() and len(fake_ledger.bodies) == 1


def test_failed_crawl_exits_1_with_its_error(fake_ledger: FakeLedger, client_env):
    fake_ledger.endless = True
    crawl = fake_ledger.start_crawl({"seeds": ["http://a.test/"]})
    result = run("crawls", crawl.id, "--fail", "--reason", "operator says stop")
    assert result.exit_code == 0 and "failed." in result.output
    assert crawl.fail_reasons == ["operator says stop"]
    shown = run("crawls", crawl.id, "--archive-wait", "0")
    assert shown.exit_code == 1
    assert "operator says stop" in shown.output and "failed" in shown.output
    again = run("crawls", crawl.id, "--fail")
    assert "was not running" in again.output


def test_signed_urls_only_with_urls_and_download_still_saves(fake_ledger: FakeLedger, client_env, tmp_path):
    signed = re.compile(r"/s3/browserhive/\S+\?X-Amz")
    crawled = run("crawl", "http://a.test/", "--poll-interval", "0.05", "--archive-wait", "5")
    assert crawled.exit_code == 0 and "archives (4)" in crawled.output, crawled.output
    assert not signed.search(crawled.output)
    assert "`waggle url ARCHIVE_ID` for one, --urls for all of them" in crawled.output
    crawl_id = next(iter(fake_ledger.crawls))
    shown = run("crawls", crawl_id[:8], "--archive-wait", "0", "--download", str(tmp_path / "d"))
    assert shown.exit_code == 0 and "archives (4)" in shown.output, shown.output
    assert not signed.search(shown.output) and len(list((tmp_path / "d").glob("*.wacz"))) == 4
    with_urls = run("crawls", crawl_id[:8], "--archive-wait", "0", "--urls")
    assert len(signed.findall(with_urls.output)) == 4, with_urls.output
    assert run("crawls", "--urls").exit_code == 1  # needs an id


def test_a_fail_reason_over_the_limit_is_refused_not_cut(fake_ledger: FakeLedger, client_env):
    fake_ledger.endless = True
    crawl = fake_ledger.start_crawl({"seeds": ["http://a.test/"]})
    result = run("crawls", crawl.id, "--fail", "--reason", "x" * 2001)
    assert result.exit_code == 2, result.output
    assert "--reason is 2,001 characters; the ledger keeps at most 2,000" in result.output
    assert crawl.fail_reasons == []  # nothing was changed: the crawl still runs
    assert run("crawls", crawl.id, "--fail", "--reason", "y" * 2000).exit_code == 0
    assert crawl.fail_reasons == ["y" * 2000]


def test_the_client_knows_the_ledgers_reason_limit():
    from ledger.api.crawls import REASON_MAX_CHARS as ledgers
    from ledger.client.api import REASON_MAX_CHARS as clients

    assert clients == ledgers


def test_crawls_archives_and_url(fake_ledger: FakeLedger, client_env, tmp_path):
    first = run("crawl", "http://a.test/", "--poll-interval", "0.05", "--archive-wait", "5")
    assert first.exit_code == 0, first.output
    listing = run("crawls")
    assert listing.exit_code == 0
    crawl_id = next(iter(fake_ledger.crawls))
    assert crawl_id[:8] in listing.output and crawl_id not in listing.output  # short ids by default
    assert "succeeded" in listing.output and "max_depth" in listing.output
    assert crawl_id in run("crawls", "--wide").output
    shown = run("crawls", crawl_id[:6], "--archive-wait", "0")  # a unique prefix names the crawl
    assert shown.exit_code == 0 and "succeeded" in shown.output, shown.output

    archives = run("archives")
    assert archives.exit_code == 0 and "archives (4)" in archives.output
    row = fake_ledger.archives()[0]
    assert row["id"][:8] in archives.output and row["sourceUrl"] in archives.output
    assert row["id"] not in archives.output and row["objectKey"] not in archives.output  # --wide shows those
    assert "incomplete (3 without body)" in archives.output  # waczComplete false is flagged, with why
    wide = run("archives", "--wide")
    assert row["id"] in wide.output and row["objectKey"] in wide.output
    incomplete = next(r for r in fake_ledger.archives() if not r["waczComplete"])
    listed = run("archives", "--missing")
    assert listed.exit_code == 0, listed.output
    assert incomplete["missingBodyUrls"][0] in listed.output and "… 2 more" in listed.output
    complete = [r for r in fake_ledger.archives() if r["waczComplete"]]
    assert render.missing_view(complete).startswith("nothing missing")  # not an empty table

    signed = run("url", row["id"], "--download", str(tmp_path))
    assert signed.exit_code == 0
    assert re.search(rf"^{re.escape(fake_ledger.base_url)}/s3/browserhive/{row['objectKey']}\?", signed.stdout, re.M)
    # named as `waggle crawl --download` names it: the short id, then the object key's last segment
    saved = tmp_path / f"{row['id'][:8]}-{row['objectKey'].rsplit('/', 1)[-1]}"
    assert saved.read_bytes() == wacz_bytes(row["sourceUrl"])

    missing = run("url", "00000000-0000-4000-8000-000000000000")
    assert missing.exit_code == 1 and "not found" in missing.output


def test_url_accepts_a_unique_prefix_and_names_ambiguous_or_unknown_ones(fake_ledger: FakeLedger, client_env):
    assert run("crawl", "http://a.test/", "--poll-interval", "0.05", "--archive-wait", "5").exit_code == 0
    rows = fake_ledger.archives()
    row = rows[0]
    by_prefix = run("url", row["id"][:8].upper())  # as shown, any case
    assert by_prefix.exit_code == 0, by_prefix.output
    assert re.search(rf"/s3/browserhive/{row['objectKey']}\?", by_prefix.stdout)

    unknown = run("url", "ffffffff0")
    assert unknown.exit_code == 1 and "no archive you may see has an id starting with 'ffffffff0'" in unknown.output
    assert "waggle archives" in unknown.output
    bad = run("url", "../etc")
    assert bad.exit_code == 1 and "is not an archive id or id prefix" in bad.output
    # the ids are random per crawl; an ambiguous prefix is planted by hiding none and asking for ""
    # is not allowed, so the rule itself is checked on fixed ids:
    from ledger.client import ids
    from ledger.client.api import ApiError

    fixed = ["abc12345-0000-4000-8000-000000000001", "abc19999-0000-4000-8000-000000000002", "def00000-0000-4000-8000-000000000003"]
    with pytest.raises(ApiError, match=r"'abc1' is ambiguous: 2 archives start with it .*give more characters"):
        ids.resolve("abc1", fixed, "archive", "waggle archives")
    assert ids.resolve("abc12", fixed, "archive", "waggle archives") == fixed[0]
    assert ids.resolve(fixed[2].upper(), [], "archive", "waggle archives") == fixed[2]  # full ids need no listing


def test_archives_and_crawls_as_json(fake_ledger: FakeLedger, client_env):
    import json

    assert run("crawl", "http://a.test/", "--poll-interval", "0.05", "--archive-wait", "5").exit_code == 0
    archives = json.loads(run("archives", "--json").stdout)
    assert [a["id"] for a in archives] == [a["id"] for a in fake_ledger.archives()]
    assert all("objectKey" in a for a in archives)
    crawls = json.loads(run("crawls", "--json").stdout)
    crawl_id = next(iter(fake_ledger.crawls))
    assert [c["crawlId"] for c in crawls] == [crawl_id]
    one = json.loads(run("crawls", crawl_id[:8], "--json").stdout)
    assert one["crawlId"] == crawl_id and one["state"] == "succeeded"
    refused = run("crawls", crawl_id, "--json", "--follow")
    assert refused.exit_code == 1 and "--json" in refused.output


def test_archives_of_one_crawl_and_the_next_page(fake_ledger: FakeLedger, client_env):
    import json

    from tests.client.fake_ledger import Level

    assert run("crawl", "http://a.test/", "--poll-interval", "0.05", "--archive-wait", "5").exit_code == 0
    fake_ledger.plan = [Level(captured=[f"http://c.test/{n}" for n in range(60)])]  # more than a page
    assert run("crawl", "http://c.test/", "--poll-interval", "0.05", "--archive-wait", "5").exit_code == 0
    first, big = list(fake_ledger.crawls)
    mine = json.loads(run("archives", "--crawl", first[:8], "--json").stdout)
    assert [a["id"] for a in mine] == [a["id"] for a in fake_ledger.archives(first)] and len(mine) == 4
    page = run("archives", "--crawl", big[:8])
    last = fake_ledger.archives(big)[49]["capturedAt"]
    assert page.exit_code == 0 and "archives (50)" in page.output
    assert f"waggle archives --before {last} --crawl {big}" in " ".join(page.output.split())
    assert "older archives may exist" not in run("archives", "--crawl", first).output  # a short page is all
    unknown = run("archives", "--crawl", "ffffffff")
    assert unknown.exit_code == 1 and "no crawl" in unknown.output


def test_the_archives_table_keeps_each_archive_on_one_line_at_80_columns(fake_ledger: FakeLedger, client_env):
    """As scripts/demo shows it (not a terminal, 80 columns): one line per archive, short ids."""
    import io

    from rich.console import Console

    from ledger.client import render

    row = {"id": "3f2c1e0a-9b8d-4c7e-a6f5-0123456789ab", "sourceUrl": "http://127.0.0.1:41234/library/os.html",
           "capturedAt": "2026-12-01T03:40:12.345Z", "waczComplete": True,
           "objectKey": "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0_20261201034012.wacz"}
    long_url = {**row, "id": "77aa1e0a-9b8d-4c7e-a6f5-0123456789ab",
                "sourceUrl": "http://127.0.0.1:41234/library/concurrent.futures.html#module-concurrent.futures"}
    out = io.StringIO()
    Console(file=out, width=80, force_terminal=False, color_system=None).print(render.archives_table([row, row, long_url]))
    lines = out.getvalue().splitlines()
    body = [ln for ln in lines if "3f2c1e0a" in ln]
    assert len(body) == 2 and all("os.html" in ln and "2026-12-01 03:40:12" in ln for ln in body), out.getvalue()
    (first,) = [ln for ln in lines if "77aa1e0a" in ln]  # a long URL folds; the id and time stay whole
    assert "2026-12-01 03:40:12" in first
    assert "0f1e2d3c" not in out.getvalue() and "9b8d" not in out.getvalue()
    assert max(len(ln) for ln in out.getvalue().splitlines()) <= 80


def test_refused_token_says_how_to_get_one(fake_ledger: FakeLedger, client_env, monkeypatch):
    monkeypatch.setenv("WAGGLE_TOKEN", "wrong")
    result = run("archives")
    assert result.exit_code == 1
    assert "refused the token" in result.output and "WAGGLE_TOKEN" in result.output


def test_no_api_configured(tmp_path, monkeypatch):
    monkeypatch.delenv("WAGGLE_API_URL", raising=False)
    monkeypatch.delenv("WAGGLE_TOKEN", raising=False)
    monkeypatch.setenv("WAGGLE_STATE_DIR", str(tmp_path))
    result = run("crawls")
    assert result.exit_code == 1
    assert "WAGGLE_API_URL" in result.output and "waggle dev up" in result.output


def test_ledger_down_is_named(tmp_path, monkeypatch):
    import socket

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there now
    monkeypatch.setenv("WAGGLE_API_URL", f"http://127.0.0.1:{port}")
    monkeypatch.setenv("WAGGLE_TOKEN", "t")
    result = run("crawls")
    assert result.exit_code == 1
    assert f"http://127.0.0.1:{port} does not answer" in result.output


def test_stack_json_gives_url_and_a_minted_token(fake_ledger: FakeLedger, tmp_path, monkeypatch):
    import json

    monkeypatch.delenv("WAGGLE_API_URL", raising=False)
    monkeypatch.delenv("WAGGLE_TOKEN", raising=False)
    monkeypatch.setenv("WAGGLE_STATE_DIR", str(tmp_path))
    (tmp_path / "stack.json").write_text(json.dumps({
        "services": {"ledger": fake_ledger.base_url, "issuer": fake_ledger.base_url},
        "subject": "local", "organization": "default",
    }))
    result = run("archives")
    assert result.exit_code == 0, result.output
    assert fake_ledger.issued == [{"subject": "local", "organizations": ["default"], "expiresIn": "1h"}]


# -- Ctrl-C: a real SIGINT to a real process ------------------------------------------------
class Proc:
    """The CLI as a child process; a thread collects its output so waits never block on a prompt."""

    def __init__(self, env: dict[str, str], *args: str, stdin, sigint_ignored: bool = False):
        import threading

        # Started as a terminal starts it (SIGINT raises KeyboardInterrupt, whatever pytest itself
        # inherited) or as a background job of a non-interactive shell does (SIGINT ignored).
        boot = "" if sigint_ignored else "import signal; signal.signal(signal.SIGINT, signal.default_int_handler); "
        self.proc = subprocess.Popen(
            [sys.executable, "-c", boot + "from ledger.cli import main; main()", *args],
            cwd=REPO, env={**os.environ, **env, "PYTHONUNBUFFERED": "1"},
            stdin=stdin, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            preexec_fn=(lambda: signal.signal(signal.SIGINT, signal.SIG_IGN)) if sigint_ignored else None,
        )
        self.out = b""
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        while chunk := self.proc.stdout.read1(4096):
            self.out += chunk

    @property
    def text(self) -> str:
        return self.out.decode(errors="replace")

    # Liveness bounds, not speed assertions: a loaded 2-core machine can take tens of seconds
    # just to start the interpreter and import the client.
    def wait_for(self, needle: str, timeout_s: float = 120.0) -> None:
        deadline = time.monotonic() + timeout_s
        while needle not in self.text:
            if time.monotonic() > deadline or (self.proc.poll() is not None and needle not in self.text):
                raise AssertionError(f"never saw {needle!r} in: {self.text}")
            time.sleep(0.02)

    def finish(self, timeout_s: float = 120.0) -> int:
        code = self.proc.wait(timeout=timeout_s)
        self._reader.join(timeout=5)
        return code

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


@pytest.mark.parametrize("sigint_ignored", [False, True], ids=["foreground", "started-with-sigint-ignored"])
def test_ctrl_c_without_a_terminal_fails_the_crawl_and_says_so(fake_ledger: FakeLedger, client_env, sigint_ignored):
    fake_ledger.endless = True
    proc = Proc(client_env, "crawl", "http://a.test/", "--poll-interval", "0.05", stdin=subprocess.DEVNULL,
                sigint_ignored=sigint_ignored)
    try:
        proc.wait_for(" running: level ")  # following has begun
        proc.proc.send_signal(signal.SIGINT)
        code = proc.finish()
    finally:
        proc.kill()
    out = proc.text
    assert code == 130, out
    (crawl,) = fake_ledger.crawls.values()
    assert "stdin is not a terminal" in out and f"failing crawl {crawl.id}" in out
    assert crawl.state == "failed"
    assert crawl.fail_reasons == ["stopped by the user (Ctrl-C in `waggle crawl`)"]
    # captures in flight are still recorded after the fail: the summary says its counts are so far
    assert "counts so far" in out and f"waggle crawls {crawl.id[:8]}` shows the final totals" in " ".join(out.split())
    assert "Traceback" not in out


@pytest.mark.parametrize("answer", ["l", "f"])
def test_ctrl_c_at_a_terminal_asks_leave_or_fail(fake_ledger: FakeLedger, client_env, answer):
    fake_ledger.endless = True
    master, slave = pty.openpty()
    proc = Proc(client_env, "crawl", "http://a.test/", "--poll-interval", "0.05", stdin=slave)
    os.close(slave)
    try:
        proc.wait_for(" running: level ")
        proc.proc.send_signal(signal.SIGINT)
        proc.wait_for("Leave running or fail? [l/f]")
        os.write(master, f"{answer}\n".encode())
        code = proc.finish()
    finally:
        proc.kill()
        os.close(master)
    out = proc.text
    (crawl,) = fake_ledger.crawls.values()
    assert code == 130, out
    if answer == "l":
        assert crawl.state == "running" and crawl.fail_reasons == []
        assert f"waggle crawls {crawl.id} --follow" in out
    else:
        assert crawl.state == "failed" and len(crawl.fail_reasons) == 1
        assert f"Crawl {crawl.id} failed" in out


def test_live_display_on_a_terminal(fake_ledger: FakeLedger, client_env):
    """With a terminal on stdout the progress is a live panel, then the summary."""
    import threading

    master, slave = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-c", "from ledger.cli import main; main()", "crawl", "http://a.test/",
         "--poll-interval", "0.05", "--archive-wait", "5"],
        cwd=REPO, env={**os.environ, **client_env, "TERM": "xterm", "COLUMNS": "160"},
        stdin=slave, stdout=slave, stderr=slave,
    )
    os.close(slave)
    chunks: list[bytes] = []

    def read() -> None:
        while True:
            try:
                data = os.read(master, 4096)
            except OSError:  # EIO once the child closed the terminal
                return
            if not data:
                return
            chunks.append(data)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        code = proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
        reader.join(timeout=5)
        os.close(master)
    out = b"".join(chunks).decode(errors="replace")
    assert code == 0, out
    assert "\x1b[" in out  # a live, redrawn display, not log lines
    assert "hosts in flight" in out and "2 of 2" in out and "budget 30" in out
    assert "running: level" not in out  # the line format is for non-terminals only
    assert "succeeded" in out and "max_depth" in out and "archives (4)" in out


def _text(renderable) -> str:
    out = io.StringIO()
    Console(file=out, width=200, highlight=False).print(renderable)
    return out.getvalue()


def test_summary_says_how_many_failures_it_does_not_list():
    failures = [{"url": f"http://a.test/{i}", "depth": 1, "reason": "http: 500", "failureClass": "transient"}
                for i in range(5)]  # the ledger sends the 5 newest
    crawl = {"crawlId": "ad7cac4d-0000-4000-8000-000000000000", "state": "succeeded", "pagesFailed": 6,
             "failures": failures}
    assert "1 more: waggle crawls ad7cac4d --pages --state failed" in _text(render.summary_view(crawl))
    assert "more:" not in _text(render.summary_view({**crawl, "pagesFailed": 5}))


def test_stop_reason_of_a_running_crawl_is_what_it_will_stop_at():
    assert render.stop_reason_text({"state": "running", "stopReason": "max_pages"}) == "will stop at max pages"
    assert render.stop_reason_text({"state": "succeeded", "stopReason": "max_pages"}) == "max_pages"
    assert render.stop_reason_text({"state": "running", "stopReason": None}) == "–"


def test_ignore_robots_meta_is_sent_only_when_asked(fake_ledger: FakeLedger, client_env):
    """Issue 24 item 7: ``--ignore-robots-meta`` → ``ignoreRobotsMeta: true``; without it nothing is sent
    (the ledger's default honours noarchive and nofollow)."""
    result = run("crawl", "http://a.test/", "--ignore-robots-meta", "--detach")
    assert result.exit_code == 0, result.output
    assert fake_ledger.bodies == [{"seeds": ["http://a.test/"], "ignoreRobotsMeta": True}]


def test_the_crawl_view_says_how_robots_meta_is_treated():
    crawl = {"crawlId": "ad7cac4d-0000-4000-8000-000000000000", "state": "succeeded"}
    assert "robots meta" not in _text(render.summary_view(crawl))  # an older ledger does not say
    assert "honoured (noarchive pages not archived" in _text(render.summary_view({**crawl, "ignoreRobotsMeta": False}))
    assert "ignored (noarchive pages archived" in _text(render.summary_view({**crawl, "ignoreRobotsMeta": True}))


def test_the_pages_table_shows_the_capture_time_and_the_wait_apart():
    """Issue 24 item 8: a held page's capture time excludes its wait behind the previous page."""
    pages = [{"url": "http://a.test/1", "depth": 0, "state": "captured", "captureMs": 845, "waitMs": 1500},
             {"url": "http://a.test/2", "depth": 0, "state": "captured", "captureMs": 250, "waitMs": None}]
    text = _text(render.pages_table(pages))
    assert re.search(r"845\s+1500", text), text
    assert re.search(r"250\s*\n", text) or "250 " in text, text
    assert "wait" in text
def test_crawl_scope_options_reach_the_body():
    """Issue 29: --scope with the new types, repeatable --include/--exclude, --extra-hops."""
    from ledger.client.cli import build_crawl_body
    body = build_crawl_body(["https://a.test/docs/"], None, None, None, None, "prefix", None, False, None,
                            ["/shared/"], ["/logout$", "\\?sort="], 1)
    assert body == {"seeds": ["https://a.test/docs/"], "scope": "prefix", "include": ["/shared/"],
                    "exclude": ["/logout$", "\\?sort="], "extraHops": 1}
    assert "include" not in build_crawl_body(["https://a.test/"], None, None, None, None, None, None, False)


def test_crawl_refuses_an_unknown_scope_before_sending(fake_ledger: FakeLedger, client_env):
    result = run("crawl", "http://a.test/", "--scope", "any", "--detach")
    assert result.exit_code != 0 and fake_ledger.bodies == []


def test_summary_shows_the_scope():
    from rich.console import Console
    from ledger.client.render import summary_view
    console = Console(record=True, width=200)
    console.print(summary_view({"crawlId": "c", "state": "succeeded", "scope": "prefix", "include": ["/a/"],
                                "exclude": ["\\.pdf$"], "extraHops": 2}))
    assert "prefix, include /a/, exclude \\.pdf$, extra hops 2" in console.export_text()


def test_crawls_stop_pause_resume_post_the_action(fake_ledger: FakeLedger, client_env):
    fake_ledger.endless = True
    crawl = fake_ledger.start_crawl({"seeds": ["http://a.test/"]})
    assert "stopped (succeeded, stop reason stopped)" in run("crawls", crawl.id, "--stop").output
    assert "pausing" in run("crawls", crawl.id, "--pause").output
    assert "running" in run("crawls", crawl.id, "--resume").output
    assert fake_ledger.controls == [(crawl.id, "stop"), (crawl.id, "pause"), (crawl.id, "resume")]
    both = run("crawls", crawl.id, "--stop", "--pause")
    assert both.exit_code != 0 and "exclude each other" in both.output
    assert run("crawls", "--resume").exit_code != 0
    assert len(fake_ledger.controls) == 3


def test_stopping_or_failing_an_ended_crawl_says_so_and_exits_0(fake_ledger: FakeLedger, client_env):
    crawl = fake_ledger.start_crawl({"seeds": ["http://a.test/"]})
    run("crawls", crawl.id, "--follow")  # to its end
    stop = run("crawls", crawl.id, "--stop")
    assert stop.exit_code == 0 and "had already ended; nothing to stop" in stop.output, stop.output
    fail = run("crawls", crawl.id, "--fail")
    assert fail.exit_code == 0 and "nothing to fail" in fail.output, fail.output
    pause = run("crawls", crawl.id, "--pause")  # a pause cannot be had: an error
    assert pause.exit_code == 1 and "already" in pause.output, pause.output
    assert fake_ledger.controls == []


def test_a_paused_crawl_is_not_a_failure():
    from rich.console import Console
    from ledger.client.cli import finish
    console = Console(record=True, width=200)
    code = finish(None, {"crawlId": "c0ffee00", "state": "paused", "pagesCaptured": 0}, console, None, 0)
    assert code == 0 and "waggle crawls c0ffee00 --resume" in console.export_text()
    assert finish(None, {"crawlId": "c", "state": "failed", "pagesCaptured": 0}, Console(record=True), None, 0) == 1


def test_a_pause_still_pending_shows_in_the_summary():
    """A crawl asked to pause keeps running until its level has reported: the summary says so
    (found by a new user: only --json showed pauseRequested)."""
    crawl = {"crawlId": "c0ffee00", "state": "running", "pauseRequested": True}
    assert "running (pausing" in _text(render.summary_view(crawl))
    assert "pausing" not in _text(render.summary_view({**crawl, "pauseRequested": False}))


def test_crawl_sitemap_options_reach_the_ledger(fake_ledger: FakeLedger, client_env):
    """Issue 29 item 2: --sitemap and --sitemap-lastmod-after DATE → useSitemap, sitemapLastmodAfter."""
    result = run("crawl", "http://a.test/", "--sitemap", "--sitemap-lastmod-after", "2024-01-31", "--detach")
    assert result.exit_code == 0, result.output
    assert fake_ledger.bodies[-1]["useSitemap"] is True and fake_ledger.bodies[-1]["sitemapLastmodAfter"] == "2024-01-31"
    for crawl in fake_ledger.crawls.values():  # the fake keeps one crawl running at a time
        crawl.state = "succeeded"
    again = run("crawl", "http://a.test/", "--detach")
    assert again.exit_code == 0, again.output
    assert "useSitemap" not in fake_ledger.bodies[-1] and "sitemapLastmodAfter" not in fake_ledger.bodies[-1]


def test_summary_shows_what_the_sitemaps_gave():
    crawl = {"crawlId": "c", "state": "succeeded", "useSitemap": True, "sitemapLastmodAfter": "2024-01-31T00:00:00.000Z",
             "sitemap": {"files": 3, "found": 120, "older": 40, "queued": 70, "outOfScope": 10, "notQueued": 0}}
    text = _text(render.summary_view(crawl))
    assert "lastmod after 2024-01-31T00:00:00.000Z; 3 files, 120 found, 40 older, 70 queued, 10 out of scope" in text
    assert "not read yet" in _text(render.summary_view({**crawl, "sitemap": None}))
    assert "sitemap" not in _text(render.summary_view({"crawlId": "c", "state": "succeeded"}))
