"""The README stays true (two fresh-machine commands, loopback examples), every setting is in
docs/configuration.md, and CI fails right."""

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
CONFIGURATION = (REPO / "docs" / "configuration.md").read_text()


def test_every_setting_is_in_the_configuration_reference() -> None:
    reference = CONFIGURATION.split("## The ledger's settings", 1)[1].split("\n## ", 1)[0]
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


LOOPBACK_HOSTS = {"127.0.0.1", "localhost", "[::1]"}


def test_readme_crawl_examples_stay_on_loopback() -> None:
    """A newcomer runs the README's crawls against the local stack: none may reach the Internet."""
    from urllib.parse import urlsplit

    commands = re.findall(r"(?:waggle crawl|scripts/demo)((?:[ \t]+[^\s`]+)+)", README)
    assert len(commands) >= 3, commands  # the local-stack example, the demo's "serve it yourself", scripts/demo URL
    urls = [arg for args in commands for arg in args.split() if "://" in arg]
    assert urls, commands
    outside = [u for u in urls if urlsplit(u).netloc.rsplit(":", 1)[0] not in LOOPBACK_HOSTS]
    assert outside == [], "README crawl examples that leave loopback"

