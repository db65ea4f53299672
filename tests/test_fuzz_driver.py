"""The fuzz driver: failures of any kind are shrunk and written; a passing run counts what it ran."""

from __future__ import annotations

from pathlib import Path

from contracts.scenario import Scenario
from contracts.scenario_file import load
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


def test_a_fault_never_struck_is_a_failure_of_the_generator(tmp_path: Path) -> None:
    from contracts.checks import Check

    def play(scenario: Scenario, target: str) -> Example:
        checks = []
        if any(f.kind == "crash" for f in scenario.faults):
            checks = [Check(scenario.name, target, "scenario", "fault_not_struck", "fail", "crash never struck")]
        return Example(scenario, target, checks)

    report = fuzz(300, seed_value=2, out=tmp_path, play=play)
    assert report.failure is not None, "an unreached fault must fail the fuzz run"
    assert "scenario / fault_not_struck" in report.failure.summary()


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


def test_simplify_cuts_everything_the_failure_does_not_need() -> None:
    from contracts.checks import Check
    from contracts.scenario import ClientAction, ClientPlan, CommandItem, Fault, ModelResponse, TurnScript, Usage
    from harness.fuzz.shrink import simplify

    noisy = TurnScript(
        responses=(ModelResponse((CommandItem("ls"),), Usage(10, 0, 5)), ModelResponse((), Usage(20, 0, 5))),
        faults=(Fault("garbage_lines", "start"), Fault("crash", "start", 1, {"exit_code": 2})),
    )
    big = Scenario(
        "big", "x", (TurnScript(), noisy), ClientPlan(actions=(ClientAction(1, "resume"), ClientAction(2, "resume")))
    )

    def fails(s: Scenario) -> list[Check]:
        crashed = any(f.kind == "crash" for f in s.faults)
        return [Check(s.name, "fake", "terminal_status", "x", "fail")] if crashed else []

    small, checks = simplify(big, fails(big), fails)
    assert [f.kind for f in small.faults] == ["crash"]
    assert len(small.turns) == 1 and not small.turns[0].responses and not small.client.actions
    assert checks and small.expect.server_exit == 2  # the truth is re-derived for the cut scenario
