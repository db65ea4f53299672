"""One root for the project's errors, one table from their families to exit codes (:mod:`contracts.exitcodes`).

The walk reads every module that ships and follows each exception class's bases by name through the project's
classes: every one reaches a family of :class:`~contracts.exitcodes.HarnessError`. A script that imports
nothing of the project (it runs under another interpreter, or as ``python -I -S``) cannot, and is left out.
"""

from __future__ import annotations

import ast
import builtins
from pathlib import Path

import pytest
from support import paths

from contracts import exitcodes
from contracts.exitcodes import EXIT_CODES, HarnessError, exit_code

REPO = paths.REPO
SHIPPED = ("contracts", "fake_server", "harness", "conformance")
FAMILIES = {"UsageError", "InvalidInput", "Finding", "InternalError"}
_BUILTIN_ERRORS = {
    name
    for name in dir(builtins)
    if isinstance(getattr(builtins, name), type) and issubclass(getattr(builtins, name), BaseException)
} | {"JSONDecodeError"}


def _base_name(node: ast.expr) -> str:
    return node.attr if isinstance(node, ast.Attribute) else ast.unparse(node)


def _imports_the_project(tree: ast.Module) -> bool:
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module.split(".", 1)[0] in SHIPPED:
                return True
        elif isinstance(node, ast.ImportFrom) and node.level > 0:
            return True
        elif isinstance(node, ast.Import) and any(a.name.split(".", 1)[0] in SHIPPED for a in node.names):
            return True
    return False


def exception_classes(root: Path) -> dict[str, tuple[str, list[str]]]:
    """``file:Class`` -> (class name, its bases by name) for every class of the shipped packages (scripts that
    import nothing of the project left out)."""
    found = {}
    for package in SHIPPED:
        for path in sorted((root / package).rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            if not _imports_the_project(tree) and path.name != "exitcodes.py":
                continue
            for node in ast.walk(tree):
                if isinstance(node, ast.ClassDef):
                    where = f"{path.relative_to(root)}:{node.lineno}:{node.name}"
                    found[where] = (node.name, [_base_name(b) for b in node.bases])
    return found


def rootless(classes: dict[str, tuple[str, list[str]]]) -> list[str]:
    """The exception classes among ``classes`` whose bases never reach a family of the root."""
    bases_of: dict[str, list[list[str]]] = {}
    for name, bases in classes.values():
        bases_of.setdefault(name, []).append(bases)

    def reaches(name: str, want: set[str], seen: frozenset[str] = frozenset()) -> bool:
        if name in want:
            return True
        if name in seen:
            return False
        return any(reaches(b, want, seen | {name}) for bases in bases_of.get(name, []) for b in bases)

    errors = FAMILIES | _BUILTIN_ERRORS
    return sorted(
        where
        for where, (name, bases) in classes.items()
        if name not in FAMILIES | {"HarnessError"}
        and any(reaches(b, errors) for b in bases)
        and not any(reaches(b, FAMILIES) for b in bases)
    )


def test_every_exception_class_derives_from_the_root() -> None:
    classes = exception_classes(REPO)
    assert len([w for w in classes if "Error" in w]) > 20  # the walk saw the project
    found = rootless(classes)
    assert found == [], "exception classes outside the error root (contracts.exitcodes):\n" + "\n".join(found)


@pytest.mark.parametrize(
    "source",
    [
        "class Broken(ValueError):\n    pass\n",
        "class Mine(Exception):\n    pass\nclass Child(Mine):\n    pass\n",
        "import json\nclass Deep(json.JSONDecodeError):\n    pass\n",
    ],
)
def test_a_planted_rootless_exception_is_found(tmp_path: Path, source: str) -> None:
    (tmp_path / "harness").mkdir()
    (tmp_path / "harness" / "x.py").write_text("from contracts import exitcodes\n" + source, encoding="utf-8")
    assert rootless(exception_classes(tmp_path))


def test_rooted_exceptions_and_plain_classes_are_fine(tmp_path: Path) -> None:
    (tmp_path / "harness").mkdir()
    source = (
        "from contracts.exitcodes import InvalidInput, UsageError\n"
        "class A(InvalidInput, ValueError):\n    pass\n"
        "class B(A):\n    pass\n"
        "class C(UsageError):\n    pass\n"
        "class D:\n    pass\n"
    )
    (tmp_path / "harness" / "x.py").write_text(source, encoding="utf-8")
    assert rootless(exception_classes(tmp_path)) == []


def test_the_exit_codes_are_one_table() -> None:
    """Each family has one status, in :data:`EXIT_CODES`, and :func:`exit_code` reads it; the root's families
    are exactly the table's keys."""
    families = {c for c in vars(exitcodes).values() if isinstance(c, type) and c.__base__ is HarnessError}
    assert set(EXIT_CODES) == families
    assert {c.__name__ for c in families} == FAMILIES
    for family, code in EXIT_CODES.items():
        child = type("Child", (family, ValueError), {})
        assert exit_code(child("x")) == code
    assert exit_code(exitcodes.UsageError("x")) == exitcodes.USAGE == 3
    assert exit_code(RuntimeError("not ours")) == exitcodes.FAILED


def test_no_command_line_spells_a_status_as_a_number() -> None:
    """A command's ``main`` returns the table's names (``USAGE``), never a bare 2 or 3 (the relays did). The
    example clients of ``conformance/clients`` are programs of their own, with their own statuses."""
    found = []
    for package in ("contracts", "fake_server", "harness"):
        for path in sorted((REPO / package).rglob("*.py")):
            for fn in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if not (isinstance(fn, ast.FunctionDef) and fn.name in {"main", "_main"}):
                    continue
                for node in ast.walk(fn):
                    value = node.value if isinstance(node, ast.Return) else None
                    if isinstance(value, ast.Constant) and value.value in (2, 3):
                        found.append(f"{path.relative_to(REPO)}:{node.lineno}: return {value.value}")
    assert found == [], "\n".join(found)


def test_the_relays_usage_error_is_the_projects() -> None:
    """The relays (the shim's ``real_relay``, the bare ``relay``) end a usage error with the project's 3."""
    from harness.outside import real_relay, relay

    assert relay.main(["--nonsense"]) == exitcodes.USAGE
    assert real_relay.main([]) == exitcodes.USAGE
