"""``waggle dev`` finds the checkout's state from any directory inside it (issue 30 item 6,
decision 266): ``waggle dev status`` run from ``docs/`` once looked in ``docs/.waggle`` and
said postgres was stopped while the stack ran."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from ledger.settings import CHECKOUT, default_state_dir

REPO = Path(__file__).resolve().parents[2]


def test_inside_the_checkout_its_state_dir_outside_the_working_directory(tmp_path, monkeypatch) -> None:
    monkeypatch.delenv("WAGGLE_STATE_DIR", raising=False)
    assert CHECKOUT == REPO
    for inside in (REPO, REPO / "docs", REPO / "ledger" / "web" / "static", REPO / ".waggle"):
        assert default_state_dir(inside) == REPO / ".waggle", inside
    assert default_state_dir(tmp_path) == tmp_path / ".waggle"
    assert default_state_dir(REPO.parent) == REPO.parent / ".waggle"  # beside the checkout is not in it
    monkeypatch.setenv("WAGGLE_STATE_DIR", str(tmp_path / "mine"))  # the variable always wins
    assert default_state_dir(REPO / "docs") == tmp_path / "mine"


def status_from(cwd: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "WAGGLE_STATE_DIR"}
    return subprocess.run([str(REPO / ".venv" / "bin" / "waggle"), "dev", "status"], cwd=cwd, capture_output=True,
                          text=True, timeout=120, env={**env, "COLUMNS": "300"})


def test_dev_status_looks_in_the_same_place_from_any_directory_of_the_checkout(tmp_path) -> None:
    here = [status_from(d) for d in (REPO, REPO / "docs", REPO / "tests" / "devstack")]
    for result in here:
        assert f"local stack in {REPO / '.waggle'}" in result.stdout, result.stdout + result.stderr
    # the same rows wherever it was asked from (running or not)
    assert len({r.stdout.split("ledger replicas")[0] for r in here}) == 1
    outside = status_from(tmp_path)
    assert f"local stack in {tmp_path / '.waggle'}" in outside.stdout and outside.returncode == 1
    assert f"no local stack in {tmp_path / '.waggle'}" in outside.stdout
    assert not (tmp_path / ".waggle").exists()  # asking creates nothing
