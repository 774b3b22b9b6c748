"""What waggle relies on from the real OpenFGA server as it runs it (devstack/openfga_server.py):
loopback-only listeners, the preshared key, the Write refusals the outbox classifies, and the
Postgres datastore keeping stores, models and tuples across a restart."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import httpx
import pytest
from openfga_sdk.exceptions import ApiException

from ledger.authz.fga import Authz, is_already_in_desired_state
from tests.fixtures.fga import FgaProcess, create_store


def listening(pid: int) -> set[tuple[str, int]]:
    """``(address, port)`` of every TCP socket ``pid`` listens on (Linux /proc)."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    out = set()
    for table, width in (("tcp", 8), ("tcp6", 32)):
        for line in Path(f"/proc/net/{table}").read_text().splitlines()[1:]:
            cols = line.split()
            if cols[3] != "0A" or cols[9] not in inodes:  # 0A: LISTEN
                continue
            addr, port = cols[1].split(":")
            if width == 8:
                host = ".".join(str(int(addr[i:i + 2], 16)) for i in (6, 4, 2, 0))
            else:
                host = "::1" if addr == "0" * 24 + "01000000" else addr
            out.add((host, int(port, 16)))
    return out


def test_listens_on_loopback_only_http_and_grpc() -> None:
    """HTTP and gRPC on 127.0.0.1, nothing else: no playground, metrics or profiler listener."""
    proc = FgaProcess().start()
    try:
        assert listening(proc.pid) == {("127.0.0.1", proc.port), ("127.0.0.1", proc.grpc_port)}
        assert httpx.get(f"{proc.api_url}/healthz").json() == {"status": "SERVING"}
        assert httpx.get(f"{proc.api_url}/playground").status_code == 404
    finally:
        proc.stop()


def test_preshared_key_is_required() -> None:
    keyed = FgaProcess(preshared_key="k3y-k3y-k3y").start()
    try:
        r = httpx.get(f"{keyed.api_url}/stores")
        assert (r.status_code, r.json()["code"]) == (401, "bearer_token_missing")
        r = httpx.get(f"{keyed.api_url}/stores", headers={"Authorization": "Bearer wrong"})
        assert r.status_code == 401
        assert httpx.get(f"{keyed.api_url}/stores", headers={"Authorization": "Bearer k3y-k3y-k3y"}).status_code == 200
        assert httpx.get(f"{keyed.api_url}/healthz").status_code == 200  # health needs no key
    finally:
        keyed.stop()


async def _refusals(store) -> list[BaseException | None]:
    """Authz.write of a duplicate, of an absent delete and of a non-assignable relation."""
    az = Authz(store.api_url, store.store_id, store.model_id)
    t = {"user": "user:bob", "relation": "submitter", "object": "organization:acme"}
    new = {"user": "user:eve", "relation": "submitter", "object": "organization:acme"}
    out: list[BaseException | None] = []
    try:
        await az.write([t])
        for writes, deletes in (([new, t], None), (None, [{**t, "user": "user:nobody"}]),
                                ([{**t, "relation": "can_submit"}], None)):
            try:
                await az.write(writes, deletes)
                out.append(None)
            except ApiException as exc:
                out.append(exc)
    finally:
        await az.close()
    return out


def _assert_refusals(store, refusals: list) -> None:
    duplicate, absent, invalid = refusals
    assert is_already_in_desired_state(duplicate) and "already exists" in duplicate.error_message
    assert is_already_in_desired_state(absent) and "does not exist" in absent.error_message
    assert invalid is not None and not is_already_in_desired_state(invalid)  # a real failure
    assert {"user": "user:eve", "relation": "submitter", "object": "organization:acme"} not in store.read()


def test_write_refusals_the_outbox_classifies(fga_store) -> None:
    _assert_refusals(fga_store, asyncio.run(_refusals(fga_store)))


def test_postgres_datastore_survives_a_restart(create_database) -> None:
    """Datastore ``postgres`` (the local stack's): migrated once, everything kept across a
    restart on the same ports; the Write refusals read the same as on ``memory``."""
    proc = FgaProcess(create_database()).start()
    try:
        store = create_store(proc.api_url)
        store.write(["user:carol submitter organization:acme"])
        _assert_refusals(store, asyncio.run(_refusals(store)))
        port = proc.port
        proc.stop()
        with pytest.raises(httpx.TransportError):
            httpx.get(f"{proc.api_url}/healthz", timeout=1)
        proc._migrated = False  # a second `openfga migrate` of a current schema is a no-op
        proc.start()
        assert proc.port == port
        assert store.check("user:carol", "can_submit", "organization:acme")
        assert store.check("user:bob", "can_submit", "organization:acme")
        assert not store.check("user:eve", "can_submit", "organization:acme")
    finally:
        proc.stop()
