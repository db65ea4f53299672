"""The fuzz driver: failures of any kind are shrunk and written; a passing run counts what it ran."""

from __future__ import annotations

from pathlib import Path

from fake_server.scenario import Scenario
from fake_server.scenario_file import load
from harness.fuzz.driver import fuzz
from harness.fuzz.invariants import Example
from harness.fuzz.strategies import scenarios


def test_an_exception_while_playing_is_a_shrunk_failure(tmp_path: Path) -> None:
    def play(scenario: Scenario, target: str) -> Example:
        if any(f.kind == "crash" for f in scenario.faults):
            raise RuntimeError("the runner broke")
        return Example(scenario, target)

    report = fuzz(300, seed_value=2, out=tmp_path, play=play)
    assert report.failure is not None and report.failure.scenario_file is not None
    shrunk = load(report.failure.scenario_file)
    # Shrunk to the one fault that matters.
    assert [f.kind for f in shrunk.faults] == ["crash"]
    assert "the runner broke" in report.failure.summary()


def test_a_passing_run_counts_every_example_and_its_coverage() -> None:
    seen: list[str] = []

    def play(scenario: Scenario, target: str) -> Example:
        seen.append(target)
        return Example(scenario, target)

    report = fuzz(40, seed_value=4, play=play, strategy=scenarios(faults=False))
    assert report.failure is None
    assert report.examples == report.generated == len(seen) == 40
    assert not report.coverage.faults
    assert report.rate > 0
