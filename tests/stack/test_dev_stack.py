"""``waggle dev up/down/status`` on the real stack (the session's ``local_stack``).

Runs after tests/e2e (collection order) and leaves the stack up again at the end, on the same
ports, so later users of the fixture still find it.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import httpx
import psycopg
import pytest

from devstack.s3 import make_client
from devstack.stack import FLOW_SUBJECT, WORKSPACE, config_from_state, down, read_stack, up
from devstack.supervisor import Supervisor, port_in_use

pytestmark = pytest.mark.e2e

WAGGLE = [sys.executable, "-c", "import sys; sys.argv[0]='waggle'; from waggle.cli import main; main()"]


def _pids(state_dir: Path) -> dict[str, int]:
    sup = Supervisor(state_dir)
    return {name: sup.record(name)["pid"] for name in sup.names() if sup.record(name)}


def _variable(stack, path: str) -> str:
    token = json.loads((stack.state_dir / "secrets.json").read_text())["windmill_token"]
    resp = httpx.get(f"{stack.info['services']['windmill']}/api/w/{WORKSPACE}/variables/get_value/{path}",
                     headers={"Authorization": f"Bearer {token}"}, timeout=10)
    assert resp.status_code == 200, (path, resp.text)
    return resp.json()


def test_status_lists_every_service_healthy(local_stack) -> None:
    done = subprocess.run([*WAGGLE, "dev", "status", "--state-dir", str(local_stack.state_dir)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    for name, url in local_stack.info["services"].items():
        assert name in done.stdout and url in done.stdout
    assert "postgres" in done.stdout
    assert "ledger replicas: 1 (" in done.stdout  # issue 12: the ledger processes on the stack's database


def test_stack_json_and_the_five_variables(local_stack) -> None:
    info = read_stack(local_stack.state_dir)
    services = info["services"]
    assert {"ledger", "issuer", "openfga", "s3", "tscompile", "windmill", "capture-1", "capture-2"} <= set(services)
    assert info["subject"] and info["organization"] and info["bucket"] == "browserhive"
    assert _variable(local_stack, "u/admin/waggle_api_url") == services["ledger"]
    assert json.loads(_variable(local_stack, "u/admin/browserhive_endpoints")) == [services["capture-1"], services["capture-2"]]
    assert _variable(local_stack, "u/admin/browserhive_tls_ca") == ""
    assert _variable(local_stack, "u/admin/ts_compile_url") == services["tscompile"]
    flow_token = _variable(local_stack, "u/admin/waggle_token")
    me = httpx.get(f"{services['ledger']}/api/me", headers={"Authorization": f"Bearer {flow_token}"}, timeout=10)
    assert me.status_code == 200 and me.json()["subject"] == FLOW_SUBJECT and me.json()["canSubmit"] is True


def test_up_twice_is_harmless(local_stack) -> None:
    before = _pids(local_stack.state_dir)
    info = up(config_from_state(local_stack.state_dir))
    assert _pids(local_stack.state_dir) == before  # nothing restarted
    assert info["services"] == local_stack.info["services"]


def test_data_survives_down_and_up(local_stack) -> None:
    state, info = local_stack.state_dir, local_stack.info
    # one piece of data in each store: Postgres, S3, OpenFGA, the runner's state
    with psycopg.connect(info["database_url"], autocommit=True) as conn:
        conn.execute("DROP DATABASE IF EXISTS survives_probe")
        conn.execute("CREATE DATABASE survives_probe")
    s3 = info["s3"]
    make_client(s3["endpoint"], s3["access_key_id"], s3["secret_access_key"]).put_object(
        Bucket=info["bucket"], Key="probe/survives.txt", Body=b"still here")
    env = {**local_stack.client_env(), "WAGGLE_FGA_API_URL": info["services"]["openfga"],
           "WAGGLE_FGA_API_TOKEN": json.loads((state / "secrets.json").read_text())["fga_key"],
           "WAGGLE_FGA_STORE_ID": info["fga"]["store_id"], "WAGGLE_FGA_MODEL_ID": info["fga"]["model_id"]}
    granted = subprocess.run([*WAGGLE, "grant", "submitter", "alice", info["organization"]], env=env,
                             capture_output=True, text=True, timeout=60)
    assert granted.returncode == 0, granted.stderr
    windmill_token = json.loads((state / "secrets.json").read_text())["windmill_token"]
    created = httpx.post(f"{info['services']['windmill']}/api/w/{WORKSPACE}/variables/create",
                         headers={"Authorization": f"Bearer {windmill_token}"}, timeout=10,
                         json={"path": "u/admin/survives_probe", "value": "still here", "is_secret": False, "description": ""})
    assert created.is_success, created.text

    stopped = down(state)
    assert set(info["services"]) | {"postgres"} <= set(stopped)
    for url in info["services"].values():
        port = int(url.rsplit(":", 1)[1])
        assert not port_in_use("127.0.0.1", port), f"{url} still answers after down"
    assert _pids(state) == {}

    again = up(config_from_state(state))
    assert again["services"] == info["services"]  # same ports
    with psycopg.connect(again["database_url"]) as conn:
        assert conn.execute("SELECT 1 FROM pg_database WHERE datname = 'survives_probe'").fetchone()
    body = make_client(s3["endpoint"], s3["access_key_id"], s3["secret_access_key"]).get_object(
        Bucket=info["bucket"], Key="probe/survives.txt")["Body"].read()
    assert body == b"still here"
    alice = local_stack.token(subject="alice")  # the issuer restarted: a fresh token
    me = httpx.get(f"{again['services']['ledger']}/api/me", headers={"Authorization": f"Bearer {alice}"}, timeout=10)
    assert me.status_code == 200 and me.json()["canSubmit"] is True
    assert _variable(local_stack, "u/admin/survives_probe") == "still here"
