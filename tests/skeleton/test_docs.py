"""The docs a newcomer reads stay short and name tests that exist (issue 30).

README.md is at most 200 lines. Every test that docs/politeness.md, docs/failures.md and
docs/decisions/*.md name — ``tests/…/test_x.py``, ``tests/…/test_x.py::test_y`` (also
``::Class::test_y``) — is a real file, and each name after ``::`` is defined in it (``def`` or
``class``, at any depth). A bare ``test_name`` in backticks must be defined somewhere under
``tests/``. Read statically (ast), nothing is imported.
"""

from __future__ import annotations

import ast
import re
from functools import cache
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
README_MAX_LINES = 200
# A path, then any ::names; a name broken over a line ("::\n  test_x") is joined first.
TEST_REF = re.compile(r"(tests/[\w/.-]+?\.py)((?:::\w+)*)")
BARE_TEST = re.compile(r"`(test_\w+)`")


def named_docs() -> list[Path]:
    docs = [REPO / "docs" / "politeness.md", REPO / "docs" / "failures.md"]
    return docs + sorted((REPO / "docs" / "decisions").glob("*.md"))


@cache
def defined_names(path: Path) -> frozenset[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    kinds = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
    return frozenset(node.name for node in ast.walk(tree) if isinstance(node, kinds))


@cache
def every_test_name() -> frozenset[str]:
    names: set[str] = set()
    for path in (REPO / "tests").rglob("*.py"):
        names |= defined_names(path)
    return frozenset(names)


def missing_tests(text: str) -> list[str]:
    """What ``text`` names that does not exist, as ``ref: why`` strings (empty: all real)."""
    text = re.sub(r"::\s*\n\s*", "::", text)
    missing = []
    for path_text, names in TEST_REF.findall(text):
        path = REPO / path_text
        if not path.is_file():
            missing.append(f"{path_text}: no such file")
            continue
        for name in filter(None, names.split("::")):
            if name not in defined_names(path):
                missing.append(f"{path_text}::{name}: not defined in the file")
    for name in BARE_TEST.findall(text):
        if name not in every_test_name():
            missing.append(f"{name}: defined nowhere under tests/")
    return missing


def test_the_readme_is_at_most_200_lines() -> None:
    lines = (REPO / "README.md").read_text().splitlines()
    assert len(lines) <= README_MAX_LINES, f"README.md has {len(lines)} lines"


def test_politeness_and_failures_are_numbered_rules_each_naming_a_test() -> None:
    for name in ("politeness.md", "failures.md"):
        text = (REPO / "docs" / name).read_text()
        rules = re.split(r"^\d+\. ", text, flags=re.M)[1:]
        assert len(rules) >= 5, f"docs/{name}: no numbered list of rules"
        for number, rule in enumerate(rules, 1):
            assert TEST_REF.search(rule), f"docs/{name} rule {number} names no test"


@pytest.mark.parametrize("doc", named_docs(), ids=lambda p: str(p.relative_to(REPO)))
def test_every_test_a_doc_names_exists(doc: Path) -> None:
    assert missing_tests(doc.read_text()) == []


def test_every_decision_names_a_test_and_is_in_the_index() -> None:
    index = (REPO / "docs" / "decisions" / "README.md").read_text()
    for path in sorted((REPO / "docs" / "decisions").glob("[0-9][0-9][0-9]-*.md")):
        text = path.read_text()
        assert "## Tests that hold it" in text, f"{path.name}: no 'Tests that hold it' section"
        assert f"]({path.name})" in index, f"{path.name}: not in docs/decisions/README.md"


def test_politeness_counts_the_requests_a_redirect_loop_sends() -> None:
    """docs/politeness.md says what the site receives when a same-host redirect chain is ended: the
    first request and every hop up to the one that ends it (waggle_capture/redirectloop.py)."""
    from waggle_capture.redirectloop import MAX_SAME_HOST_HOPS

    hops = MAX_SAME_HOST_HOPS + 1  # the hop that ends the chain was already sent
    text = " ".join((REPO / "docs" / "politeness.md").read_text().split())
    assert f"when it takes a {hops}th hop to the same host: the site receives {hops + 1} requests" in text
    assert f"the first and {hops} redirected ones" in text
    assert f"after {MAX_SAME_HOST_HOPS} hops" not in text


def test_the_checker_finds_what_does_not_exist() -> None:
    """The checks can fail: a made-up file, a made-up function and a made-up bare name."""
    text = ("`tests/skeleton/test_docs.py::test_the_readme_is_at_most_200_lines` "
            "`tests/nowhere/test_x.py` `tests/skeleton/test_docs.py::test_made_up` `test_made_up_too`")
    assert missing_tests(text) == [
        "tests/nowhere/test_x.py: no such file",
        "tests/skeleton/test_docs.py::test_made_up: not defined in the file",
        "test_made_up_too: defined nowhere under tests/",
    ]
