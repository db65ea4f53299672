"""The layers point one way: contracts <- fake_server <- harness <- conformance; no circle of modules; no
private name taken from another module.

Every import in the syntax tree counts: module level, inside functions, under ``TYPE_CHECKING``, relative
ones, and literal ``importlib.import_module("...")`` calls. Planted upward imports, circles and private
reach-ins must fail these tests (the ``planted`` tests build such trees). The rules hold for the four
packages, the code that ships; tests may reach into a module's privates to test it.
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from support import paths

REPO = paths.REPO
#: What each package may import besides itself: contracts <- codex_sandbox <- codex_client,
#: contracts <- fake_server, {codex_client, fake_server, codex_sandbox} <- harness <- conformance. The client never
#: sees the fake (it is tested against it from outside), and the fake never sees the sandbox or the client.
ALLOWED: dict[str, frozenset[str]] = {
    "contracts": frozenset(),
    "codex_sandbox": frozenset({"contracts"}),
    "codex_client": frozenset({"contracts", "codex_sandbox"}),
    "fake_server": frozenset({"contracts"}),
    "harness": frozenset({"contracts", "codex_sandbox", "codex_client", "fake_server"}),
    "conformance": frozenset({"contracts", "codex_sandbox", "codex_client", "fake_server", "harness"}),
}
LAYERS = tuple(ALLOWED)


def imported_modules(tree: ast.AST) -> Iterator[tuple[int, str]]:
    """(line, dotted module name) of every import the tree can make, relative imports resolved later."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            if node.level == 0 and node.module:
                yield node.lineno, node.module
        elif (name := _import_module_call(node)) is not None:
            yield node.lineno, name


def _import_module_call(node: ast.AST) -> str | None:
    """The module a literal ``importlib.import_module("...")`` (or ``__import__``) call imports."""
    if (
        isinstance(node, ast.Call)
        and node.args
        and isinstance(node.args[0], ast.Constant)
        and isinstance(node.args[0].value, str)
        and (
            (isinstance(node.func, ast.Attribute) and node.func.attr == "import_module")
            or (isinstance(node.func, ast.Name) and node.func.id in {"import_module", "__import__"})
        )
    ):
        return node.args[0].value
    return None


def upward_imports(source: str, package: str) -> list[tuple[int, str]]:
    """The imports of ``source`` (a module of ``package``) that reach a package it may not import."""
    bad = []
    for line, module in imported_modules(ast.parse(source)):
        top = module.split(".", 1)[0]
        if top in ALLOWED and top != package and top not in ALLOWED[package]:
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
        for _, module in imported_modules(syntax(path)):
            top = module.split(".", 1)[0]
            if top in LAYERS and top != package:
                edges.add((package, top))
    circles = sorted((a, b) for a, b in edges if (b, a) in edges)
    assert circles == [], f"packages importing each other: {circles}"


# --- modules: no circle, no private name taken from another module ---------------------------------


@functools.cache
def syntax(path: Path) -> ast.Module:
    """A file's syntax tree, parsed once for all the tests of this module."""
    return ast.parse(path.read_text(encoding="utf-8"))


def module_files(root: Path) -> dict[str, Path]:
    """Every module of the layered packages under ``root``, by dotted name (a package by its ``__init__``)."""
    return {
        ".".join(path.relative_to(root).with_suffix("").parts).removesuffix(".__init__"): path
        for package in LAYERS
        for path in sorted((root / package).rglob("*.py"))
    }


@dataclass(frozen=True, slots=True)
class Imported:
    """One import: the module of ours it needs (``target``), the name it takes (a module, or an attribute of
    ``target``), and, when it binds a module to a local name, that name (``local``) and module (``binds``)."""

    line: int
    target: str
    name: str
    local: str = ""
    binds: str = ""


def _absolute(node: ast.ImportFrom, module: str, is_package: bool) -> str:
    """The module a ``from`` import names, a relative one resolved against ``module``."""
    if node.level == 0:
        return node.module or ""
    parts = module.split(".") if is_package else module.split(".")[:-1]
    parts = parts[: len(parts) - (node.level - 1)]
    return ".".join([*parts, *([node.module] if node.module else [])])


def imports_of(tree: ast.AST, module: str, is_package: bool, modules: set[str]) -> list[Imported]:
    """Every import of ``tree``: module level, function bodies, ``TYPE_CHECKING`` blocks, relative ones, literal
    ``import_module`` calls. ``from pkg import sub`` needs the submodule; the ``__init__`` of the packages it
    runs on the way is counted by :func:`import_graph`."""
    found: list[Imported] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                top = alias.name.split(".", 1)[0]
                local, binds = (alias.asname, alias.name) if alias.asname else (top, top)
                found.append(Imported(node.lineno, alias.name, alias.name, local, binds))
        elif isinstance(node, ast.ImportFrom):
            source = _absolute(node, module, is_package)
            for alias in node.names:
                sub = f"{source}.{alias.name}"
                local = alias.asname or alias.name
                if sub in modules:
                    found.append(Imported(node.lineno, sub, sub, local, sub))
                else:
                    found.append(Imported(node.lineno, source, alias.name))
        elif (name := _import_module_call(node)) is not None:
            found.append(Imported(node.lineno, name, name))
    return found


def _parsed(root: Path) -> Iterator[tuple[str, Path, bool, list[Imported], ast.AST]]:
    files = module_files(root)
    modules = set(files)
    for name, path in files.items():
        tree = syntax(path)
        is_package = path.name == "__init__.py"
        yield name, path, is_package, imports_of(tree, name, is_package, modules), tree


def _packages_run(target: str, importer: str, modules: set[str]) -> set[str]:
    """The packages whose ``__init__`` importing ``target`` runs, from ``importer``: each enclosing package of
    ``target`` that is not one of ``importer``'s own (a package's own modules run inside its ``__init__``, or
    after it: counting it would make a circle of every package whose ``__init__`` imports its modules)."""
    parts = target.split(".")
    out = set()
    for k in range(1, len(parts)):
        package = ".".join(parts[:k])
        if package in modules and importer != package and not importer.startswith(package + "."):
            out.add(package)
    return out


def import_graph(root: Path) -> dict[str, set[str]]:
    """Module -> the modules of ours it imports, by any import, with the package ``__init__`` each import runs
    (``import contracts.trace.format`` from outside runs ``contracts/trace/__init__.py`` first)."""
    modules = set(module_files(root))
    graph = {}
    for name, _, _, found, _ in _parsed(root):
        targets = {i.target for i in found} & modules
        for target in list(targets):
            targets |= _packages_run(target, name, modules)
        graph[name] = targets - {name}
    return graph


def _postorder(graph: dict[str, set[str]], roots: list[str]) -> list[tuple[str, list[str]]]:
    """Depth-first search without recursion: (root, the nodes it reached first, in post-order) per tree."""
    seen: set[str] = set()
    trees = []
    for root in roots:
        if root in seen:
            continue
        seen.add(root)
        order: list[str] = []
        stack = [(root, iter(sorted(graph.get(root, ()))))]
        while stack:
            node, todo = stack[-1]
            nxt = next((n for n in todo if n not in seen), None)
            if nxt is None:
                stack.pop()
                order.append(node)
            else:
                seen.add(nxt)
                stack.append((nxt, iter(sorted(graph.get(nxt, ())))))
        trees.append((root, order))
    return trees


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The circles of ``graph``: each set of modules that reach each other (Kosaraju), sorted."""
    finished = [node for _, order in _postorder(graph, sorted(graph)) for node in order]
    reverse: dict[str, set[str]] = {node: set() for node in graph}
    for node, targets in graph.items():
        for target in targets:
            reverse.setdefault(target, set()).add(node)
    groups = [sorted(order) for _, order in _postorder(reverse, finished[::-1])]
    return sorted(group for group in groups if len(group) > 1)


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _own_package(importer: str, is_package: bool, private_module: str) -> bool:
    """A private module (``pkg/_x.py``) belongs to its package: the package's own modules may import it."""
    owner = private_module.rsplit(".", 1)[0]
    home = importer if is_package else importer.rsplit(".", 1)[0]
    return home == owner or home.startswith(owner + ".")


def _module_of(node: ast.AST, bound: dict[str, str]) -> str | None:
    """The module an expression names through a local name an import bound (``pkg.mod`` after ``import pkg``)."""
    attrs: list[str] = []
    while isinstance(node, ast.Attribute):
        attrs.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name) or node.id not in bound:
        return None
    return ".".join([bound[node.id], *reversed(attrs)])


def _reaches(node: ast.AST, bound: dict[str, str], modules: set[str]) -> tuple[str, str] | None:
    """(module, private name) when ``node`` is ``mod._x`` or ``getattr(mod, "_x")`` on a module of ours."""
    if isinstance(node, ast.Attribute) and _private(node.attr):
        target, attr = node.value, node.attr
    elif (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in {"getattr", "setattr", "delattr", "hasattr"}
        and len(node.args) >= 2
        and isinstance(node.args[1], ast.Constant)
        and isinstance(node.args[1].value, str)
        and _private(node.args[1].value)
    ):
        target, attr = node.args[0], node.args[1].value
    else:
        return None
    owner = _module_of(target, bound)
    return (owner, attr) if owner in modules and f"{owner}.{attr}" not in modules else None


def private_reach_ins(root: Path) -> list[str]:
    """Private names (one leading underscore) a module takes from another module of ours: ``from x import _y``,
    ``import x._y`` or ``from x import _y`` of a private module outside its package, ``x._y`` and
    ``getattr(x, "_y")`` on a module it imported (attributes of other objects are not followed)."""
    modules = set(module_files(root))
    found: set[str] = set()
    for name, path, is_package, imported, tree in _parsed(root):
        where = path.relative_to(root)
        bound = {i.local: i.binds for i in imported if i.local and i.binds.split(".", 1)[0] in LAYERS}
        for i in imported:
            if i.target.split(".", 1)[0] not in LAYERS:
                continue
            parts = i.target.split(".")
            hidden = [".".join(parts[: k + 1]) for k, part in enumerate(parts) if _private(part)]
            if any(not _own_package(name, is_package, h) for h in hidden):
                found.add(f"{where}:{i.line} imports the private module {i.target}")
            if i.name not in modules and _private(i.name) and i.target != name:
                found.add(f"{where}:{i.line} imports the private name {i.name} from {i.target}")
        for node in ast.walk(tree):
            reach = _reaches(node, bound, modules)
            if reach is not None and reach[0] != name:
                found.add(f"{where}:{node.lineno} reaches into {reach[0]}.{reach[1]}")
    return sorted(found)


def test_no_module_import_cycle() -> None:
    """No circle of modules, by any import: at run time or for annotations only (``TYPE_CHECKING``), at module
    level or inside a function. Modules that need each other are one module cut in two, or share something
    that belongs below both."""
    graph = import_graph(REPO)
    found = [f"{', '.join(group)} (each imports: " + "; ".join(
        f"{m} -> {', '.join(sorted(graph[m] & set(group)))}" for m in group
    ) + ")" for group in circles(graph)]
    assert found == [], "modules importing each other:\n" + "\n".join(found)


def command_back_arrows(root: Path) -> list[str]:
    """Imports of a ``harness.commands`` module from anywhere but the command line (``harness.cli``) and the
    package itself: a command is argparse and one call into the harness; what two commands share, or what the
    harness needs of one, belongs in a harness module. One command module importing another counts too."""
    found = []
    for name, path, _, imported, _ in _parsed(root):
        for i in imported:
            if not i.target.startswith("harness.commands.") or i.target == name:
                continue
            if name in ("harness.cli", "harness.commands"):
                continue
            found.append(f"{path.relative_to(root)}:{i.line} ({name}) imports {i.target}")
    return sorted(set(found))


def test_no_back_arrow_into_the_commands() -> None:
    found = command_back_arrows(REPO)
    assert found == [], "imports of a command module:\n" + "\n".join(found)


@pytest.mark.parametrize(
    ("name", "source"),
    [
        ("harness/learn/learner.py", "def learn():\n    from harness.commands.validate_release import pin_schema\n"),
        ("harness/commands/matrix.py", "from harness.commands.diff import select_binary\n"),
        ("harness/runner.py", "from harness.commands import diff\n"),
    ],
)
def test_a_planted_back_arrow_is_found(tmp_path: Path, name: str, source: str) -> None:
    files = {
        "harness/commands/__init__.py": "",
        "harness/commands/diff.py": "def select_binary(): ...\n",
        "harness/commands/validate_release.py": "def pin_schema(): ...\n",
        name: source,
    }
    assert command_back_arrows(_tree(tmp_path, files)), source


def test_no_private_name_taken_from_another_module() -> None:
    """A module's private names (one leading underscore) are its own; another module that needs one needs a
    public name for it."""
    found = private_reach_ins(REPO)
    assert found == [], "private names taken from another module:\n" + "\n".join(found)


def _tree(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    for package in LAYERS:
        (root / package).mkdir(exist_ok=True)
    return root


@pytest.mark.parametrize(
    "files",
    [
        pytest.param(
            {"contracts/a.py": "import contracts.b\n", "contracts/b.py": "import contracts.a\n"}, id="run time"
        ),
        pytest.param(
            {
                "contracts/a.py": "from contracts.b import B\n",
                "contracts/b.py": "if TYPE_CHECKING:\n    from contracts.a import A\n",
            },
            id="annotation only",
        ),
        pytest.param(
            {
                "harness/x/__init__.py": "",
                "harness/x/a.py": "from . import b\n",
                "harness/x/b.py": "def f():\n    from .a import g\n",
            },
            id="relative, in a function",
        ),
        pytest.param(
            {
                "fake_server/a.py": "from fake_server import b\n",
                "fake_server/b.py": "from fake_server.c import C\n",
                "fake_server/c.py": "import importlib\nm = importlib.import_module('fake_server.a')\n",
            },
            id="three modules, import_module",
        ),
    ],
)
def test_a_planted_cycle_is_found(tmp_path: Path, files: dict[str, str]) -> None:
    assert circles(import_graph(_tree(tmp_path, files))) == [sorted(f.removesuffix(".py").replace("/", ".")
        for f in files if not f.endswith("__init__.py"))]


def test_a_cycle_through_a_package_init_is_found(tmp_path: Path) -> None:
    """A module that imports a submodule runs its package's ``__init__``, and what that imports: the circle
    ``contracts.releases`` -> ``contracts.trace.format`` (running ``contracts/trace/__init__``, which imports the
    reader) -> the reader's function-local import of ``contracts.releases``."""
    files = {
        "contracts/r.py": "from contracts.t.fmt import X\n",
        "contracts/t/__init__.py": "from contracts.t.reader import R\n",
        "contracts/t/fmt.py": "X = 1\n",
        "contracts/t/reader.py": "R = 1\ndef f():\n    from contracts.r import X\n",
    }
    assert circles(import_graph(_tree(tmp_path, files))) == [["contracts.r", "contracts.t", "contracts.t.reader"]]


def test_a_package_whose_init_imports_its_modules_is_no_cycle(tmp_path: Path) -> None:
    files = {
        "harness/x/__init__.py": "from harness.x.a import A\n",
        "harness/x/a.py": "from harness.x.b import B\nA = B\n",
        "harness/x/b.py": "B = 1\n",
    }
    assert circles(import_graph(_tree(tmp_path, files))) == []


@pytest.mark.parametrize(
    ("source", "found"),
    [
        ("from contracts.b import _hidden\n", "imports the private name _hidden from contracts.b"),
        ("from .b import _hidden\n", "imports the private name _hidden from contracts.b"),
        ("def f():\n    from contracts.b import _hidden\n", "imports the private name _hidden"),
        ("import contracts.b\ncontracts.b._hidden()\n", "reaches into contracts.b._hidden"),
        ("import contracts.b as m\nm._hidden = 1\n", "reaches into contracts.b._hidden"),
        ("from contracts import b\nx = b._hidden\n", "reaches into contracts.b._hidden"),
        ("from contracts import b\nx = getattr(b, '_hidden')\n", "reaches into contracts.b._hidden"),
        ("from harness.y._core import X\n", "imports the private module harness.y._core"),
        ("from harness.y import _core\n", "imports the private module harness.y._core"),
    ],
)
def test_a_planted_private_reach_in_is_found(tmp_path: Path, source: str, found: str) -> None:
    files = {
        "contracts/a.py": source,
        "contracts/b.py": "_hidden = 1\n",
        "harness/y/__init__.py": "",
        "harness/y/_core.py": "X = 1\n",
    }
    hits = private_reach_ins(_tree(tmp_path, files))
    assert any(found in hit for hit in hits), hits


def test_own_and_public_names_are_fine(tmp_path: Path) -> None:
    files = {
        "contracts/a.py": (
            "import contracts.b\nfrom contracts import b\nfrom contracts.b import public\n"
            "_mine = 1\nx = b.__name__, b.public, _mine\n"
            "class C:\n    def f(self, other):\n        return self._x, other._y\n"
        ),
        "contracts/b.py": "public = 1\n_hidden = 2\nx = _hidden\n",
        "harness/y/__init__.py": "from harness.y._core import X\n",
        "harness/y/_core.py": "X = 1\n",
        "harness/y/user.py": "from harness.y._core import X\nfrom harness.y import _core\n",
    }
    assert private_reach_ins(_tree(tmp_path, files)) == []


@pytest.mark.parametrize(
    ("package", "source"),
    [
        ("contracts", "from harness.runner import run_many\n"),
        ("contracts", "def f():\n    import fake_server.engine\n"),
        ("fake_server", "if TYPE_CHECKING:\n    from codex_client import Session\n"),
        ("fake_server", "import importlib\nm = importlib.import_module('harness.cli')\n"),
        ("harness", "from conformance.plugin import pytest_addoption\n"),
        ("codex_client", "from fake_server.engine import Engine\n"),
        ("codex_client", "from harness.budgets import run_deadline_s\n"),
        ("codex_sandbox", "from codex_client.process import spawn_process\n"),
        ("fake_server", "from codex_sandbox import proctree\n"),
    ],
)
def test_planted_upward_import_is_found(package: str, source: str) -> None:
    assert upward_imports(source, package), source


def test_downward_and_sibling_imports_are_fine() -> None:
    source = "from contracts.wire import LineDecoder\nimport fake_server.engine\nfrom harness import runner\n"
    assert upward_imports(source, "harness") == []
    source = "from codex_sandbox import proctree\nfrom contracts.wire import LineDecoder\n"
    assert upward_imports(source, "codex_client") == []


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
