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


@pytest.fixture(scope="session")
def test_site():
    """The local test site (tests/devstack/site.py) on 127.0.0.1."""
    from tests.devstack.site import TestSite

    site = TestSite().start()
    try:
        yield site
    finally:
        site.stop()


# Short settle limits keep each capture around a second; behaviour is the same as the defaults.
FAST_SETTLE = '{"minMs": 100, "maxMs": 2000, "quietMs": 200, "networkConcurrency": 0}'


@pytest.fixture(scope="session")
def capture_server(s3_server, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """One ``python -m waggle_capture --allow-private`` (one Chromium) writing to ``s3_server``;
    fault knobs settable through ``PUT /faults``."""
    proc, url = start_module(
        "waggle_capture", "--allow-private", "--s3-endpoint", s3_server.endpoint, "--faults-endpoint",
        "--settle", FAST_SETTLE, tmp_dir=tmp_path_factory.mktemp("capture"))
    try:
        yield url
    finally:
        proc.terminate()
        proc.wait(30)
