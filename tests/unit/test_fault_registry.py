"""The fault registry: one table (contracts.faults) and one strike function per kind (fake_server.faults).

Everything about faults comes from it: the kinds, default points, where each acts, the bounds the
loader enforces, the real target's skip rule and the docs table; strikes go through one ``strike``.
"""

from __future__ import annotations

import ast
import dataclasses
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support import paths
from support.plan import play

from contracts import faults as registry
from contracts.faults import FAULTS, POINTS, FaultProblem, check_fault
from contracts.scenario import (
    FAULT_DEFAULT_POINT,
    FAULT_KINDS,
    ClientPlan,
    Fault,
    Scenario,
    ServerConfig,
    TurnScript,
)
from contracts.scenario_file import ScenarioError, dumps, loads
from contracts.scenario_rules import point_bounds
from fake_server import builder
from fake_server import faults as fake_faults
from fake_server.catalogue import builtin_names, load_builtin
from harness.fuzz.strategies import turn_scripts

ROOT = paths.REPO
ENGINE_MODULES = ("engine", "turns", "faults", "outbox", "programs", "world", "surface/core")
COUNTED = ("delta", "item_started", "approval_pending", "usage")


def test_every_kind_has_one_spec_and_one_strike_function() -> None:
    assert list(fake_faults.REGISTRY) == list(FAULTS) == list(FAULT_KINDS)
    for kind, entry in fake_faults.REGISTRY.items():
        assert entry.spec is FAULTS[kind] and callable(entry.strike)
        assert FAULT_DEFAULT_POINT[kind] == entry.spec.default_point in entry.spec.points
        assert set(entry.spec.points) <= set(POINTS) and entry.spec.description


def test_a_kind_without_a_strike_function_refuses_to_import(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delitem(fake_faults._STRIKES, "hang")
    with pytest.raises(ImportError, match="without a strike function: hang"):
        fake_faults._complete()


def test_defaults_satisfy_their_own_bounds() -> None:
    for spec in FAULTS.values():
        for param in spec.params:
            if not param.required:
                assert param.problem(param.default) is None, (spec.kind, param.name)
            if param.type is int:
                assert param.min is not None and param.max is not None and param.why, (spec.kind, param.name)


def _int_params() -> list[tuple[str, registry.Param]]:
    return [(s.kind, p) for s in FAULTS.values() for p in s.params if p.type is int]


@pytest.mark.parametrize(("kind", "param"), _int_params(), ids=lambda v: v if isinstance(v, str) else v.name)
def test_integer_bounds_are_inclusive_and_enforced(kind: str, param: registry.Param) -> None:
    assert param.min is not None and param.max is not None
    for ok in (param.min, param.max):
        assert check_fault(kind, None, 1, {param.name: ok})[3] == {param.name: ok}
    for bad in (param.min - 1, param.max + 1, float(param.min), True, str(param.min)):
        with pytest.raises(FaultProblem) as caught:
            check_fault(kind, None, 1, {param.name: bad})
        assert caught.value.key == param.name and "between" in caught.value.expected


@given(kind=st.sampled_from([k for k, p in _int_params()]), value=st.integers(-(10**13), 10**13))
def test_a_value_is_accepted_exactly_when_in_bounds(kind: str, value: int) -> None:
    param = next(p for p in FAULTS[kind].params if p.type is int)
    assert param.min is not None and param.max is not None
    try:
        check_fault(kind, None, 1, {param.name: value})
        accepted = True
    except FaultProblem:
        accepted = False
    assert accepted == (param.min <= value <= param.max)


def test_points_and_n_are_checked_from_the_table() -> None:
    with pytest.raises(FaultProblem, match="has an effect"):
        check_fault("duplicate_usage", "delta", 1, {})
    with pytest.raises(FaultProblem, match="comes once per turn"):
        check_fault("late_events", "after_end", 2, {})
    with pytest.raises(FaultProblem, match="required"):
        check_fault("delayed_completion", None, 1, {})
    assert check_fault("crash", None, 3, {})[:3] == ("crash", "delta", 3)
    # The builder checks by the same table.
    with pytest.raises(ScenarioError, match=r"fault\.exit_code"):
        builder.fault("crash", exit_code=300)


def test_docs_tables_are_the_generated_ones() -> None:
    docs = (ROOT / "docs" / "scenarios.md").read_text(encoding="utf-8")
    for name, make in registry.GENERATED.items():
        found = re.search(rf"<!-- generated: {name} [^>]*-->\n(.*?)<!-- end: {name} -->", docs, re.S)
        assert found is not None, f"docs/scenarios.md has no generated {name} table"
        assert found.group(1) == make(), f"regenerate with: python -m contracts.faults ({name})"


def test_the_real_target_skips_by_the_fake_only_flag(monkeypatch: pytest.MonkeyPatch) -> None:
    scenario = Scenario("s", "d", (TurnScript(faults=(Fault("garbage_lines", "start"),)),))
    assert scenario.supports("real") == (False, "fault garbage_lines can only be produced by the fake app-server")
    monkeypatch.setitem(FAULTS, "garbage_lines", dataclasses.replace(FAULTS["garbage_lines"], fake_only=False))
    assert scenario.supports("real") == (True, "")


def test_every_builtin_fault_strikes_and_goes_to_the_ledger() -> None:
    for name in builtin_names():
        scenario = load_builtin(name)
        if not scenario.faults:
            continue
        run = play(scenario)
        expected = {(t, i) for t, turn in enumerate(scenario.turns) for i in range(len(turn.faults))}
        assert set(run.server.engine.struck) == expected, name
        assert [(f.turn, f.index) for f in run.server.faults_struck] == run.server.engine.struck


def _counted_bound_scenario(script: TurnScript, point: str, n: int) -> Scenario:
    fault = Fault("unknown_notification", point, n, {"method": "x/probe"})
    return Scenario("bound", "bound", (TurnScript(script.input, script.responses, (fault,)),))


def _plays_whole_turns(scenario: Scenario) -> bool:
    """No fault, no steer and no cancel: the first turn plays all it can (the bound is that most)."""
    plan = scenario.client
    cancels = any(a.do in ("steer", "cancel") for a in plan.actions) or "cancel" in (plan.approval, *plan.approvals)
    return not scenario.faults and not cancels


@pytest.mark.parametrize("name", [n for n in builtin_names() if _plays_whole_turns(load_builtin(n))])
def test_counted_points_are_tight_upper_bounds(name: str) -> None:
    """At n = the bound the fault strikes (nothing refused that could strike); past it, never."""
    scenario = load_builtin(name)
    script = scenario.turns[0]
    bounds = point_bounds(script, scenario.config.stream_max_retries)
    for point in ("delta", "item_started", "approval_pending", "usage"):
        for n, strikes in ((bounds[point], True), (bounds[point] + 1, False)):
            if n == 0:
                continue
            probe = _counted_bound_scenario(script, point, n)
            probe = dataclasses.replace(probe, client=scenario.client, config=scenario.config)
            assert bool(play(probe).server.engine.struck) == strikes, (name, point, n)


def test_loading_counts_points_from_the_script() -> None:
    text = dumps(_counted_bound_scenario(TurnScript(), "delta", 3))
    with pytest.raises(ScenarioError, match=r"faults\[0\]\.n: expected at most 2"):
        loads(text, "probe.toml")
    assert loads(dumps(_counted_bound_scenario(TurnScript(), "delta", 2)), "probe.toml").faults[0].n == 2


def _imports(module: str) -> set[str]:
    tree = ast.parse((ROOT / "fake_server" / f"{module}.py").read_text(encoding="utf-8"))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
            names.update(f"{node.module}.{a.name}" for a in node.names)
        elif isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
    return names


def test_no_import_circle_between_engine_turns_and_faults() -> None:
    assert not any(n.startswith("fake_server.engine") for n in _imports("turns") | _imports("faults"))
    assert not any(n.startswith("fake_server.turns") for n in _imports("faults") | _imports("outbox"))
    assert not any(n.startswith(("fake_server.engine", "fake_server.turns")) for n in _imports("programs"))


def test_turn_code_uses_the_outbox_not_the_engine() -> None:
    source = (ROOT / "fake_server" / "turns.py").read_text(encoding="utf-8")
    tree = ast.parse(source)
    names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
    attributes = {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
    assert "engine" not in names and "Engine" not in names
    assert not {a for a in attributes if a.startswith("_")}  # no private reach-ins


def test_no_long_functions_in_the_fake_engine() -> None:
    """~60 lines at most, unless a comment at the def says why (``# long: ...``)."""
    for module in ENGINE_MODULES:
        path = ROOT / "fake_server" / f"{module}.py"
        lines = path.read_text(encoding="utf-8").splitlines()
        for node in ast.walk(ast.parse("\n".join(lines))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                length = (node.end_lineno or node.lineno) - node.lineno + 1
                excused = "# long:" in lines[node.lineno - 1]
                assert length <= 60 or excused, f"{path.name}:{node.lineno} {node.name} is {length} lines"


@settings(max_examples=60, deadline=None)
@given(script=turn_scripts(), retries=st.integers(0, 2), point=st.sampled_from(COUNTED))
def test_counted_bounds_hold_for_generated_turns(script: TurnScript, retries: int, point: str) -> None:
    """For any scripted turn played whole: a fault at the bound strikes, one past it never does."""
    bound = point_bounds(script, retries)[point]
    # on-request: every scripted approval is asked (under "never" the server refuses an escalation and its item
    # never starts, as the real binary does: fake_server.policy), so every scripted item is played
    config = ServerConfig(stream_max_retries=retries, approval_policy="on-request")
    patient = ClientPlan(turn_timeout_ms=3_600_000)  # long commands must not end the turn first
    for n, strikes in ((bound, True), (bound + 1, False)):
        if n == 0:
            continue
        probe = dataclasses.replace(_counted_bound_scenario(script, point, n), config=config, client=patient)
        assert bool(play(probe).server.engine.struck) == strikes, (point, n)


# A fault is one row: its kind is named in its two row modules and nowhere else in the packages. The strings
# left are other words that happen to be spelled as a kind, each said why.
_ROW_MODULES = ("contracts/faults.py", "fake_server/faults.py")
_NOT_A_FAULT = {
    ("fake_server/recording.py", "crash"): "how a recorded session ended (recording.END_REASONS)",
    ("contracts/checks/client_plan.py", "crash"): "how a recorded session ended",
    ("contracts/wire.py", "oversized_line"): "a wire error's kind (what the reader saw)",
    ("contracts/wire.py", "invalid_utf8"): "a wire error's kind (what the reader saw)",
    ("conformance/test_broken_client.py", "interrupt_ignored"): "a built-in scenario's name",
}


def _kinds_named(source: str) -> list[tuple[int, str]]:
    """(line, kind) of each string that spells a fault kind, docstrings left out."""
    tree = ast.parse(source)
    docs = {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant)}
    return [
        (n.lineno, n.value)
        for n in ast.walk(tree)
        if isinstance(n, ast.Constant) and isinstance(n.value, str) and n.value in FAULTS and id(n) not in docs
    ]


def test_a_fault_kind_is_named_only_in_its_row() -> None:
    found = []
    for package in ("contracts", "fake_server", "harness", "codex_client", "codex_sandbox", "conformance"):
        for path in sorted((ROOT / package).rglob("*.py")):
            where = path.relative_to(ROOT).as_posix()
            if where in _ROW_MODULES:
                continue
            found += [f"{where}:{n} {kind!r}" for n, kind in _kinds_named(path.read_text(encoding="utf-8"))
                      if (where, kind) not in _NOT_A_FAULT]
    assert not found, "a fault kind switched on outside its row (add the behaviour to the row): " + ", ".join(found)


def test_a_switch_on_a_kind_name_is_found() -> None:
    planted = 'def f(fault):\n    """hang: a docstring may name it"""\n    if fault.kind == "hang":\n        return 1\n'
    assert _kinds_named(planted) == [(3, "hang")]
    assert _kinds_named('kinds = ("ws_close", "other")\n') == [(1, "ws_close")]


def test_each_websocket_kind_carries_its_connection_behaviour_in_its_row() -> None:
    for kind, row in fake_faults.REGISTRY.items():
        on_sockets_only = "stdio" not in row.spec.transports
        assert on_sockets_only == (row.on_socket is not None or row.on_upgrade is not None), kind
