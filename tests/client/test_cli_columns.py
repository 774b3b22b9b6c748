"""The CLI at 80 columns (issue 30 item 6, decision 265): no table row wraps — long URLs are
cut with … in the middle (their start and their page name stay), short columns at their end —
and ``--wide`` prints them whole. The fake ledger of tests/client speaks the documented API."""

from __future__ import annotations

import io
import re

from rich.console import Console
from typer.testing import CliRunner

from ledger.cli import app
from ledger.client import render
from ledger.client.search import hits_table
from tests.client.fake_ledger import FakeLedger, Level

LONG = "http://a.test/library/concurrent.futures.html?highlight=executor&lang=en#module-concurrent.futures"
LONGER = "http://b.test/" + "deeply/nested/" * 12 + "page-with-a-long-name.html"
ID = "77aa1e0a-9b8d-4c7e-a6f5-0123456789ab"


def printed(table, width: int = 80) -> list[str]:
    out = io.StringIO()
    Console(file=out, width=width, force_terminal=False, color_system=None).print(table)
    return out.getvalue().splitlines()


def archive(url: str, **extra) -> dict:
    return {"id": ID, "sourceUrl": url, "capturedAt": "2026-12-01T03:40:12.345Z", "waczComplete": True,
            "objectKey": "0f1e2d3c_20261201034012.wacz", "title": "concurrent.futures — Launching parallel tasks"
            " — Python 3.11.14 documentation", "bytes": 123456, **extra}


def test_cut_keeps_the_start_and_the_end_and_fits() -> None:
    from rich.text import Text

    for width in (16, 17, 40, 79):
        cut = render.cut_middle(Text(LONGER), width).plain
        head, tail = cut.split("…")
        assert len(cut) == width and LONGER.startswith(head) and LONGER.endswith(tail) and 0 <= len(tail) - len(head) <= 1
        assert head.startswith("http://")  # the scheme and host first, the page name last
        end = render.cut_middle(Text(LONGER), width, end=True).plain
        assert len(end) == width and end.endswith("…") and LONGER.startswith(end[:-1])
    assert render.cut_middle(Text("http://a.test/"), 40).plain == "http://a.test/"  # fits: whole
    wide_chars = render.cut_middle(Text("http://ä.test/" + "頁" * 30), 20)
    assert wide_chars.cell_len <= 20


def test_archives_one_line_each_at_80_columns_whole_with_wide() -> None:
    rows = [archive(LONG), archive(LONGER, waczComplete=False, incompleteReason="page-load-deadline",
                                   missingBodyCount=12, signed=True, signatureVerified=True,
                                   signatureDomain="capture.waggle.example")]
    lines = printed(render.archives_table(rows))
    assert max(map(len, lines)) <= 80, lines
    url_lines = [ln for ln in lines if ln.startswith(ID[:8])]
    assert len(url_lines) == 2 and all("…" in ln and "2026-12-01 03:40:12" in ln for ln in url_lines), lines
    cell = url_lines[0].split()[1]  # the host (the scheme dropped for room), "…", the URL's end
    assert cell.startswith("a.test/") and LONG.endswith(cell.split("…")[1]) and len(cell.split("…")[1]) >= 4, lines
    assert len(lines) == 3 + 2 * 2, lines  # title, header, rule; per archive its URL line and what is in it
    assert "incomplete" in lines[-2]
    wide = "\n".join(printed(render.archives_table(rows, wide=True), width=400))
    assert LONG in wide and LONGER in wide and ID in wide
    roomy = "\n".join(printed(render.archives_table(rows), width=400))  # room enough: nothing is cut
    assert LONG in roomy and LONGER in roomy and "incomplete (load deadline, 12 without body)" in roomy


def test_crawls_one_line_each_at_80_columns() -> None:
    crawls = [{"crawlId": ID, "state": "running", "currentDepth": 2, "levelState": "waiting", "stopReason": "max_pages",
               "seeds": [LONGER, LONG], "pagesCaptured": 1234, "startedAt": "2026-12-01T03:40:12.345Z"},
              {"crawlId": ID, "state": "succeeded", "stopReason": "frontier_exhausted", "seeds": [LONG],
               "pagesCaptured": 3, "startedAt": "2026-12-01T03:40:12.345Z", "finishedAt": "2026-12-01T05:41:13.345Z"}]
    lines = printed(render.crawls_table(crawls))
    assert max(map(len, lines)) <= 80 and len(lines) == 3 + 2, lines
    assert all(ln.startswith(ID[:8]) and "…" in ln and "12-01 03:40" in ln for ln in lines[3:]), lines
    assert "(+1)" in lines[3] and "1234" in lines[3] and "2h01m01s" in lines[4]
    wide = "\n".join(printed(render.crawls_table(crawls, wide=True), width=400))
    assert LONGER in wide and ID in wide and "frontier_exhausted" in wide


def test_pages_and_search_hits_cut_urls_and_fold_prose() -> None:
    pages = [{"url": LONGER, "finalUrl": LONG, "depth": 3, "state": "failed", "failureClass": "http",
              "reason": "HTTP 404 from the server: the page is gone; nothing was archived", "captureMs": 1234, "waitMs": 300}]
    lines = printed(render.pages_table(pages))
    assert max(map(len, lines)) <= 80
    urls = [ln for ln in lines if "http://" in ln]
    assert len(urls) == 2 and all("…" in ln for ln in urls), lines
    assert "nothing was archived" in " ".join(" ".join(lines).split())  # the reason folds, whole
    assert LONGER in "\n".join(printed(render.pages_table(pages, wide=True), width=400))
    body = {"page": 1, "size": 10, "hits": [{"title": "Launching parallel tasks", "url": LONGER, "archiveId": ID,
                                             "capturedAt": "2026-12-01T03:40:12.345Z", "snippetHtml": "an <mark>executor</mark> runs"}]}
    lines = printed(hits_table(body))
    assert max(map(len, lines)) <= 80
    assert sum("http://" in ln for ln in lines) == 1 and any("…" in ln and "http://" in ln for ln in lines), lines


def test_the_commands_fit_80_columns_and_wide_prints_whole(tmp_path, monkeypatch) -> None:
    from tests.client.conftest import serve_in_thread

    fake = FakeLedger()
    fake.plan = [Level(captured=[LONG, LONGER])]
    with serve_in_thread(fake.app) as url:
        fake.base_url = url
        for k, v in {"WAGGLE_API_URL": url, "WAGGLE_TOKEN": fake.token, "WAGGLE_STATE_DIR": str(tmp_path / "none"),
                     "COLUMNS": "80"}.items():
            monkeypatch.setenv(k, v)
        runner = CliRunner()
        started = runner.invoke(app, ["crawl", LONGER, "--poll-interval", "0.05", "--archive-wait", "5"])
        assert started.exit_code == 0, started.output
        for args in (["crawls"], ["archives"]):
            out = runner.invoke(app, args, catch_exceptions=False).output
            assert max(map(len, out.splitlines())) <= 80, out
            assert "…" in out and LONGER not in out, out
            wide = runner.invoke(app, [*args, "--wide"], env={"COLUMNS": "400"}, catch_exceptions=False).output
            assert LONGER in wide, wide


LOCAL = ["http://127.0.0.1:8631/index.html", "http://127.0.0.1:8632/index.html", "http://localhost:8633/docs/x.html"]


def test_crawls_list_has_blocked_and_keeps_host_port_of_local_seeds() -> None:
    """Item 1 and 3 of the CLI trial: a Blocked column (pages, /hosts) within 80 columns, and
    local seeds that differ only in their port stay told apart (host:port whole, not cut)."""
    crawls = [{"crawlId": ID, "state": "running", "currentDepth": 2, "stopReason": "max_pages", "seeds": [seed],
               "pagesCaptured": 1234, "pagesBlocked": n, "hostsBlocked": n and 1,
               "startedAt": "2026-12-01T03:40:12.345Z"} for n, seed in enumerate(LOCAL)]
    crawls.append({"crawlId": ID, "state": "succeeded", "seeds": [LONG], "startedAt": "2026-12-01T03:40:12.345Z"})
    lines = printed(render.crawls_table(crawls))
    assert max(map(len, lines)) <= 80, lines
    assert "blk" in lines[1], lines
    for seed, line in zip(LOCAL, lines[3:]):
        assert seed.split("/")[2] in line, (seed, line)  # 127.0.0.1:8631, not 127.0…1
    assert lines[3].split()[-4] == "0" and lines[4].split()[-4] == "1/1h" and lines[6].split()[-4] == "–", lines
    wide = "\n".join(printed(render.crawls_table(crawls), width=400))
    assert all(seed in wide for seed in LOCAL)
    assert "1 (1 host)" in "\n".join(printed(render.crawls_table(crawls, wide=True), width=400))


def test_wide_headers_never_break_mid_word_at_80_columns() -> None:
    """Item 2: ``--wide`` at 80 columns folds cells but every header word stays whole."""
    crawls = [{"crawlId": ID, "state": "running", "currentDepth": 2, "stopReason": "max_pages", "seeds": [LONGER],
               "pagesCaptured": 3, "pagesBlocked": 1, "hostsBlocked": 1, "startedAt": "2026-12-01T03:40:12.345Z"}]
    for table, words in ((render.crawls_table(crawls, wide=True),
                          ["id", "state", "stop", "reason", "seeds", "captured", "blocked", "started", "elapsed"]),
                         (render.archives_table([archive(LONGER, signed=True)], wide=True),
                          ["id", "source", "url", "captured", "complete", "signed", "object", "key"])):
        lines = printed(table)
        assert max(map(len, lines)) <= 80, lines
        head = " ".join(lines[1:lines.index(next(ln for ln in lines if ln.startswith("─")))])
        assert sorted(head.split()) == sorted(words), lines


def test_urls_keep_host_port_and_titles_are_cut_at_their_end() -> None:
    """Item 3: a URL cut to its column keeps host:port whole (scheme dropped when needed, the
    path cut in its middle); a title line is cut at its end, not in its middle."""
    from rich.text import Text

    for url in LOCAL + [LONG, LONGER, "→ https://docs.python.org:8443/3/library/concurrent.futures.html"]:
        host = url.split("/")[2]
        for width in range(len(host) + 4, len(url)):
            cut = render.cut_url(Text(url), width).plain
            assert len(cut) <= width and host in cut, (url, width, cut)
            assert "…" in cut or cut.replace("→ ", "") == url.replace("→ ", "").split("://")[1], (url, width, cut)
    assert render.cut_url(Text("http://a.test/x"), 40).plain == "http://a.test/x"
    lines = printed(render.archives_table([archive("http://127.0.0.1:8631/3/download/index.html",
                                                    title="Download — Python 3.13 documentation and more")]))
    title = next(ln for ln in lines if "“" in ln)
    assert "“Download — Python" in title and title.rstrip().endswith("…"), lines
    assert any("127.0.0.1:8631" in ln for ln in lines), lines
