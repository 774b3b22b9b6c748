"""Session servers of the devstack tests: ts-compile stand-in (capture fixtures in test files)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from devstack.serving import start_module


@pytest.fixture(scope="session")
def tscompile_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Base URL of one ``python -m devstack.tscompile`` process for the session."""
    proc, url = start_module("devstack.tscompile", tmp_dir=tmp_path_factory.mktemp("tsc"))
    try:
        yield url
    finally:
        proc.terminate()
        proc.wait(15)
