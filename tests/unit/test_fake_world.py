"""The fake's request handlers work on the connection's world, never on the engine.

The engine owns the dispatch; every handler (``fake_server.surface``) takes a ``Call`` carrying the
``World`` (threads, ids, outbox, what the surface remembers, the release), which sits below both. So a
handler runs on a world built by hand, and no module of the fake but the ones that run an engine names it.
"""

from __future__ import annotations

import ast
from typing import Any

from support import paths

from contracts.messages import Request
from fake_server import profiles
from fake_server.catalogue import load_builtin
from fake_server.effects import Send
from fake_server.ids import IdMaker
from fake_server.outbox import Outbox
from fake_server.surface import core, router
from fake_server.surface.call import Call
from fake_server.world import Host, World

ROOT = paths.REPO
#: The modules that run an engine (its deployments, and the players tests use); nothing else of the fake names it.
RUN_THE_ENGINE = {"cli", "serving", "runtime", "inprocess", "virtual", "plan", "replay"}


def _imports(source: str, package: str) -> set[str]:
    """Every module a module of ``package`` can import: at module level, in functions, under ``TYPE_CHECKING``."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: resolved against the module's package
                parts = package.split(".")
                base = ".".join([*parts[: len(parts) - node.level + 1], *([base] if base else [])])
            found |= {base} | {f"{base}.{alias.name}" for alias in node.names}
    return found


def _names_the_engine(source: str, package: str) -> bool:
    return any(m == "fake_server.engine" or m.startswith("fake_server.engine.") for m in _imports(source, package))


def test_only_what_runs_an_engine_imports_it() -> None:
    importers = sorted(
        str(path.relative_to(ROOT))
        for path in (ROOT / "fake_server").rglob("*.py")
        if path.stem not in RUN_THE_ENGINE | {"engine"}
        and _names_the_engine(path.read_text(encoding="utf-8"), ".".join(path.relative_to(ROOT).parent.parts))
    )
    assert importers == [], f"the engine is imported by {importers}"


def test_a_planted_engine_import_is_found() -> None:
    """The check can fail: an annotation-only import is an import, relative or not."""
    for source in (
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ..engine import Engine\n",
        "def f():\n    from fake_server import engine\n",
        "import fake_server.engine\n",
    ):
        assert _names_the_engine(source, "fake_server.surface"), source
    assert not _names_the_engine("from ..world import World\n", "fake_server.surface")


def test_handlers_never_name_the_engine() -> None:
    named = []
    for path in sorted((ROOT / "fake_server" / "surface").glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
        names |= {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
        names |= {a.arg for n in ast.walk(tree) if isinstance(n, ast.arguments) for a in n.args + n.kwonlyargs}
        if names & {"engine", "Engine"}:
            named.append(path.name)
    assert named == []


# --- a world by hand ------------------------------------------------------------------------------


def _world() -> World:
    profile = profiles.default()
    box = Outbox(IdMaker("world-test"))
    box.now_ms = 1_700_000_000_000
    return World(scenario=load_builtin("plain"), profile=profile, host=Host(cwd="/w", codex_home="/h"), box=box)


def _call(world: World, rid: int, method: str, params: dict[str, Any]) -> Call:
    request = Request.make(rid, method, params)
    world.box.endpoint.receive(request)  # the engine's endpoint would have taken it in
    return Call(world, request, params)


def _answer(world: World, rid: int) -> dict[str, Any]:
    frames = [e.frame for e in world.box.flush() if isinstance(e, Send)]
    return next(f for f in frames if f.get("id") == rid and "method" not in f)


def test_handlers_run_on_a_world_built_by_hand() -> None:
    world = _world()
    core.thread_start(_call(world, 1, "thread/start", {}))
    thread = _answer(world, 1)["result"]["thread"]
    assert thread["cwd"] == "/w" and list(world.threads) == [thread["id"]]

    router.dispatch(_call(world, 2, "thread/name/set", {"threadId": thread["id"], "name": "by hand"}))
    assert _answer(world, 2) == {"id": 2, "result": {}}
    router.dispatch(_call(world, 3, "thread/read", {"threadId": thread["id"]}))
    assert _answer(world, 3)["result"]["thread"]["name"] == "by hand"
    assert world.surface.threads[thread["id"]].name == "by hand"


def test_a_handlers_refusal_is_its_answer() -> None:
    world = _world()
    router.dispatch(_call(world, 7, "thread/read", {"threadId": "00000000-0000-0000-0000-000000000000"}))
    error = _answer(world, 7)["error"]
    assert error == {"code": -32600, "message": "thread not loaded: 00000000-0000-0000-0000-000000000000"}
