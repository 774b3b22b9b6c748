"""The README stays true (every setting documented, two fresh-machine commands) and CI fails right."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from ledger.settings import Settings

REPO = Path(__file__).resolve().parents[2]
README = (REPO / "README.md").read_text()


def test_every_setting_is_in_the_configuration_reference() -> None:
    reference = README.split("## Configuration reference", 1)[1].split("\n## ", 1)[0]
    documented = set(re.findall(r"^\| `(WAGGLE_[A-Z0-9_]+)`", reference, re.M))  # table rows
    settings = {f"WAGGLE_{name.upper()}" for name in Settings.model_fields}
    assert settings - documented == set(), "undocumented settings"
    assert documented - settings == set(), "documented settings that do not exist"


def test_fresh_machine_section_has_exactly_the_two_commands() -> None:
    section = README.split("## On a fresh machine", 1)[1].split("\n## ", 1)[0]
    block = section.split("```", 2)[1]
    commands = [line.strip() for line in block.splitlines() if line.strip()]
    assert commands == ["scripts/demo", "scripts/test"]
    for cmd in commands:
        assert os.access(REPO / cmd, os.X_OK), f"{cmd} is not executable"


@pytest.mark.parametrize("code", [0, 1, 5])
def test_ci_run_fails_on_any_failure_including_no_tests(tmp_path: Path, code: int) -> None:
    (tmp_path / ".ci").mkdir()
    (tmp_path / "scripts").mkdir()
    shutil.copy(REPO / ".ci" / "run", tmp_path / ".ci" / "run")
    fake = tmp_path / "scripts" / "test"
    fake.write_text(f"#!/usr/bin/env bash\necho \"fake test $*\"\nexit {code}\n")
    fake.chmod(0o755)
    done = subprocess.run([str(tmp_path / ".ci" / "run"), "-q"], capture_output=True, text=True, timeout=30)
    assert done.returncode == code
    assert "fake test -q" in done.stdout
    assert ("collected no tests" in done.stderr) == (code == 5)
