"""The stack's OpenFGA store and model (deployed once, redeployed only when model.json changed) and grants."""

from __future__ import annotations

import hashlib

import httpx

from devstack.layout import StackConfig
from devstack.services import run_waggle
from devstack.supervisor import StackError


def deploy(config: StackConfig, env: dict[str, str]) -> None:
    """Deploy the store and model once; later ups reuse them, and write a new model only when
    ``model.json`` changed (into the same store, so tuples survive). Ids kept in ``fga.json``."""
    from ledger.authz import cli as authz_cli

    model_sha = hashlib.sha256(authz_cli.MODEL_JSON.read_bytes()).hexdigest()
    fga = config.fga_ids()
    args = ["fga", "deploy"]
    if fga.get("store_id"):
        resp = httpx.get(f"{config.url('openfga')}/stores/{fga['store_id']}", timeout=5.0,
                         headers={"Authorization": f"Bearer {config.secret('fga_key')}"})
        if resp.is_success and fga.get("model_sha") == model_sha:
            return
        if resp.is_success:
            args += ["--store-id", fga["store_id"]]
    out = run_waggle(*args, env=env)
    ids = dict(line.split("=", 1) for line in out.splitlines() if line.startswith("WAGGLE_FGA_"))
    if not ids.get("WAGGLE_FGA_STORE_ID") or not ids.get("WAGGLE_FGA_MODEL_ID"):
        raise StackError(f"`waggle fga deploy` printed no store/model ids: {out[-500:]!r}")
    config.save_fga_ids({"store_id": ids["WAGGLE_FGA_STORE_ID"].strip(),
                         "model_id": ids["WAGGLE_FGA_MODEL_ID"].strip(), "model_sha": model_sha})


def ungranted(config: StackConfig, subjects: list[str]) -> list[str]:
    """``subjects`` not yet granted ``submitter`` of the organization in this store (remembered per store)."""
    granted = config.fga_ids().get("granted", [])
    return [s for s in dict.fromkeys(subjects) if f"{s}@{config.organization}" not in granted]


def grant(config: StackConfig, env: dict[str, str], subject: str) -> None:
    run_waggle("grant", "submitter", subject, config.organization, env=env)


def remember_granted(config: StackConfig, subjects: list[str]) -> None:
    fga = config.fga_ids()
    fga["granted"] = sorted({*fga.get("granted", []), *(f"{s}@{config.organization}" for s in subjects)})
    config.save_fga_ids(fga)
