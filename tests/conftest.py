"""Fixtures shared by every test area: a real Postgres and fresh databases in it.

Postgres is embedded (pgserver) unless ``WAGGLE_TEST_DATABASE_URL`` names a server whose
user may create databases. Area fixtures live in ``tests/<area>/conftest.py``.
"""

from __future__ import annotations

import itertools
import os
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import psycopg
import pytest

pytest_plugins = [
    "tests.fixtures.s3",
    "tests.fixtures.fga",
    "tests.fixtures.ledger",
    "tests.fixtures.stack",
    "tests.fixtures.browser",
    "tests.fixtures.signing",
    "tests.fixtures.loopback",
]


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook, which reads the groups into node ids
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Groups for pytest-xdist's ``--dist loadgroup`` (scripts/test): a module's tests stay on one
    worker, so a module fixture (a Chromium, a capture server) starts once; every test of the
    local stack shares one group, so a run starts one stack, not one per worker. That group is the
    longest, so it is queued first and the other worker takes everything else meanwhile. An explicit ``xdist_group`` mark wins. Without
    xdist the marks do nothing."""
    for item in items:
        if "local_stack" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.local_stack)
        if config.pluginmanager.hasplugin("xdist") and item.get_closest_marker("xdist_group") is None:
            group = "local_stack" if "local_stack" in getattr(item, "fixturenames", ()) else item.nodeid.split("::")[0]
            item.add_marker(pytest.mark.xdist_group(group))
    items.sort(key=lambda item: item.get_closest_marker("local_stack") is None)  # stable


@pytest.fixture(scope="session")
def pg_admin_url() -> Iterator[str]:
    """Connection URL of a Postgres server for the test session (admin database)."""
    given = os.environ.get("WAGGLE_TEST_DATABASE_URL")
    if given:
        yield given
        return
    import shutil
    import tempfile

    import pgserver

    # Not under pytest's basetemp: pytest keeps only the newest three basetemp dirs, so a
    # concurrent pytest session on the same machine would delete a live data directory.
    data = tempfile.mkdtemp(prefix="waggle-test-pg-")
    server = pgserver.get_server(data, cleanup_mode="stop")
    try:
        _no_durability(server.get_uri())
        yield server.get_uri()
    finally:
        server.cleanup()
        shutil.rmtree(data, ignore_errors=True)


def _no_durability(url: str) -> None:
    """Turn off crash safety on the throwaway test cluster: no fsync, no full-page writes, commits
    not waited for. Visible behaviour (isolation, constraints, locks) is unchanged; a database
    clone takes half the time and a commit a third (measured: tests/bench/README.md "Test suite
    time"). Only for the embedded server: a given ``WAGGLE_TEST_DATABASE_URL`` is left alone."""
    with psycopg.connect(url, autocommit=True) as conn:
        for name in ("fsync", "full_page_writes", "synchronous_commit"):
            conn.execute(f"ALTER SYSTEM SET {name} = off")
        conn.execute("SELECT pg_reload_conf()")


@pytest.fixture
def shared_tmp_path() -> Iterator[Path]:
    """A fresh directory for one test outside pytest's basetemp, removed afterwards. For data that
    a process running as another user must reach (pgserver runs Postgres as user ``pgserver``
    under root): any pytest session starting on the machine resets ``/tmp/pytest-of-<user>`` to
    mode 700, which would cut that process off mid-test."""
    import shutil
    import tempfile

    path = Path(tempfile.mkdtemp(prefix="waggle-test-"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


_counter = itertools.count()


def _with_database(url: str, name: str) -> str:
    """``url`` pointing at database ``name`` (works for socket-style pgserver URIs too)."""
    base, _, query = url.partition("?")
    head, _, _ = base.rpartition("/")
    return f"{head}/{name}" + (f"?{query}" if query else "")


@pytest.fixture(scope="session")
def create_database(pg_admin_url: str) -> Callable[..., str]:
    """Factory: ``create_database(template=None)`` → URL of a new, empty (or cloned) database."""

    def make(template: str | None = None) -> str:
        name = f"t_{next(_counter)}_{uuid.uuid4().hex[:8]}"
        with psycopg.connect(pg_admin_url, autocommit=True) as conn:
            tmpl = f" TEMPLATE {template}" if template else ""
            conn.execute(f"CREATE DATABASE {name}{tmpl}")
        return _with_database(pg_admin_url, name)

    return make


@pytest.fixture
def empty_db_url(create_database: Callable[..., str]) -> str:
    """A fresh, empty database for one test."""
    return create_database()
