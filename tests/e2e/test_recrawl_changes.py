"""What changed between two crawls (issue 27 item 3, decision 211), through the whole local stack
as ``waggle dev up`` runs it: a small site on a loopback port is crawled with ``waggle crawl``,
then one page is changed, one removed (file and link), one added, and the site crawled again;
``waggle changes`` (the real client, default ``since``: the previous crawl of the same seeds)
must count exactly those — the index page changed too, since its links did."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
import uuid
from pathlib import Path

import httpx
import pytest

from tests.e2e.site import Site

pytestmark = pytest.mark.e2e

BIN = Path(sys.executable).parent


def page(title: str, mark: str, links: list[str] = ()) -> str:
    items = "".join(f'<li><a href="{name}">{name}</a></li>' for name in links)
    text = f"<p>{title}: " + "a paragraph of this page's own words. " * 40 + "</p>"
    return f"<!doctype html><html><head><title>{title}</title></head><body><h1>{title}</h1>{text}" \
           f"<ul>{items}</ul><!-- {mark} --></body></html>"


def write_site(root: Path, names: list[str], mark: str) -> None:
    root.mkdir(exist_ok=True)
    (root / "index.html").write_text(page("index", mark, names), encoding="utf-8")
    for name in names:
        if not (root / name).exists():
            (root / name).write_text(page(name, mark), encoding="utf-8")


def crawl(stack, seed: str) -> str:
    done = subprocess.run([str(BIN / "waggle"), "crawl", seed, "--depth", "1", "--max-pages", "20",
                           "--delay-ms", "100", "--parallelism", "1"],
                          env=stack.client_env(), capture_output=True, text=True, timeout=900)
    out = done.stdout + done.stderr
    assert done.returncode == 0, out
    return re.search(r"crawl ([0-9a-f-]{36}) started", out).group(1)


def admitted(stack, crawl_id: str, timeout_s: float = 120) -> None:
    """Wait until every captured page's archive is admitted (the level report admits after its
    answer): the recrawl's revisits and the comparison need them."""
    headers = {"Authorization": f"Bearer {stack.token()}"}
    deadline = time.monotonic() + timeout_s
    while True:
        body = httpx.get(f"{stack.api_url}/api/crawls/{crawl_id}/collection", headers=headers, timeout=30).json()
        waiting = [m for m in body["missing"] if m["why"] == "not-admitted-yet"]
        if not waiting:
            return
        assert time.monotonic() < deadline, waiting
        time.sleep(1)


def changes(stack, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(BIN / "waggle"), "changes", *args], env=stack.client_env(),
                          capture_output=True, text=True, timeout=300)


def test_a_recrawl_counts_pages_new_changed_unchanged_and_gone(local_stack, tmp_path) -> None:
    root, mark = tmp_path / "site", uuid.uuid4().hex
    write_site(root, ["a.html", "b.html", "c.html", "d.html"], mark)
    site = Site(root, "User-agent: *\nAllow: /\n")
    try:
        seed = f"{site.url}/index.html"
        first = crawl(local_stack, seed)
        admitted(local_stack, first)
        (root / "a.html").write_text(page("a.html", mark + " changed"), encoding="utf-8")
        (root / "d.html").unlink()
        write_site(root, ["a.html", "b.html", "c.html", "e.html"], mark)  # d's link gone, e new
        second = crawl(local_stack, seed)
        admitted(local_stack, second)
    finally:
        site.stop()
    done = changes(local_stack, second, "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    body = json.loads(done.stdout)
    assert body["since"]["crawlId"] == first and body["sinceChosen"] == "same-seeds"
    assert body["counts"] == {"new": 1, "changed": 2, "unchanged": 2, "gone": 1, "notCompared": 0}, body["counts"]
    name = lambda entries: sorted(e["url"].rsplit("/", 1)[1] for e in entries)  # noqa: E731
    assert (name(body["new"]), name(body["changed"]), name(body["unchanged"]), name(body["gone"])) == (
        ["e.html"], ["a.html", "index.html"], ["b.html", "c.html"], ["d.html"])
    # the unchanged pages of the recrawl are revisit records, compared by their original's digest
    assert all(e["now"]["revisit"] for e in body["unchanged"]), body["unchanged"]
    for entry in body["changed"]:
        assert entry["now"]["replay"] and entry["before"]["replay"], entry
        assert f"crawl={second}" in entry["now"]["replay"] and f"crawl={first}" in entry["before"]["replay"]
    text = changes(local_stack, second[:8], "--since", first[:8])
    assert text.returncode == 0, text.stdout + text.stderr
    assert "1 new, 2 changed, 2 unchanged, 1 gone" in text.stdout, text.stdout
    assert text.stdout.count("/#/replay?") == 4  # both captures of each changed page
