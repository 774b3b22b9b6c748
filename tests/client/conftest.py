"""Fixtures of the client tests: a fake ledger (documented API shapes) served on loopback."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.client.fake_ledger import FakeLedger
from tests.client.servers import serve_in_thread


@pytest.fixture
def fake_ledger() -> Iterator[FakeLedger]:
    """A fresh :class:`FakeLedger` served on 127.0.0.1 (``.base_url``), one per test."""
    fake = FakeLedger()
    with serve_in_thread(fake.app) as url:
        fake.base_url = url
        yield fake


@pytest.fixture
def client_env(fake_ledger: FakeLedger, tmp_path, monkeypatch) -> dict[str, str]:
    """Environment that points the CLI at the fake ledger (no stack.json anywhere)."""
    env = {
        "WAGGLE_API_URL": fake_ledger.base_url,
        "WAGGLE_TOKEN": fake_ledger.token,
        "WAGGLE_STATE_DIR": str(tmp_path / "no-stack"),
        "COLUMNS": "200",
    }
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    return env
