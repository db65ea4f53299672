"""The cost tables of tests/conftest.py (docs/tests.md) name tests that exist: a renamed or removed test must not
leave an entry that silently marks nothing (and a renamed process test back in the fast set)."""

from __future__ import annotations

import ast
from pathlib import Path

import conftest
import pytest
from support import paths

pytest_plugins = ["pytester"]

TESTS = paths.TESTS


def _defined(module: str) -> set[str]:
    """The test functions and classes' methods and names a module defines or assigns (``runTest`` of a
    hypothesis state machine's TestCase included)."""
    tree = ast.parse(paths.module(module).read_text(encoding="utf-8"))
    names = {n.name for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))}
    if any(isinstance(n, ast.Attribute) and n.attr == "TestCase" for n in ast.walk(tree)):
        names.add("runTest")
    return names


def test_every_test_module_is_in_a_cost_folder() -> None:
    """tests/unit, tests/process or tests/real (docs/tests.md): a module in tests/ itself, or in a folder of its
    own, would say nothing of its cost."""
    strays = sorted(p.relative_to(TESTS).as_posix() for p in TESTS.rglob("test_*.py")
                    if p.parent.name not in paths.FOLDERS or p.parent.parent != TESTS)
    assert strays == []


@pytest.mark.parametrize("table", ["PROCESS_TESTS", "SLOW_TESTS"])
def test_every_test_of_a_table_exists(table: str) -> None:
    missing = []
    for entry in sorted(getattr(conftest, table)):
        module, _, name = entry.partition("::")
        if not paths.module(module).is_file() or name.split("[", 1)[0] not in _defined(module):
            missing.append(entry)
    assert missing == []


def test_a_stale_entry_is_found(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(conftest, "SLOW_TESTS", frozenset({"test_cost_tables::test_renamed_long_ago"}))
    with pytest.raises(AssertionError):
        test_every_test_of_a_table_exists("SLOW_TESTS")


INNER = """
import subprocess

import pytest

pytest_plugins = ["pytester"]


def test_starts_one():
    subprocess.run(["true"], check=True)


def test_starts_none():
    assert sum(range(4)) == 6


@pytest.mark.process
def test_marked():
    subprocess.run(["true"], check=True)
"""


@pytest.mark.process
def test_an_unmarked_test_that_starts_a_process_fails_in_every_run(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(Path(conftest.__file__).read_text(encoding="utf-8"))
    pytester.makepyfile(test_inner=INNER)
    fast = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-p", "no:xdist", "--fast", "-rf")
    fast.assert_outcomes(passed=1, failed=1, deselected=1)
    said = "this test started a process (subprocess.Popen* but is not marked as one*"
    fast.stdout.fnmatch_lines(["*_ test_starts_one _*", said])
    whole = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-p", "no:xdist", "-rf")
    whole.assert_outcomes(passed=2, failed=1)  # CI's whole run fails it too: it would slip into make test-fast
    whole.stdout.fnmatch_lines(["*_ test_starts_one _*", said])
