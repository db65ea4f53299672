"""The upgrade report names a change of the trace bundle format: a trace reader must know it."""

from __future__ import annotations

from contracts.report import SchemaChanges
from harness.release_step import neighbours
from harness.report.releases import step_cell


def test_a_release_step_names_the_trace_bundle_format_change() -> None:
    (step,) = neighbours(["0.169.0", "0.171.0"])
    assert step.trace_formats == (2, 3)
    assert step.trace_format_note == "trace bundle format changed: schema 2 -> 3"
    assert "**trace bundle format changed: schema 2 -> 3**" in step_cell(step)
    assert step.to_json()["trace_format"] == {"from": 2, "to": 3, "note": step.trace_format_note}


def test_the_same_or_an_unknown_format_says_nothing() -> None:
    assert SchemaChanges("a", "b", None, trace_formats=(3, 3)).trace_format_note == ""
    (unknown,) = neighbours(["0.171.0", "9.9.9"])
    assert unknown.trace_formats == (3, None) and unknown.trace_format_note == ""
