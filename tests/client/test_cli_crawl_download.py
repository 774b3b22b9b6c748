"""``waggle crawls ID --download DIR`` writes the crawl as one WACZ named ``<host>-<date>-<short
id>.wacz`` (issue 25 item 4), built by the real ledger over HTTP from the crawl's archives."""

from __future__ import annotations

import json
import re
import time
import zipfile

from typer.testing import CliRunner

from ledger.cli import app
from tests.client.conftest import RealLedger

runner = CliRunner()


def test_crawls_download_writes_one_file_with_a_human_name(ledger_env: RealLedger, tmp_path):
    crawled = runner.invoke(app, ["crawl", "http://site-a.example/", "--depth", "1", "--delay-ms", "0", "--no-scripts",
                                  "--poll-interval", "0.05", "--archive-wait", "20"], catch_exceptions=False)
    assert crawled.exit_code == 0, crawled.output
    crawl_id = re.search(r"crawl (\S+) started", crawled.output).group(1)
    dest = tmp_path / "out"
    saved = runner.invoke(app, ["crawls", crawl_id[:8], "--download", str(dest), "--archive-wait", "0"],
                          catch_exceptions=False)
    assert saved.exit_code == 0, saved.output
    [path] = list(dest.iterdir())
    assert path.name == f"site-a.example-{time.strftime('%Y-%m-%d', time.gmtime())}-{crawl_id[:8]}.wacz"
    assert f"saved {path}" in saved.output.replace("\n", "") and "2 archive(s)" in saved.output
    with zipfile.ZipFile(path) as zf:
        warcs = [n for n in zf.namelist() if n.startswith("archive/")]
        package = json.loads(zf.read("datapackage.json"))
    assert len(warcs) == 2 and package["waggle"]["crawlId"] == crawl_id
    assert [m["why"] for m in package["waggle"]["missing"]] == ["failed"]  # the broken page said


def test_archives_say_size_and_title_from_admission_and_verify_reads_the_combined_file(ledger_env: RealLedger,
                                                                                      tmp_path):
    """Decision 341: right after the crawl (no pages list, no collection, no download yet) the
    archives list says each archive's title and size; decision 342: ``waggle verify`` on the
    combined file of this unsigned crawl says what it is and that no member is signed (exit 2)."""
    from ledger.archive.offline import EXIT_UNSIGNED

    crawled = runner.invoke(app, ["crawl", "http://site-a.example/", "--depth", "1", "--delay-ms", "0", "--no-scripts",
                                  "--poll-interval", "0.05", "--archive-wait", "20"], catch_exceptions=False)
    assert crawled.exit_code == 0, crawled.output
    crawl_id = re.search(r"crawl (\S+) started", crawled.output).group(1)
    listed = runner.invoke(app, ["archives", "--crawl", crawl_id, "--json"], catch_exceptions=False)
    assert listed.exit_code == 0, listed.output
    rows = json.loads(listed.output)  # the rows the caller may view
    assert len(rows) == 2 and all(r["bytes"] and r["bytes"] > 0 and r["title"] for r in rows), rows
    shown = runner.invoke(app, ["archives", "--crawl", crawl_id, "--wide"], catch_exceptions=False)
    assert "size unknown" not in shown.output and "title unknown" not in shown.output, shown.output
    dest = tmp_path / "out"
    saved = runner.invoke(app, ["crawls", crawl_id[:8], "--download", str(dest), "--archive-wait", "0"],
                          catch_exceptions=False)
    assert saved.exit_code == 0, saved.output
    [path] = list(dest.iterdir())
    verified = runner.invoke(app, ["verify", str(path)], catch_exceptions=False)
    assert verified.exit_code == EXIT_UNSIGNED, verified.output
    text = " ".join(verified.output.split())
    assert f"combined WACZ of crawl {crawl_id} (2 members): not signed as a whole" in text
    assert "2 of 2 members are not signed" in text and "every file datapackage.json lists matches its hash" in text
