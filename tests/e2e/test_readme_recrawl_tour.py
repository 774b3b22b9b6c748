"""The README tour's **Recrawl** commands run as written against the local stack (issue 30 item 1
keeps the tour true; decisions 351 and 353): the workflow is made with `waggle crawl`'s flags and
a schedule, run twice, its history read, a grant given, and `waggle changes` compares the two
crawls. Only the tour's seed (the docs copy on 127.0.0.1:8600), the workflow's name, USER and ID
are replaced by this test's own."""

from __future__ import annotations

import re
import shlex
import subprocess
import time
import uuid
from pathlib import Path

import httpx
import pytest

from tests.e2e.site import Site
from tests.e2e.test_recrawl_changes import BIN, admitted, write_site

pytestmark = pytest.mark.e2e
README = Path(__file__).resolve().parents[2] / "README.md"
TOUR_SEED = "http://127.0.0.1:8600/index.html"


def tour_commands() -> list[list[str]]:
    """The commands of the README's Recrawl block, continuation lines joined, comments dropped."""
    block = README.read_text().split("**Recrawl**", 1)[1].split("```", 2)[1]
    lines = [line.split(" #", 1)[0].strip() for line in block.replace("\\\n", " ").splitlines()]
    return [shlex.split(line) for line in lines if line]


def waggle(stack, args: list[str]) -> str:
    assert args[0] == ".venv/bin/waggle", args
    done = subprocess.run([str(BIN / "waggle"), *args[1:]], env=stack.client_env(), capture_output=True,
                          text=True, timeout=600)
    out = done.stdout + done.stderr
    assert done.returncode == 0, f"{shlex.join(args)}\n{out}"
    return out


def ended(stack, crawl_id: str, timeout_s: float = 600) -> None:
    headers = {"Authorization": f"Bearer {stack.token()}"}
    deadline = time.monotonic() + timeout_s
    while httpx.get(f"{stack.api_url}/api/crawls/{crawl_id}", headers=headers, timeout=30).json()["state"] == "running":
        assert time.monotonic() < deadline
        time.sleep(1)
    admitted(stack, crawl_id)


def test_the_recrawl_tour_runs_as_written(local_stack, tmp_path) -> None:
    commands = tour_commands()
    verbs = [c[1:3] for c in commands]
    assert verbs == [["workflows", "create"], ["workflows", "run"], ["workflows", "history"], ["changes", "ID"]], verbs
    root, name = tmp_path / "site", f"docs-{uuid.uuid4().hex[:6]}"
    write_site(root, ["a.html", "b.html"], uuid.uuid4().hex)
    site = Site(root, "User-agent: *\nAllow: /\n")

    def ours(args: list[str], crawl_id: str = "") -> list[str]:
        swap = {TOUR_SEED: f"{site.url}/index.html", "docs": name, "ID": crawl_id}
        return [swap.get(a, a) for a in args]

    try:
        created = waggle(local_stack, ours(commands[0]))
        assert name in created and "0 4 * * *" in created
        crawls = []
        for _ in range(2):  # "run it now (again later: a second crawl to compare)"
            ran = waggle(local_stack, ours(commands[1]))
            crawls.append(re.search(r"crawl ([0-9a-f-]{36}) started", ran).group(1))
            ended(local_stack, crawls[-1])
        history = waggle(local_stack, ours(commands[2]))
        assert history.count("started") == 2 and max(map(len, history.splitlines())) <= 80
        granted = waggle(local_stack, ours([".venv/bin/waggle", "workflows", "grant", "docs", "frank", "runner"]))
        assert "frank is now runner" in granted
        changed = waggle(local_stack, ours(commands[3], crawls[1]))
        assert f"since {crawls[0][:8]}" in changed and "workflow" in changed and "0 new" in changed
    finally:
        site.stop()
        subprocess.run([str(BIN / "waggle"), "workflows", "delete", name], env=local_stack.client_env(),
                       capture_output=True, timeout=120)
