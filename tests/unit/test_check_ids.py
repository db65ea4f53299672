"""A check is named by its contract module's constant everywhere else (``client_run.SERVER_STARTED``, not
``"server started"``): a renamed check then fails at import instead of silently matching nothing.

The walk looks at the code that ships (``contracts``, ``fake_server``, ``harness``, ``conformance``; not the
tests, which assert on the names a user reads) for a (contract, check) pair restated as data: two string
literals side by side that name a declared check (in a tuple, list, set or a call's arguments, as
``("client", "deadline")`` or ``Check(..., "fuzz", "example played", ...)``), or a collection of two or more
literals that are all checks of one contract. Prose that mentions a check (a message, a docstring) is not data
and is not flagged. A contract's own module (its ``NAME`` and its registry import) spells its checks freely.
"""

from __future__ import annotations

import ast
import itertools
from collections.abc import Iterator
from pathlib import Path

import pytest
from support import paths

from contracts.checks import client_plan, registry
from harness.fuzz import invariants

REPO = paths.REPO
SHIPPED = ("contracts", "fake_server", "harness", "conformance")
#: (contract, kind) pairs that are ``[[expect.allow]]`` kinds, the scenario file's vocabulary: the schema contract
#: judges the allowance under a check of the same name, so renaming that check is a change of the file format.
ALLOWANCE_KINDS = frozenset({("schema", "server_frames_invalid")})


def known_checks() -> dict[str, frozenset[str]]:
    """Every registered contract -> the check ids it declares (the fuzzer's contract and ``plan followed``
    register when their modules are imported)."""
    assert client_plan.PLAN_FOLLOWED and invariants.NAME
    return {c.name: frozenset(c.rules) for c in registry.contracts()}


def _home_of(tree: ast.Module) -> str | None:
    """The contract a module declares (or adds checks to): a top-level ``NAME = "..."`` in a module that imports
    the registry."""
    imports_registry = any(
        isinstance(node, ast.ImportFrom) and node.module == "contracts.checks.registry" for node in tree.body
    )
    for node in tree.body:
        if (
            imports_registry
            and isinstance(node, ast.Assign)
            and [getattr(t, "id", None) for t in node.targets] == ["NAME"]
            and isinstance(node.value, ast.Constant)
            and isinstance(node.value.value, str)
        ):
            return node.value.value
    return None


def _sequences(tree: ast.AST) -> Iterator[tuple[int, list[ast.expr]]]:
    for node in ast.walk(tree):
        if isinstance(node, ast.Tuple | ast.List | ast.Set):
            yield node.lineno, node.elts
        elif isinstance(node, ast.Call):
            yield node.lineno, node.args


def _text(node: ast.expr) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def restated(source: str, checks: dict[str, frozenset[str]]) -> list[tuple[int, str]]:
    """(line, what) for each (contract, check) pair ``source`` restates as literals outside its contract's module."""
    tree = ast.parse(source)
    home = _home_of(tree)
    found = []
    for line, elts in _sequences(tree):
        texts = [_text(e) for e in elts]
        for a, b in itertools.pairwise(texts):
            if a in checks and a != home and b in checks[a] and (a, b) not in ALLOWANCE_KINDS:
                found.append((line, f"({a!r}, {b!r})"))
        if len(texts) >= 2 and all(t is not None for t in texts):
            owners = [c for c, names in checks.items() if c != home and all(t in names for t in texts)]
            if owners:
                found.append((line, f"{owners[0]} checks {texts!r}"))
    return found


def shipped_files() -> Iterator[Path]:
    for package in SHIPPED:
        for path in sorted((REPO / package).rglob("*.py")):
            if not (path.name.startswith("test_") or path.name == "conftest.py"):
                yield path


def test_no_check_id_restated_outside_its_contract() -> None:
    checks = known_checks()
    found = [
        f"{path.relative_to(REPO)}:{line}: {what}"
        for path in shipped_files()
        for line, what in restated(path.read_text(encoding="utf-8"), checks)
    ]
    assert found == [], "check ids spelled as literals outside their contract module:\n" + "\n".join(found)


_CHECKS = {"client": frozenset({"deadline", "server started", "recording"}), "fuzz": frozenset({"example played"})}


@pytest.mark.parametrize(
    "source",
    [
        'KEPT = {("client", "deadline")}\n',
        'def f(c):\n    return (c.contract, c.name) == ("client", "server started")\n',
        'def f(s, t):\n    return Check(s, t, "fuzz", "example played", "fail", "why")\n',
        'SESSION = ("server started", "deadline")\n',
    ],
)
def test_a_planted_check_id_is_found(source: str) -> None:
    assert restated(source, _CHECKS), source


@pytest.mark.parametrize(
    "source",
    [
        'WHY = "not judged: the client never started a server (client / server started)"\n',
        'def f():\n    """Judged: ``deadline``, ``server started``."""\n',
        'KEPT = {(client.NAME, client.DEADLINE)}\n',
        'X = ("client", "reported")\nY = ("deadline", "other")\n',
        # the contract's own module
        'from contracts.checks.registry import Contract\nNAME = "client"\nS = ("server started", "deadline")\n',
    ],
)
def test_prose_names_and_the_home_module_are_fine(source: str) -> None:
    assert restated(source, _CHECKS) == [], source
