"""The session's helpers (turn, supervisor, server_requests, teardown) work against the driver protocol
(:mod:`codex_client.driver`): they use exactly its members, and the session has every one of them.

The protocol is what keeps the helpers from needing the session's module (``tests/unit/test_layers.py`` checks the
circle is gone); these tests keep it honest: a member a helper uses but the protocol does not declare (a reach
into the session past it), one declared but used by nobody (a protocol grown stale), or one the session lacks,
fails here.
"""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import pytest
from support import paths

from codex_client import driver
from codex_client.approvals import accept_all
from codex_client.memory import memory_pair
from codex_client.options import SessionOptions
from codex_client.session import Session

CLIENT = Path(driver.__file__).resolve().parent
#: helper module -> how it names the driver: a parameter (``driver``), or an attribute (``self.session``)
HELPERS = {
    "supervisor.py": "driver",
    "server_requests.py": "driver",
    "teardown.py": "driver",
    "turn.py": "self.session",
}


def protocol_members(cls: type) -> set[str]:
    """The members a Protocol class declares itself: annotated attributes and methods (no dunders)."""
    declared = set(inspect.get_annotations(cls))
    declared |= {name for name, value in vars(cls).items() if callable(value) and not name.startswith("__")}
    return declared


def driver_uses(source: str, receiver: str) -> set[str]:
    """The attributes ``source`` takes of ``receiver`` (a name, or ``self.<name>``), a local alias included
    (``connection = driver.connection`` counts as ``connection``)."""
    used: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute) and ast.unparse(node.value) == receiver:
            used.add(node.attr)
    return used


def test_helpers_use_exactly_what_the_protocol_declares() -> None:
    declared = protocol_members(driver.Driver)
    used_by = {name: driver_uses((CLIENT / name).read_text(), receiver) for name, receiver in HELPERS.items()}
    undeclared = {name: sorted(used - declared) for name, used in used_by.items() if used - declared}
    assert undeclared == {}, f"helpers reach past the driver protocol: {undeclared}"
    unused = declared - set().union(*used_by.values())
    assert unused == set(), f"declared by the driver protocol, used by no helper: {sorted(unused)}"


def test_the_session_has_every_member_of_the_protocol() -> None:
    transport, _peer = memory_pair()
    session = Session(transport, SessionOptions(), accept_all)
    missing = sorted(name for name in protocol_members(driver.Driver) if not hasattr(session, name))
    assert missing == []
    assert protocol_members(driver.CancellableTurn) <= set(dir(session.turn("hi")))


def test_the_scan_sees_a_reach_past_the_protocol() -> None:
    """The check above can fail: a helper taking an undeclared member of the driver is caught."""
    source = "async def f(driver):\n    driver.connection.note(0, 'x')\n    driver._slots.clear()\n"
    assert driver_uses(source, "driver") - protocol_members(driver.Driver) == {"_slots"}
    assert driver_uses("def g(self):\n    self.session.turns.pop()\n", "self.session") == {"turns"}


@pytest.mark.parametrize("name", sorted(HELPERS))
def test_no_helper_imports_the_session_or_guesses_at_attributes(name: str) -> None:
    """No import of the session, and no ``getattr`` on the driver or the server's process: what a helper needs
    of them is declared (the driver protocol, :class:`contracts.transport.ProcessHandle`)."""
    tree = ast.parse((CLIENT / name).read_text())
    imported = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    assert "codex_client.session" not in imported
    guessed = [
        ast.unparse(node)
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in {"getattr", "hasattr"}
        and ast.unparse(node.args[0]).startswith((HELPERS[name], "process", "driver.process"))
    ]
    assert guessed == []


def test_the_events_of_a_core_call_are_taken_in_one_place_only() -> None:
    """Every call into the core goes through ``Session.drive``, which hands the core's events to ``handle``: a
    call whose events nobody took would leave a Result, an answer or a kill undone until the next one. Before,
    13 call sites each repeated ``handle(connection.take_events())``."""
    import ast

    root = paths.REPO / "codex_client"
    sites = []
    for path in sorted(root.glob("*.py")):
        if path.name == "connection.py":  # the core itself
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for func in ast.walk(tree):
            if isinstance(func, ast.FunctionDef | ast.AsyncFunctionDef):
                for node in ast.walk(func):
                    if isinstance(node, ast.Attribute) and node.attr == "take_events":
                        sites.append(f"{path.name}:{func.name}")
    assert sites == ["session.py:drive"], sites
