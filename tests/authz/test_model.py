"""The authorization model, run by the real OpenFGA engine (``fga model test``)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FGA = ROOT / ".venv" / "bin" / "fga"
AUTHZ = ROOT / "ledger" / "authz"


def test_assertions_pass_in_the_real_engine() -> None:
    out = subprocess.run([str(FGA), "model", "test", "--tests", str(AUTHZ / "model.fga.yaml")],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr
    summary = out.stdout + out.stderr
    assert "Tests 8/8 passing" in summary  # 7 + the workflow test (decision 201)
    checks = int(summary.split("Checks ")[1].split("/")[0])
    assert checks >= 22  # the twelve numbered assertions expand to 16 Checks, plus our own


def test_a_wrong_assertion_fails_the_run(tmp_path: Path) -> None:
    """The suite can fail: flipping one expectation makes ``fga model test`` exit non-zero."""
    text = (AUTHZ / "model.fga.yaml").read_text().replace(
        "assertions: {can_submit: false, member: true}", "assertions: {can_submit: true, member: true}")
    (tmp_path / "model.fga").write_text((AUTHZ / "model.fga").read_text())
    (tmp_path / "t.fga.yaml").write_text(text)
    out = subprocess.run([str(FGA), "model", "test", "--tests", str(tmp_path / "t.fga.yaml")],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode != 0
    assert "can_submit" in out.stdout + out.stderr


def test_model_json_is_the_transform_of_model_fga() -> None:
    """``model.json`` (deployed by ``waggle fga deploy``) must stay the transform of ``model.fga``."""
    out = subprocess.run([str(FGA), "model", "transform", "--file", str(AUTHZ / "model.fga")],
                         capture_output=True, text=True, timeout=60, check=True)
    assert json.loads(out.stdout) == json.loads((AUTHZ / "model.json").read_text())
