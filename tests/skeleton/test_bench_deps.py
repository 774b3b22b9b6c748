"""Every benchmark runs from a fresh clone after the README's commands (issue 30 item 7).

A fresh clone's ``scripts/bootstrap`` installs the base, ``dev`` and ``test`` pins; ``waggle bench``
installs the pins of :data:`waggle.cli.BENCH_EXTRAS` (``bench`` adds the profilers) before it runs
``python -m tests.bench``. Read statically (ast) from ``tests/bench/*.py`` and the ``tests.*``
modules they import, at any depth:

* every third-party module imported (at module level or inside a function) belongs to a
  distribution pinned ``==`` in what ``waggle bench`` installs;
* every program run from the venv's ``bin`` (``BIN / "name"``) is in :data:`tests.bench.infra.TOOLS`,
  whose distribution is pinned there too (or is this project's own console script);
* every absolute path to a system program (``"/usr/bin/…"``) is one ``scripts/bootstrap`` installs.

And :func:`waggle.cli.missing_pins` — what ``waggle bench`` decides to install from — reports a
pin absent or at another version, and nothing for a pin installed as pinned.
"""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from functools import cache
from importlib.metadata import packages_distributions, version
from pathlib import Path

from tests.bench.infra import TOOLS
from waggle.cli import BENCH_EXTRAS, bench_pins, missing_pins

REPO = Path(__file__).resolve().parents[2]
OURS = {"tests", "ledger", "devstack", "waggle", "waggle_capture", "f"}


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _module_file(dotted: str) -> Path | None:
    base = REPO.joinpath(*dotted.split("."))
    for cand in (base.with_suffix(".py"), base / "__init__.py"):
        if cand.is_file():
            return cand
    return None


@cache
def bench_sources() -> tuple[Path, ...]:
    """tests/bench/*.py and every ``tests.*`` module they import, transitively."""
    todo = sorted((REPO / "tests" / "bench").glob("*.py"))
    seen: set[Path] = set()
    while todo:
        path = todo.pop()
        if path in seen:
            continue
        seen.add(path)
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else (
                [node.module] + [f"{node.module}.{a.name}" for a in node.names]
                if isinstance(node, ast.ImportFrom) and node.module and not node.level else [])
            for name in names:
                if name.split(".")[0] == "tests" and (f := _module_file(name)):
                    todo.append(f)
    return tuple(sorted(seen))


def third_party_imports() -> dict[str, list[str]]:
    """``{top-level module: [files importing it]}`` outside the standard library and this project."""
    out: dict[str, list[str]] = {}
    for path in bench_sources():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                tops = [a.name.split(".")[0] for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                tops = [node.module.split(".")[0]]
            else:
                continue
            for top in tops:
                if top not in sys.stdlib_module_names and top not in OURS and top != "__future__":
                    out.setdefault(top, []).append(str(path.relative_to(REPO)))
    return out


def distribution_of(module: str, pins: dict[str, str]) -> str | None:
    """The pinned distribution that provides ``module``: from the installed metadata, else a pin of
    the same name (a ``bench`` pin is not installed before ``waggle bench`` first runs)."""
    pinned = {_norm(p): p for p in pins}
    for dist in packages_distributions().get(module, []):
        if _norm(dist) in pinned:
            return pinned[_norm(dist)]
    return pinned.get(_norm(module))


def test_the_sources_read_include_the_benchmarks_and_what_they_import():
    names = {str(p.relative_to(REPO)) for p in bench_sources()}
    assert "tests/bench/politeness.py" in names and "tests/bench/recrawl.py" in names
    assert "tests/e2e/test_revisit_recrawl.py" in names  # through recrawl.py's import inside its function
    assert "tests/fixtures/stack.py" in names


def test_every_module_a_benchmark_imports_is_pinned_in_what_waggle_bench_installs():
    pins = bench_pins()
    imports = third_party_imports()
    assert {"httpx", "psycopg", "psutil", "pyinstrument"} <= set(imports)  # the scan sees them
    unpinned = {m: files for m, files in imports.items() if distribution_of(m, pins) is None}
    assert not unpinned, f"imported by a benchmark but not pinned in pyproject's base or {BENCH_EXTRAS}: {unpinned}"


def test_the_profilers_are_in_the_bench_extra():
    extra = {_norm(re.split(r"[=\[<>; ]", r)[0]) for r in
             tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]["bench"]}
    assert {"pyinstrument", "py-spy", "psutil"} <= extra
    assert "bench" in BENCH_EXTRAS


def _bin_tools() -> dict[str, list[str]]:
    """``BIN / "name"`` in the sources: ``{name: [files]}``."""
    out: dict[str, list[str]] = {}
    for path in bench_sources():
        for node in ast.walk(ast.parse(path.read_text())):
            if (isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div) and isinstance(node.left, ast.Name)
                    and node.left.id == "BIN" and isinstance(node.right, ast.Constant)):
                out.setdefault(node.right.value, []).append(str(path.relative_to(REPO)))
    return out


def test_every_program_a_benchmark_runs_from_the_venv_is_declared_and_pinned():
    pins = {_norm(p) for p in bench_pins()}
    scripts = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]
    used = _bin_tools()
    assert {"py-spy", "waggle"} <= set(used)
    undeclared = {t: f for t, f in used.items() if t not in TOOLS}
    assert not undeclared, f"run from the venv's bin but not in tests.bench.infra.TOOLS: {undeclared}"
    for tool, dist in TOOLS.items():
        assert tool in scripts or _norm(dist) in pins, f"{tool} comes from {dist}, not pinned in {BENCH_EXTRAS}"


def test_every_system_program_a_benchmark_runs_is_installed_by_bootstrap():
    bootstrap = (REPO / "scripts" / "bootstrap").read_text()
    paths = {m for p in bench_sources() for m in re.findall(r"[\"'](/usr/bin/[\w.-]+)[\"']", p.read_text())}
    for path in paths:
        assert path in bootstrap, f"{path} is run by a benchmark but scripts/bootstrap does not install it"


def test_missing_pins_names_what_is_absent_or_at_another_version():
    have = version("httpx")
    assert missing_pins({"httpx": have}) == []
    assert missing_pins({"httpx": have + ".999"}) == [f"httpx=={have}.999 (have {have})"]
    assert missing_pins({"no-such-distribution-waggle": "1.0"}) == ["no-such-distribution-waggle==1.0 (missing)"]


def test_bench_pins_reads_base_and_extras(tmp_path):
    toml = tmp_path / "pyproject.toml"
    toml.write_text('[project]\ndependencies = ["a==1", "b[x]==2 ; python_version>\'3\'"]\n'
                    '[project.optional-dependencies]\ndev = ["c==3"]\ntest = ["d>=4"]\nbench = ["e==5"]\nother = ["f==6"]\n')
    assert bench_pins(toml) == {"a": "1", "b": "2", "c": "3", "e": "5"}
