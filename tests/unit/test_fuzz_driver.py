"""The fuzz driver: failures of any kind are shrunk and written; a passing run counts what it ran."""

from __future__ import annotations

from pathlib import Path

import pytest

from contracts.scenario import Scenario
from contracts.scenario_file import load
from harness.fuzz.driver import fuzz
from harness.fuzz.invariants import Example
from harness.fuzz.strategies import scenarios

#: A few kinds, so that a crash is drawn within a test's examples whatever else is imported: hypothesis draws
#: constants from the loaded modules' code, so a seed's examples change with the modules a test run imported.
FEW = ("crash", "hang", "garbage_lines")


def test_an_exception_while_playing_is_a_shrunk_failure(tmp_path: Path) -> None:
    def play(scenario: Scenario, target: str) -> Example:
        if any(f.kind == "crash" for f in scenario.faults):
            raise RuntimeError("the runner broke")
        return Example(scenario, target)

    report = fuzz(300, seed_value=2, out=tmp_path, play=play, fault_kinds=FEW)
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

    report = fuzz(300, seed_value=2, out=tmp_path, play=play, fault_kinds=FEW)
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
    assert report.failed == 0
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


def test_jobs_play_examples_at_once_and_count_each_once() -> None:
    import threading
    import time

    lock = threading.Lock()
    now = [0]
    most = [0]

    def play(scenario: Scenario, target: str) -> Example:
        with lock:
            now[0] += 1
            most[0] = max(most[0], now[0])
        time.sleep(0.02)  # long enough for the other lane's example to start meanwhile
        with lock:
            now[0] -= 1
        return Example(scenario, target)

    report = fuzz(40, seed_value=4, play=play, strategy=scenarios(faults=False), jobs=2)
    assert report.failure is None
    assert report.examples == report.generated == 40  # examples/jobs per lane
    assert most[0] == 2, "two lanes play at once, never more"


def test_jobs_one_failure_is_shrunk_by_the_lane_that_found_it(tmp_path: Path) -> None:
    import threading
    from collections import Counter

    crashes: Counter[str] = Counter()  # crashing examples played, by thread (the post-pass plays in the main one)

    def play(scenario: Scenario, target: str) -> Example:
        if any(f.kind == "crash" for f in scenario.faults):
            crashes[threading.current_thread().name] += 1
            raise RuntimeError("the runner broke")
        return Example(scenario, target)

    report = fuzz(300, seed_value=2, out=tmp_path, play=play, jobs=3, fault_kinds=FEW)
    assert report.failure is not None and report.failure.scenario_file is not None
    assert [f.kind for f in load(report.failure.scenario_file).faults] == ["crash"]
    assert report.generated < report.examples  # the shrinking's examples are not generated ones
    assert 1 <= report.failed <= report.examples - report.generated + 1
    assert f"{report.failed} failed)" in report.text()
    lanes = sorted((n for name, n in crashes.items() if name.startswith("fuzz-lane")), reverse=True)
    # The owner shrank (many plays); another lane played at most the one example it had started.
    assert lanes[0] > 3 and all(n <= 1 for n in lanes[1:]), crashes


def test_jobs_never_exceed_the_examples_asked() -> None:
    played: list[int] = []

    def play(scenario: Scenario, target: str) -> Example:
        played.append(1)
        return Example(scenario, target)

    report = fuzz(1, play=play, strategy=scenarios(faults=False), jobs=4)
    assert report.examples == len(played) == 1


def _virtual_clock(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The campaign's clock (``driver.time.perf_counter``), moved only by the test's plays: ``now[0]``. On the real
    clock a loaded CI machine's slower generation made the wall time the verdict, not the driver's time share."""
    import time
    import types

    from harness.fuzz import driver

    now = [0.0]
    clock = types.SimpleNamespace(perf_counter=lambda: now[0], monotonic=time.monotonic, sleep=time.sleep)
    monkeypatch.setattr(driver, "time", clock)
    return now


def test_max_time_ends_the_shrinking_too(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A failing play costs 0.5 s of the campaign's clock (:func:`_virtual_clock`), another 10 ms."""
    now = _virtual_clock(monkeypatch)
    plays: list[float] = []

    def play(scenario: Scenario, target: str) -> Example:
        plays.append(now[0])
        if scenario.faults:
            now[0] += 0.5  # a slow failing example: shrinking it fully would take minutes
            raise RuntimeError("the runner broke")
        now[0] += 0.01
        return Example(scenario, target)

    report = fuzz(300, seed_value=2, out=tmp_path, play=play, max_time_s=3.0)
    assert max(plays) <= 3.0 and now[0] <= 3.5  # no play starts after --max-time; the last one may end past it
    assert report.shrink_cut > 0 and "while shrinking" in report.text()
    failure = report.failure
    assert failure is not None and not failure.flaky and failure.error is None, failure and failure.summary()
    assert failure.scenario_file is not None and load(failure.scenario_file).faults


def test_under_max_time_hypothesis_shrinks_for_its_share_and_the_structural_pass_has_the_rest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A failure that costs much to play (a client that hangs: its whole deadline) is not shrunk by hypothesis alone
    until --max-time: at its share of the time left, whole turns and faults are cut, so the written scenario holds
    the fault that fails and nothing else that the cuts could reach.

    A failing play costs 0.4 s of the campaign's clock (:func:`_virtual_clock`), another 10 ms: on the real clock a
    loaded machine's slower generation ate the structural pass's share (CI once wrote 2 faults)."""
    from contracts.checks import Check
    from harness.fuzz.driver import HYPOTHESIS_SHARE

    now = _virtual_clock(monkeypatch)
    plays: list[tuple[float, bool]] = []

    def play(scenario: Scenario, target: str) -> Example:
        failing = any(f.kind == "crash" for f in scenario.faults)
        now[0] += 0.4 if failing else 0.01  # each failing candidate is slow, as a hang is
        plays.append((now[0], failing))
        checks = [Check(scenario.name, target, "terminal_status", "x", "fail")] if failing else []
        return Example(scenario, target, checks)

    report = fuzz(300, seed_value=2, out=tmp_path, play=play, fault_kinds=FEW, max_time_s=6.0)
    assert now[0] <= 6.0 + 0.4  # --max-time on the campaign's clock: no play starts after it
    assert report.failure is not None and report.failure.scenario_file is not None
    assert report.hypothesis_cut > 0 and "hypothesis's shrinking had its share" in report.text()
    first = next(t for t, failing in plays if failing)
    share_ends = first + (6.0 - first) * HYPOTHESIS_SHARE
    assert any(t > share_ends + 0.1 for t, _ in plays)  # the structural pass played after it
    assert report.examples == len(plays) and report.failed == sum(f for _, f in plays)  # its candidates counted
    shrunk = load(report.failure.scenario_file)
    assert [f.kind for f in shrunk.faults] == ["crash"] and len(shrunk.turns) == 1, report.text()


def test_a_failure_that_does_not_come_back_is_reported_flaky_in_one_line(tmp_path: Path) -> None:
    """A verdict that depends on timing fails once and passes when hypothesis plays the example again: the report
    says so in one line and names the failing check; hypothesis's message (the example's repr) is not shown."""
    from contracts.checks import Check

    failed: list[str] = []

    def play(scenario: Scenario, target: str) -> Example:
        if failed or not scenario.faults:
            return Example(scenario, target)
        failed.append(scenario.name)
        return Example(scenario, target, [Check(scenario.name, target, "client", "deadline", "fail", "late")])

    report = fuzz(50, seed_value=2, out=tmp_path, play=play, fault_kinds=FEW)
    assert report.failure is not None and report.failure.flaky, report.text()
    summary = report.failure.summary()
    assert "flaky: the example failed, then passed when played again" in summary
    assert "client / deadline: late" in summary
    assert "error:" not in summary and "Scenario(" not in summary, summary
