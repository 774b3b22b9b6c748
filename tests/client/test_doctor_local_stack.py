"""scripts/doctor against the whole local stack (``waggle dev up`` in a temporary state dir)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from ledger.client import doctor

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.e2e
def test_doctor_finds_nothing_to_fix_on_the_local_stack(local_stack, tmp_path):
    target = doctor.target_from_env({"WAGGLE_STATE_DIR": str(local_stack.state_dir)})
    assert not target.compose and target.api_url == local_stack.api_url
    res = {c.name: o for c, o in doctor.run_checks(target)}
    assert [n for n, o in res.items() if o.status != doctor.OK] == [], {n: o.detail for n, o in res.items()}
    assert f"waggle-flow may submit for {local_stack.organization}" in res["flow token"].detail
    # the script, as a user runs it (no WINDMILL_URL → the local stack from stack.json)
    env = local_stack.client_env()
    env.pop("WINDMILL_URL", None)
    out = subprocess.run([sys.executable, str(REPO / "scripts" / "doctor")], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "checking the local stack" in out.stdout and "nothing to fix" in out.stdout
