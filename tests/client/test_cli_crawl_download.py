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
