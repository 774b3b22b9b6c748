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


# Local stacks a run may start: one per pytest-xdist worker, at most this many (decision 361).
STACKS = 2


def pytest_configure(config: pytest.Config) -> None:
    # pgserver's warning of an unset XDG_RUNTIME_DIR (ledger/__init__.py says why it is harmless)
    config.addinivalue_line("filterwarnings", "ignore:.*XDG_RUNTIME_DIR.*")


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook, which reads the groups into node ids
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Groups for pytest-xdist's ``--dist loadgroup`` (scripts/test): a module's tests stay on one
    worker, so a module fixture (a Chromium, a capture server) starts once. The local stack's
    modules are split into ``min(STACKS, workers)`` groups, ``local_stack-1``, ``local_stack-2``
    (each worker that runs one starts its own stack); they are queued first, one per worker, the
    other groups after them, most tests first (scripts/test passes ``--no-loadscope-reorder``, so
    this order is the queue's). An explicit ``xdist_group`` mark wins. Without xdist the marks do
    nothing."""
    on_stack = [item for item in items if "local_stack" in getattr(item, "fixturenames", ())]
    for item in on_stack:
        item.add_marker(pytest.mark.local_stack)
    workers = getattr(config, "workerinput", {}).get("workercount", 0)
    if not config.pluginmanager.hasplugin("xdist") or not workers:
        items.sort(key=lambda item: item.get_closest_marker("local_stack") is None)  # stable
        return
    stack_group = _split_stack_modules([_module(item) for item in on_stack], min(STACKS, workers))
    for item in items:
        if item.get_closest_marker("xdist_group") is None:
            group = stack_group.get(_module(item), _module(item)) if item in on_stack else _module(item)
            item.add_marker(pytest.mark.xdist_group(group))
    group_of = [item.get_closest_marker("xdist_group").args[0] for item in items]
    size: dict[str, int] = {}
    for group in group_of:
        size[group] = size.get(group, 0) + 1
    stack_groups = sorted(set(stack_group.values()))
    rank = {g: (0, stack_groups.index(g)) if g in stack_groups else (1, -size[g]) for g in size}
    order = sorted(range(len(items)), key=lambda i: (rank[group_of[i]], i))
    items[:] = [items[i] for i in order]


def _module(item: pytest.Item) -> str:
    return item.nodeid.split("::")[0]


def _split_stack_modules(modules: list[str], groups: int) -> dict[str, str]:
    """``{module: "local_stack-N"}``: the stack modules (one per test, in collection order) dealt
    out in ``groups`` groups of about equal test counts, each module whole, a module's first test's
    order kept within its group. Counts stand for cost: most stack modules run a crawl or two a test."""
    count: dict[str, int] = {}
    for module in modules:
        count[module] = count.get(module, 0) + 1
    load = [0] * max(groups, 1)
    out: dict[str, str] = {}
    for module in sorted(count, key=lambda m: -count[m]):  # largest first: an even split
        n = load.index(min(load))
        load[n] += count[module]
        out[module] = f"local_stack-{n + 1}"
    return out


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
