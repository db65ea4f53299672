"""The fuzz driver: generate scenarios, play each on a target, judge, and shrink a failure to files.

Hypothesis drives generation and shrinking; every example is played by the runner (in process under
MockClock for ``fake``) and judged by the contracts plus :mod:`harness.fuzz.invariants`. On a failure
hypothesis shrinks the example, and the smallest failing scenario is written with its failing checks
(:mod:`harness.fuzz.shrink`) so ``codex-harness run --scenario FILE`` replays it.
"""

from __future__ import annotations

import logging
import shlex
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis import strategies as st
from hypothesis.database import ExampleDatabase
from hypothesis.errors import FlakyFailure, FlakyReplay, HypothesisException

from contracts.checks import Check
from contracts.exitcodes import Finding
from contracts.scenario import Scenario
from harness.fuzz import invariants
from harness.fuzz.coverage import Coverage
from harness.fuzz.invariants import Example, run_example
from harness.fuzz.shrink import scenario_size, simplify, write_failure
from harness.fuzz.strategies import scenarios
from harness.fuzz.table import FUZZED, SLOW

#: Every kind the fuzzer can draw is fuzzed by default; ``--fast`` leaves out the slow ones (the table's
#: ``FaultSpec.slow`` says why each is slow and what covers it instead).
SLOW_FAULTS: tuple[str, ...] = SLOW
DEFAULT_FAULTS: tuple[str, ...] = FUZZED
FAST_FAULTS: tuple[str, ...] = tuple(k for k in FUZZED if k not in SLOW)


class ExampleFailed(Finding, AssertionError):
    """Raised inside hypothesis for a failing example, so it shrinks."""


@dataclass(slots=True)
class Failure:
    scenario: Scenario | None  # None only when generation itself broke
    checks: list[Check]
    scenario_file: Path | None = None
    checks_file: Path | None = None
    flaky: bool = False
    error: str | None = None  # an exception other than failing checks (a generator or runner bug)

    def summary(self) -> str:
        failing = [c for c in self.checks if c.status == "fail"]
        lines = [f"  {c.contract} / {c.name}: {c.detail[:240]}" for c in failing[:8]]
        if self.error:
            lines.insert(0, f"  error: {self.error[:500]}")
        if self.flaky:
            lines.insert(0, "  flaky: the failure did not reproduce on replay")
        return "\n".join(lines)


@dataclass(slots=True)
class FuzzReport:
    examples: int = 0  # examples played (generation and shrinking)
    generated: int = 0  # examples played before the first failure
    seconds: float = 0.0
    coverage: Coverage = field(default_factory=Coverage)
    failure: Failure | None = None
    target: str = "fake"
    seed: int = 0
    #: ``fuzz --client-cmd``: the outside client's command (the reproduce line names it)
    client_cmd: str | None = None
    #: examples not played because ``max_time_s`` ran out
    timed_out: int = 0

    @property
    def rate(self) -> float:
        return self.examples / self.seconds if self.seconds > 0 else 0.0

    def text(self) -> str:
        lines = [
            f"examples run: {self.examples} ({self.generated} generated before any failure) on target {self.target}, "
            f"seed {self.seed}",
            f"rate: {self.rate:.1f} examples/s ({self.seconds:.1f} s)",
            f"coverage: {self.coverage.summary()}",
        ]
        if self.timed_out:
            lines.append(f"--max-time reached: {self.timed_out} example(s) not played")
        if self.failure is None:
            lines.append("RESULT: PASS")
        else:
            lines.append("FAILURE:")
            lines.append(self.failure.summary())
            if self.failure.scenario_file is not None and self.failure.scenario is not None:
                size = scenario_size(self.failure.scenario)
                lines.append(f"  shrunk scenario: {self.failure.scenario_file} ({size})")
                lines.append(f"  failing checks: {self.failure.checks_file}")
                client = f" --client-cmd {shlex.quote(self.client_cmd)}" if self.client_cmd else ""
                lines.append(
                    f"  reproduce: codex-harness run{client} --target {self.target} --scenario "
                    f"{self.failure.scenario_file}"
                )
            lines.append("RESULT: FAIL")
        return "\n".join(lines)


def fuzz(
    examples: int = 1000,
    *,
    seed_value: int = 0,
    out: Path | None = None,
    target: str = "fake",
    fault_kinds: tuple[str, ...] = DEFAULT_FAULTS,
    strategy: st.SearchStrategy[Scenario] | None = None,
    play: Callable[[Scenario, str], Example] | None = None,
    shrink: bool = True,
    progress: Callable[[FuzzReport], None] | None = None,
    database: ExampleDatabase | None = None,
    max_time_s: float | None = None,
) -> FuzzReport:
    """Run ``examples`` generated scenarios on ``target``; on a failure, shrink it and write it under ``out``.

    ``play`` replaces how one example is played and judged (tests use it to plant client bugs through
    the same runner); ``strategy`` replaces the scenario strategy. ``database``: hypothesis's example database
    (failures found before are replayed first, new ones saved). ``max_time_s``: after it, no example is played
    (hypothesis's remaining examples pass at once, so the run ends; the report counts them).
    """
    report = FuzzReport(target=target, seed=seed_value)
    if strategy is None:
        # On the real clock only actions that cannot race are drawn (see scenarios(real_time=True)).
        strategy = scenarios(fault_kinds=fault_kinds, real_time=target != "fake")
    player = play if play is not None else (lambda s, t: run_example(s, t))
    last: list[Example] = []
    failing_seen = [False]

    def body(scenario: Scenario) -> None:
        if max_time_s is not None and not failing_seen[0] and time.perf_counter() - started > max_time_s:
            report.timed_out += 1
            return
        report.examples += 1
        if not failing_seen[0]:
            report.generated += 1
            report.coverage.add(scenario)
        try:
            example = player(scenario, target)
        except Exception as exc:  # the runner or a contract broke on this example: a finding, shrunk like any
            why = f"{type(exc).__name__}: {exc}"
            crash = Check(scenario.name, target, invariants.NAME, invariants.EXAMPLE_PLAYED, "fail", why)
            example = Example(scenario, target, [crash])
        if progress is not None and report.examples % 50 == 0:
            report.seconds = time.perf_counter() - started
            progress(report)
        if example.failures:
            failing_seen[0] = True
            last[:] = [example]
            raise ExampleFailed("; ".join(f"{c.contract}/{c.name}" for c in example.failures))

    phases = (Phase.generate, Phase.shrink) if shrink else (Phase.generate,)
    if database is not None:  # what an earlier campaign found is replayed first
        phases = (Phase.reuse, *phases)
    test = settings(
        max_examples=examples,
        database=database,
        deadline=None,
        phases=phases,
        suppress_health_check=list(HealthCheck),
        print_blob=False,
        report_multiple_bugs=False,
    )(given(strategy)(body))
    if database is None:  # under an explicit seed hypothesis uses no database: a campaign with one is not seeded
        test = seed(seed_value)(test)
    started = time.perf_counter()
    quiet = _quiet_client_logs()
    try:
        test()
    except ExampleFailed:
        pass
    except (FlakyFailure, FlakyReplay) as exc:
        if last:
            report.failure = Failure(last[0].scenario, last[0].checks, flaky=True, error=str(exc)[:500])
    except (HypothesisException, Exception) as exc:
        scenario = last[0].scenario if last else None
        report.failure = Failure(scenario, last[0].checks if last else [], error=f"{type(exc).__name__}: {exc}")
    finally:
        quiet()
        report.seconds = time.perf_counter() - started
    if report.failure is None and last:
        report.failure = Failure(last[0].scenario, last[0].checks)
    failure = report.failure
    if shrink and failure is not None and failure.scenario is not None and not failure.flaky and not failure.error:

        def fails(candidate: Scenario) -> list[Check]:
            try:
                return player(candidate, target).failures
            except Exception as exc:
                return [Check(candidate.name, target, invariants.NAME, invariants.EXAMPLE_PLAYED, "fail", repr(exc))]

        quiet = _quiet_client_logs()
        try:
            failure.scenario, failure.checks = simplify(failure.scenario, failure.checks, fails)
        finally:
            quiet()
        report.seconds = time.perf_counter() - started
    if report.failure is not None and report.failure.scenario is not None:
        directory = out if out is not None else Path(tempfile.mkdtemp(prefix="codex-harness-fuzz-"))
        report.failure.scenario_file, report.failure.checks_file = write_failure(
            report.failure.scenario, report.failure.checks, directory, target=target, seed=seed_value
        )
    return report


def _quiet_client_logs() -> Callable[[], None]:
    """The client logs every fault it survives; thousands of examples would bury the report."""
    logger = logging.getLogger("harness")
    level, propagate = logger.level, logger.propagate
    logger.setLevel(logging.CRITICAL)

    def restore() -> None:
        logger.setLevel(level)
        logger.propagate = propagate

    return restore
