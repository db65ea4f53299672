"""The layers point one way: contracts <- fake_server <- harness <- conformance.

Every import in the syntax tree counts: module level, inside functions, under ``TYPE_CHECKING``, and
literal ``importlib.import_module("...")`` calls. A planted upward import must fail this test.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
#: Lower rank = lower layer. A module may import only packages of its own rank or lower.
LAYERS = {"contracts": 0, "fake_server": 1, "harness": 2, "conformance": 3}


def imported_modules(tree: ast.AST) -> Iterator[tuple[int, str]]:
    """(line, dotted module name) of every import the tree can make, relative imports resolved later."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            if node.level == 0 and node.module:
                yield node.lineno, node.module
        elif (
            isinstance(node, ast.Call)
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
            and (
                (isinstance(node.func, ast.Attribute) and node.func.attr == "import_module")
                or (isinstance(node.func, ast.Name) and node.func.id in {"import_module", "__import__"})
            )
        ):
            yield node.lineno, node.args[0].value


def upward_imports(source: str, package: str) -> list[tuple[int, str]]:
    """The imports of ``source`` (a module of ``package``) that reach a higher layer."""
    rank = LAYERS[package]
    bad = []
    for line, module in imported_modules(ast.parse(source)):
        top = module.split(".", 1)[0]
        if top in LAYERS and LAYERS[top] > rank:
            bad.append((line, module))
    return bad


def package_files() -> Iterator[tuple[str, Path]]:
    for package in LAYERS:
        for path in sorted((REPO / package).rglob("*.py")):
            yield package, path


def test_no_upward_import() -> None:
    found = [
        f"{path.relative_to(REPO)}:{line} imports {module}"
        for package, path in package_files()
        for line, module in upward_imports(path.read_text(encoding="utf-8"), package)
    ]
    assert found == [], "upward imports:\n" + "\n".join(found)


def test_no_package_circle() -> None:
    edges: set[tuple[str, str]] = set()
    for package, path in package_files():
        for _, module in imported_modules(ast.parse(path.read_text(encoding="utf-8"))):
            top = module.split(".", 1)[0]
            if top in LAYERS and top != package:
                edges.add((package, top))
    circles = sorted((a, b) for a, b in edges if (b, a) in edges)
    assert circles == [], f"packages importing each other: {circles}"


def _runtime_imports(tree: ast.AST, modules: set[str]) -> set[str]:
    """Modules of ours a module imports when it runs (``TYPE_CHECKING`` blocks are annotations only)."""
    found: set[str] = set()
    stack: list[ast.AST] = [tree]
    while stack:
        node = stack.pop()
        for child in ast.iter_child_nodes(node):
            test = child.test if isinstance(child, ast.If) else None
            if test is not None and getattr(test, "id", getattr(test, "attr", None)) == "TYPE_CHECKING":
                stack.extend(child.orelse)
            else:
                stack.append(child)
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            subs = {f"{node.module}.{a.name}" for a in node.names}
            # `from pkg import submodule` needs the submodule, not the package's __init__ around it
            found |= subs if subs <= modules else {node.module} | subs
    return found & modules


def test_no_module_import_cycle_at_run_time() -> None:
    files = {
        ".".join(path.relative_to(REPO).with_suffix("").parts).removesuffix(".__init__"): path
        for _, path in package_files()
    }
    graph = {m: _runtime_imports(ast.parse(p.read_text(encoding="utf-8")), set(files)) - {m} for m, p in files.items()}
    # Iterative depth-first search for a back edge; the first cycle found is reported.
    state: dict[str, int] = {}
    for root in sorted(graph):
        if root in state:
            continue
        path: list[str] = []
        stack: list[tuple[str, list[str]]] = [(root, sorted(graph[root]))]
        state[root] = 1
        path.append(root)
        while stack:
            node, todo = stack[-1]
            if not todo:
                stack.pop()
                path.pop()
                state[node] = 2
                continue
            nxt = todo.pop()
            if state.get(nxt) == 1:
                cycle = [*path[path.index(nxt) :], nxt]
                pytest.fail("modules importing each other at run time: " + " -> ".join(cycle))
            if nxt not in state:
                state[nxt] = 1
                path.append(nxt)
                stack.append((nxt, sorted(graph[nxt])))


@pytest.mark.parametrize(
    ("package", "source"),
    [
        ("contracts", "from harness.runner import run_many\n"),
        ("contracts", "def f():\n    import fake_server.engine\n"),
        ("fake_server", "if TYPE_CHECKING:\n    from harness.client import Session\n"),
        ("fake_server", "import importlib\nm = importlib.import_module('harness.cli')\n"),
        ("harness", "from conformance.plugin import pytest_addoption\n"),
    ],
)
def test_planted_upward_import_is_found(package: str, source: str) -> None:
    assert upward_imports(source, package), source


def test_downward_and_sibling_imports_are_fine() -> None:
    source = "from contracts.wire import LineDecoder\nimport fake_server.engine\nfrom harness import runner\n"
    assert upward_imports(source, "harness") == []


def test_shared_data_is_read_from_the_repo_only() -> None:
    """Code, tests, benches and build files never read ../shared or an absolute machine path."""
    import re
    import subprocess

    # The pattern is written in pieces so that the same grep, run over the repository by hand or by a hook,
    # does not find this guard itself.
    pattern = re.compile(r"""(\.\./|["/])""" + "sha" + r"""red["/]|/""" + "wo" + "rk/")
    tracked = subprocess.run(
        ["git", "ls-files", "*.py", "Makefile", ".ci/*", "*.toml"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
        timeout=30,
    ).stdout.split()
    me = Path(__file__).resolve()
    hits = [
        f"{name}:{n}"
        for name in tracked
        if (REPO / name).resolve() != me and (REPO / name).is_file()
        for n, line in enumerate((REPO / name).read_text(encoding="utf-8", errors="replace").splitlines(), 1)
        if pattern.search(line)
    ]
    assert hits == [], "reads outside the repository:\n" + "\n".join(hits)
