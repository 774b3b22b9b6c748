"""tests/conftest.py's grouping for ``--dist loadgroup`` (decision 361): the local stack's modules in
two groups queued first, every module whole on one worker, the rest after them, most tests first."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from tests.conftest import STACKS, _split_stack_modules, pytest_collection_modifyitems


class _Item:
    def __init__(self, nodeid: str, stack: bool) -> None:
        self.nodeid = nodeid
        self.fixturenames = ("local_stack",) if stack else ("tmp_path",)
        self.marks: list[pytest.Mark] = []

    def add_marker(self, mark) -> None:
        self.marks.append(mark.mark)

    def get_closest_marker(self, name: str):
        return next((m for m in reversed(self.marks) if m.name == name), None)

    def group(self) -> str:
        return self.get_closest_marker("xdist_group").args[0]


def _config(workers: int | None):
    plugins = SimpleNamespace(hasplugin=lambda name: name == "xdist")
    config = SimpleNamespace(pluginmanager=plugins)
    if workers is not None:
        config.workerinput = {"workercount": workers}
    return config


def _items() -> list[_Item]:
    spec = [("tests/a/test_unit.py", 2, False), ("tests/e2e/test_one.py", 3, True), ("tests/b/test_big.py", 4, False),
            ("tests/e2e/test_two.py", 2, True), ("tests/web/test_page.py", 2, True), ("tests/c/test_small.py", 1, False)]
    return [_Item(f"{path}::test_{i}", stack) for path, n, stack in spec for i in range(n)]


def test_two_stack_groups_of_whole_modules_queued_first_then_the_largest_groups():
    items = _items()
    pytest_collection_modifyitems(_config(3), items)
    groups = [item.group() for item in items]
    assert groups == ["local_stack-1"] * 3 + ["local_stack-2"] * 4 + ["tests/b/test_big.py"] * 4 \
        + ["tests/a/test_unit.py"] * 2 + ["tests/c/test_small.py"]
    by_module = {}
    for item in items:
        by_module.setdefault(item.nodeid.split("::")[0], set()).add(item.group())
    assert all(len(g) == 1 for g in by_module.values())  # a module never spans two groups
    assert [i.nodeid for i in items if i.group() == "local_stack-2"] == [  # collection order kept within a group
        "tests/e2e/test_two.py::test_0", "tests/e2e/test_two.py::test_1",
        "tests/web/test_page.py::test_0", "tests/web/test_page.py::test_1"]
    assert all(i.get_closest_marker("local_stack") for i in items if i.group().startswith("local_stack"))


def test_one_worker_gets_one_stack_group():
    items = _items()
    pytest_collection_modifyitems(_config(1), items)
    assert {item.group() for item in items if "local_stack" in item.fixturenames} == {"local_stack-1"}


def test_without_workers_no_groups_and_the_stack_tests_first():
    items = _items()
    pytest_collection_modifyitems(_config(None), items)
    assert all(item.get_closest_marker("xdist_group") is None for item in items)
    assert ["local_stack" in item.fixturenames for item in items] == [True] * 7 + [False] * 7


def test_the_split_keeps_the_test_counts_close():
    modules = ["m1"] * 10 + ["m2"] * 9 + ["m3"] * 4 + ["m4"] * 3 + ["m5"] * 2 + ["m6"]
    split = _split_stack_modules(modules, STACKS)
    counts = {}
    for module in modules:
        counts[split[module]] = counts.get(split[module], 0) + 1
    assert sorted(counts) == ["local_stack-1", "local_stack-2"]
    assert abs(counts["local_stack-1"] - counts["local_stack-2"]) <= 1


def test_a_real_xdist_run_keeps_a_module_on_one_worker():
    """The grouping reaches xdist's scheduler: our hook must run before xdist's, which copies the
    groups into the node ids it schedules by (an untimely hook left every module spread over all
    workers, and each worker started a local stack of its own)."""
    import re
    import subprocess
    import sys
    from pathlib import Path

    probe = Path(__file__).with_name("groups_probe.py")
    out = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-n", "3", "--dist", "loadgroup",
                          "--no-loadscope-reorder", "-v", str(probe)],
                         capture_output=True, text=True, timeout=300, cwd=Path(__file__).parents[2])
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    workers = re.findall(r"\[(gw\d+)\][^\n]*PASSED[^\n]*test_probe", out.stdout)
    assert len(workers) == 6, out.stdout[-2000:]
    assert len(set(workers)) == 1, f"one module ran on {sorted(set(workers))}"
