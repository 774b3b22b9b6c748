"""The import graph of the project's own modules, read statically (ast) from every file.

Two rules: the product (``ledger/`` and the capture server ``waggle_capture/``) never imports the
local stack (``devstack/``) — the ``waggle`` entry module (``waggle/cli.py``) is where they meet —
and no module imports itself
back through others (a cycle), counting imports inside functions too: a deferred import only
hides a cycle until the day someone moves it to the top.
"""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PACKAGES = ("ledger", "devstack", "waggle", "waggle_capture", "f")
PRODUCT = ("ledger", "waggle_capture")  # each installs and runs without devstack/ (its own image)


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def project_modules() -> dict[str, Path]:
    """``{dotted name: file}`` of every Python module under the project's packages."""
    found = {}
    for pkg in PACKAGES:
        for path in (REPO / pkg).rglob("*.py"):
            if "node_modules" not in path.parts:
                found[_module_name(path)] = path
    return found


def _resolve(name: str, modules: dict[str, Path]) -> str | None:
    """The deepest project module that ``name`` (a module or a module's attribute) names."""
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def imports_of(module: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """Project modules that ``module`` imports anywhere in its file (top level or deferred)."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            names = [f"{base}.{alias.name}" for alias in node.names] + [base]
        else:
            continue
        for name in names:
            target = _resolve(name, modules)
            if target and target != module:
                out.add(target)
    return out


def import_graph() -> dict[str, set[str]]:
    modules = project_modules()
    return {name: imports_of(name, path, modules) for name, path in modules.items()}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle as ``[a, b, …, a]``, or None (iterative DFS, white/grey/black)."""
    state: dict[str, int] = {}
    for start in sorted(graph):
        if state.get(start):
            continue
        stack = [(start, iter(sorted(graph[start])))]
        path = [start]
        state[start] = 1
        while stack:
            node, children = stack[-1]
            child = next(children, None)
            if child is None:
                state[node] = 2
                stack.pop()
                path.pop()
            elif state.get(child) == 1:
                return path[path.index(child):] + [child]
            elif not state.get(child):
                state[child] = 1
                path.append(child)
                stack.append((child, iter(sorted(graph.get(child, ())))))
    return None


def test_the_product_never_imports_the_local_stack() -> None:
    graph = import_graph()
    offending = sorted(f"{src} imports {dst}" for src, dsts in graph.items() if src.split(".")[0] in PRODUCT
                       for dst in dsts if dst.split(".")[0] == "devstack")
    assert not offending, ("ledger/ and waggle_capture/ must not import devstack/ (mount dev commands in "
                           "waggle/cli.py):\n" + "\n".join(offending))


def test_no_import_cycles_among_the_projects_modules() -> None:
    cycle = find_cycle(import_graph())
    assert cycle is None, "import cycle: " + " → ".join(cycle)


def test_the_checks_see_what_they_must() -> None:
    """The graph is read right: the known edges exist, and a planted cycle is found."""
    graph = import_graph()
    assert "ledger.cli" in graph["waggle.cli"] and "devstack.cli" in graph["waggle.cli"]
    assert "waggle_capture.cli" in graph["waggle.cli"]
    assert "ledger.hostguard" in graph["waggle_capture.proxy"]  # the capture server's modules are read
    assert "waggle_capture.serving" in graph["devstack.serving"]
    assert "f.waggle.common" in graph["f.waggle.plan_level"]
    assert "f.waggle.hostguard" in graph["f.waggle.plan_level"]  # a deferred import counts
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_the_capture_server_lives_in_waggle_capture_only() -> None:
    """Decision 251 moved ``devstack/capture`` to ``waggle_capture``: a file merged in at the old
    place, or code naming the old module, would run nowhere (or run a stale copy)."""
    old = REPO / "devstack" / "capture"
    assert not (old.exists() and list(old.rglob("*.py"))), f"move {old}/*.py to waggle_capture/"
    stale = sorted(f"{path.relative_to(REPO)}" for path in project_modules().values()
                   if "devstack.capture" in path.read_text())
    stale += sorted(str(p.relative_to(REPO)) for p in (REPO / "tests").rglob("*.py")
                    if p != Path(__file__) and "devstack.capture" in p.read_text())
    assert not stale, "these name devstack.capture (now waggle_capture): " + ", ".join(stale)
