"""One fault table: what the fuzzer draws, where, and what truth it predicts come from the registry.

The fuzzer (``harness/fuzz``) has no per-kind code: placements, parameter strategies (the declared bounds,
narrowed only where the table says why) and effects are read from ``contracts.faults``. A kind the
fuzzer cannot handle is refused loudly, when the table is built or when the fuzzer is asked for it.
"""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

import pytest
from hypothesis import HealthCheck, find, given, settings
from hypothesis import strategies as st
from hypothesis.errors import NoSuchExample
from support import paths

from contracts.fault_fuzz import COURSES, Draw, Effect, FaultTableError, Place
from contracts.faults import FAULTS, FaultSpec, Param, check_fault
from contracts.scenario import ClientPlan, Fault, MessageItem, ModelResponse, TurnScript, Usage
from harness.fuzz import table, walk
from harness.fuzz.coverage import ALL_FAULTS
from harness.fuzz.driver import DEFAULT_FAULTS, FAST_FAULTS
from harness.fuzz.strategies import scenarios
from harness.fuzz.truth import derive

ROOT = paths.REPO
PLAIN_INT = Param("count", int, 1, 1, 50, why="test")


def _spec(**changes: object) -> FaultSpec:
    """A well-formed entry (a wait at the delta), changed by ``changes``."""
    fields: dict[str, object] = {
        "kind": "probe_wait",
        "default_point": "delta",
        "points": ("delta", "item_started"),
        "description": "waits",
        "params": (Param("delay_ms", int, 10, 0, 1000, why="time"),),
        "effect": Effect("wait", delay="delay_ms"),
        "fuzz": (Place(("delta",), rank=0, draws=(Draw("delay_ms", "steps", values=(10, 100)),)),),
    }
    fields.update(changes)
    return FaultSpec(**fields)  # type: ignore[arg-type]


def test_every_kind_is_placed_by_the_fuzzer_or_says_why_not() -> None:
    for spec in FAULTS.values():
        assert bool(spec.fuzz) != bool(spec.not_fuzzed), spec.kind
        assert (spec.effect is not None) or not spec.fuzz, spec.kind
    assert set(ALL_FAULTS) == set(DEFAULT_FAULTS) == {k for k, s in FAULTS.items() if s.fuzz}
    assert set(DEFAULT_FAULTS) - set(FAST_FAULTS) == {k for k, s in FAULTS.items() if s.slow}


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"fuzz": ()}, "no fuzz placement and no not_fuzzed reason"),
        ({"not_fuzzed": "why"}, "both fuzz placements and a not_fuzzed reason"),
        ({"effect": None}, "no effect says what it changes"),
        ({"effect": Effect("wait")}, "a wait names its delay parameter"),
        ({"effect": Effect("wait", delay="nope")}, "reads parameter 'nope'"),
        ({"fuzz": (Place(("usage",), rank=0),)}, "placed at usage, where it has no effect"),
        ({"points": ("delta", "interrupt"), "fuzz": (Place(("delta", "interrupt"), rank=0),)}, "cannot place at"),
        ({"effect": Effect("runs_on"), "fuzz": (Place(("delta",), rank=0),)}, "only at the interrupt"),
        ({"fuzz": (Place(("delta",), rank=0, held_approval=True),)}, "held_approval applies to the interrupt"),
        ({"fuzz": (Place(("delta",), rank=0, draws=(Draw("delay_ms", "x", values=(5000,)),)),)}, "outside"),
        ({"fuzz": (Place(("delta",), rank=0, draws=(Draw("delay_ms", "x", max=2000),)),)}, "outside"),
        ({"fuzz": (Place(("delta",), rank=0, draws=(Draw("delay_ms", "", values=(10,)),)),)}, "says why"),
        ({"fuzz": (Place(("delta",), rank=0, draws=(Draw("other", "x", keep=True),)),)}, "does not have"),
        ({"fuzz": (Place(("delta",), rank=0, draws=(Draw("delay_ms", "x", keep=True, max=5),)),)}, "exactly one"),
        ({"effect": Effect("gone"), "fuzz": (Place(("delta",), rank=0, ending=False, why="x"),)}, "cannot say"),
        ({"params": (Param("method", str, "x/y", 1, 9, why="a name"),), "effect": Effect("noise")}, "string"),
    ],
)
def test_an_entry_the_fuzzer_could_not_handle_is_refused_when_the_table_is_built(
    changes: dict[str, object], message: str
) -> None:
    if "params" in changes:
        changes = {**changes, "fuzz": (Place(("delta",), rank=0),)}
    with pytest.raises(FaultTableError, match=message):
        _spec(**changes)


def test_a_well_formed_entry_is_accepted() -> None:
    assert _spec().effect == Effect("wait", delay="delay_ms")


def _placements_and_budgets() -> st.SearchStrategy[tuple[table.Placement, int, bool]]:
    everything = table.PASSIVE + table.AT_INTERRUPT
    return st.tuples(st.sampled_from(everything), st.sampled_from((2000, 500, 150)), st.booleans())


@settings(max_examples=300, suppress_health_check=list(HealthCheck), database=None, deadline=None)
@given(case=_placements_and_budgets(), data=st.data())
def test_drawn_parameters_are_valid_by_the_table_that_validates_input(
    case: tuple[table.Placement, int, bool], data: st.DataObject
) -> None:
    placement, budget, real_time = case
    params = table.params(data.draw, placement, budget, real_time)
    for at in placement.place.where:
        assert check_fault(placement.kind, at, 1, params)[3] == params


def test_a_parameter_without_a_narrowing_is_drawn_over_its_declared_bounds() -> None:
    whole = table._strategy("probe", PLAIN_INT, None, False, 2000)
    assert find(whole, lambda v: v == PLAIN_INT.max) == PLAIN_INT.max
    assert find(whole, lambda v: True) == PLAIN_INT.min  # shrinks to the lower bound
    narrowed = table._strategy("probe", PLAIN_INT, Draw("count", "x", max=3), False, 2000)
    assert find(narrowed, lambda v: v >= 3) == 3
    with pytest.raises(NoSuchExample):
        find(narrowed, lambda v: v > 3 or v < PLAIN_INT.min)
    choices = table._strategy("probe", Param("order", str, "after", choices=("before", "after")), None, False, 0)
    assert find(choices, lambda v: True) == "after"  # the default first: where hypothesis shrinks to
    assert table._strategy("probe", PLAIN_INT, Draw("count", "x", values=(7,)), False, 0) == 7  # not drawn
    assert table._strategy("probe", PLAIN_INT, Draw("count", "x", keep=True), False, 0) is None  # left out


def test_a_budget_multiple_outside_the_bounds_is_refused_when_drawn() -> None:
    with pytest.raises(table.NotFuzzable, match="outside its bounds"):
        table._strategy("probe", PLAIN_INT, Draw("count", "x", budget=(1,)), False, 2000)


def test_the_fuzzer_refuses_a_kind_it_cannot_draw() -> None:
    with pytest.raises(table.NotFuzzable, match=r"no_answer \(no_answer: a fault of a `\[\[methods\]\]`"):
        scenarios(fault_kinds=("garbage_lines", "no_answer"))
    with pytest.raises(table.NotFuzzable, match="bogus: unknown"):
        scenarios(fault_kinds=("bogus",))


def test_the_walk_refuses_a_kind_the_table_does_not_describe(monkeypatch: pytest.MonkeyPatch) -> None:
    # Before the table carried effects, the walk let an unknown kind through as if it changed nothing.
    plain = dataclasses.replace(FAULTS["late_events"], effect=None, fuzz=(), not_fuzzed="for the test")
    monkeypatch.setitem(FAULTS, "late_events", plain)
    text = MessageItem("Hello", ("He", "llo"), 100)
    turn = TurnScript(responses=(ModelResponse((text,), Usage(10, 0, 5)),), faults=(Fault("late_events", "delta"),))
    with pytest.raises(table.NotFuzzable, match="cannot model fault late_events: for the test"):
        derive((turn,), ClientPlan())


def test_every_course_has_a_walk_rule_and_a_missing_one_refuses_to_load() -> None:
    assert set(walk.COURSE_RULES) == set(COURSES)
    rules = dict(walk.COURSE_RULES)
    del rules["wait"]
    with pytest.raises(ImportError, match="no rule for course"):
        walk.check_rules(rules)


def test_placements_come_in_rank_order_with_their_weights() -> None:
    for group in (table.PASSIVE, table.AT_INTERRUPT):
        ranks = [p.place.rank for p in group]
        assert ranks == sorted(ranks)
        for placement in {(p.kind, p.index): p for p in group}.values():
            assert sum(1 for p in group if (p.kind, p.index) == (placement.kind, placement.index)) == (
                placement.place.weight
            )


def _string_constants(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    return {
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings
    }


@pytest.mark.parametrize("path", sorted((ROOT / "harness" / "fuzz").glob("*.py")), ids=lambda p: p.name)
def test_the_fuzzer_names_no_fault_kind(path: Path) -> None:
    """Per-kind code under harness/fuzz is what the table replaced: no kind is named there."""
    assert not _string_constants(path) & set(FAULTS), path.name
