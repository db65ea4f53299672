"""The fuzz driver: generate scenarios, play each on a target, judge, and shrink a failure to files.

Hypothesis drives generation and shrinking; every example is played by the runner (in process under
MockClock for ``fake``) and judged by the contracts plus :mod:`harness.fuzz.invariants`. On a failure
hypothesis shrinks the example, and the smallest failing scenario is written with its failing checks
(:mod:`harness.fuzz.shrink`) so ``codex-harness run --scenario FILE`` replays it.
"""

from __future__ import annotations

import logging
import tempfile
import threading
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis import strategies as st
from hypothesis.database import ExampleDatabase
from hypothesis.errors import FlakyFailure, FlakyReplay, HypothesisException, HypothesisWarning

from contracts.checks import Check
from contracts.exitcodes import Finding, reraise_interrupt
from contracts.scenario import Scenario
from contracts.scenario_file import dumps
from harness.fuzz import invariants
from harness.fuzz.coverage import Coverage
from harness.fuzz.invariants import Example, run_example
from harness.fuzz.shrink import reproduce_line, scenario_size, simplify, write_failure
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
            lines.insert(0, "  flaky: the example failed, then passed when played again (a verdict of timing)")
        return "\n".join(lines)


@dataclass(slots=True)
class FuzzReport:
    examples: int = 0  # examples played (generation and shrinking)
    generated: int = 0  # examples played before the first failure
    failed: int = 0  # examples played that failed (the first, and the shrinking's that still fail)
    seconds: float = 0.0
    coverage: Coverage = field(default_factory=Coverage)
    failure: Failure | None = None
    target: str = "fake"
    seed: int = 0
    #: ``fuzz --client-cmd``: what the reproduce line adds after ``codex-harness run`` (shell-quoted): the client's
    #: command and the options that shaped its play (release, budgets, deadline), without which it may not fail again
    replay: str = ""
    #: examples not played because ``max_time_s`` ran out
    timed_out: int = 0
    #: shrinking candidates not played because ``max_time_s`` ran out (the failure written is not the smallest)
    shrink_cut: int = 0
    #: hypothesis's shrinking candidates not played past its share of the time left (:data:`HYPOTHESIS_SHARE`)
    hypothesis_cut: int = 0

    @property
    def rate(self) -> float:
        return self.examples / self.seconds if self.seconds > 0 else 0.0

    def text(self) -> str:
        lines = [
            f"examples run: {self.examples} ({self.generated} generated before any failure, {self.failed} failed) on "
            f"target {self.target}, "
            f"seed {self.seed}",
            f"rate: {self.rate:.1f} examples/s ({self.seconds:.1f} s)",
            f"coverage: {self.coverage.summary()}",
        ]
        if self.timed_out:
            lines.append(f"--max-time reached: {self.timed_out} example(s) not played")
        if self.hypothesis_cut:
            lines.append(
                f"hypothesis's shrinking had its share of --max-time: {self.hypothesis_cut} candidate(s) not played; "
                "whole turns, faults and actions were cut after it"
            )
        if self.shrink_cut:
            lines.append(
                f"--max-time reached while shrinking: {self.shrink_cut} smaller candidate(s) not played; the "
                "smallest failing scenario so far is written"
            )
        if self.failure is None:
            lines.append("RESULT: PASS")
        else:
            lines.append("FAILURE:")
            lines.append(self.failure.summary())
            if self.failure.scenario_file is not None and self.failure.scenario is not None:
                size = scenario_size(self.failure.scenario)
                lines.append(f"  shrunk scenario: {self.failure.scenario_file} ({size})")
                lines.append(f"  failing checks: {self.failure.checks_file}")
                lines.append(f"  reproduce: {reproduce_line(self.target, self.failure.scenario_file, self.replay)}")
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
    jobs: int = 1,
    replay: str = "",
    release: str | None = None,
) -> FuzzReport:
    """Run ``examples`` generated scenarios on ``target``; on a failure, shrink it and write it under ``out``.

    ``play`` replaces how one example is played and judged (tests use it to plant client bugs through
    the same runner); ``strategy`` replaces the scenario strategy. ``database``: hypothesis's example database
    (failures found before are replayed first, new ones saved). ``max_time_s``: after it, no example is played
    (hypothesis's remaining examples pass at once, so the run ends; the report counts them), and shrinking stops
    where it is: the smallest failing scenario found by then is the one written.

    ``jobs`` > 1: that many lanes play examples at once, each lane a hypothesis campaign of its own in a thread
    (its own seed, as ``--shard K/N`` gives shard K, and ``examples / jobs`` examples), sharing the report, the
    database and ``max_time_s``. Hypothesis drives one example at a time per campaign, so lanes are how
    examples overlap while every example keeps the one-scenario shape a database entry has whatever ``jobs``
    was. The first lane to fail owns the failure and shrinks it alone: the other lanes play nothing more.

    ``release``: the release profile the fake plays (an outside client's ``--release``); the scenarios are drawn
    and judged on its tables, and name it.
    """
    report = FuzzReport(target=target, seed=seed_value, replay=replay)
    player = play if play is not None else (lambda s, t: run_example(s, t))
    campaign = _Campaign(report, player, target, max_time_s, progress)
    lanes = max(1, min(jobs, examples))
    quiet = _quiet_client_logs()
    try:
        for lane in range(1, lanes + 1):
            # On the real clock only actions that cannot race are drawn (see scenarios(real_time=True)).
            own = (
                strategy
                if strategy is not None
                else scenarios(fault_kinds=fault_kinds, real_time=target != "fake", release=release)
            )
            seeded = seed_value if lanes == 1 else seed_value * MAX_LANES + lane
            share = examples if lanes == 1 else -(-examples // lanes)
            campaign.lanes.append(_Lane(campaign, own, share, seeded, shrink, database))
        with warnings.catch_warnings():
            # hypothesis describes a failing example by its repr, which nobody reads here (the shrunk scenario is
            # written as TOML): an 80,000-byte message made it warn on the user's terminal at every finding
            warnings.filterwarnings("ignore", message="Generating overly large repr", category=HypothesisWarning)
            campaign.run()
    finally:
        quiet()
        report.seconds = time.perf_counter() - campaign.started
    owner = campaign.owner
    if owner is not None:
        report.failure = owner.failure
        if report.failure is None and owner.last:
            report.failure = Failure(owner.last[0].scenario, owner.last[0].checks)
    failure = report.failure
    if shrink and failure is not None and failure.scenario is not None and not failure.flaky and not failure.error:

        def fails(candidate: Scenario) -> list[Check]:
            if campaign.over_time():  # --max-time: the smallest failing scenario so far is the one written
                report.shrink_cut += 1
                return []
            report.examples += 1  # the structural pass's candidates are examples played too
            try:
                failing = player(candidate, target).failures
            except Exception as exc:
                reraise_interrupt(exc)
                failing = [Check(candidate.name, target, invariants.NAME, invariants.EXAMPLE_PLAYED, "fail", repr(exc))]
            report.failed += bool(failing)
            return failing

        quiet = _quiet_client_logs()
        try:
            failure.scenario, failure.checks = simplify(failure.scenario, failure.checks, fails)
        finally:
            quiet()
        report.seconds = time.perf_counter() - campaign.started
    if report.failure is not None and report.failure.scenario is not None:
        directory = out if out is not None else Path(tempfile.mkdtemp(prefix="codex-harness-fuzz-"))
        report.failure.scenario_file, report.failure.checks_file = write_failure(
            report.failure.scenario, report.failure.checks, directory, target=target, seed=seed_value, replay=replay
        )
    return report


#: The share of the time left under ``max_time_s``, when a failure is found, that hypothesis's shrinking may spend;
#: the structural pass (:func:`harness.fuzz.shrink.simplify`: whole turns, faults, actions) has the rest. Each
#: candidate that still fails costs a whole example, and one a client hangs in costs its whole deadline (tens of
#: seconds on the real clock): hypothesis's many small steps would spend all of the time on a few parameters, while
#: one structural cut removes a turn or a fault at the same price.
HYPOTHESIS_SHARE = 0.5
#: Failing scenarios a lane remembers (hypothesis accepts at most 500 shrinks; a few failures each)
MAX_REMEMBERED = 2000
#: Lanes at most (``--jobs``): each holds a client, a fake process and their pipes, bounded like ``run --jobs``.
MAX_LANES = 32


class _Campaign:
    """What the lanes share: the report (under a lock), the clock, and which lane owns the failure."""

    def __init__(
        self,
        report: FuzzReport,
        player: Callable[[Scenario, str], Example],
        target: str,
        max_time_s: float | None,
        progress: Callable[[FuzzReport], None] | None,
    ) -> None:
        self.report, self.player, self.target = report, player, target
        self.max_time_s, self.progress = max_time_s, progress
        self.lock = threading.Lock()
        self.lanes: list[_Lane] = []
        self.owner: _Lane | None = None
        #: when hypothesis's shrinking stops (seconds of the campaign): set when the failure is found
        self.shrink_until: float | None = None
        self.stopped = False  # an interrupt: no lane plays another example
        self.started = time.perf_counter()

    def run(self) -> None:
        self.started = time.perf_counter()
        if len(self.lanes) == 1:
            self.lanes[0].run()
            return
        threads = [threading.Thread(target=lane.run, name=f"fuzz-lane-{i}") for i, lane in enumerate(self.lanes)]
        for thread in threads:
            thread.start()
        try:
            for thread in threads:
                thread.join()
        except BaseException:  # Ctrl-C: no lane plays on, and every open tree is killed until the lanes are back
            from codex_sandbox import proctree

            with self.lock:
                self.stopped = True
            ends = time.monotonic() + proctree.STOP_S
            while any(t.is_alive() for t in threads) and time.monotonic() < ends:
                proctree.end_all()
                time.sleep(0.05)
            raise

    def play(self, lane: _Lane, scenario: Scenario) -> Example | None:
        """Play one example for ``lane``; None when it is not to be played (time, another lane's failure)."""
        report = self.report
        with self.lock:
            if self.stopped or (self.owner is not None and self.owner is not lane):
                return None
            over = self.max_time_s is not None and self._elapsed() > self.max_time_s
            if over and self.owner is None:
                report.timed_out += 1
                return None
            if self.owner is not None and (over or self._elapsed() > (self.shrink_until or float("inf"))):
                # Shrinking past its time: a failure already seen fails again from memory (hypothesis replays
                # its smallest one last), anything else passes unplayed, so the shrinker stops where it is.
                if over:
                    report.shrink_cut += 1
                else:
                    report.hypothesis_cut += 1
                known = lane.failed.get(dumps(scenario))
                return None if known is None else Example(scenario, self.target, known)
            report.examples += 1
            if self.owner is None:
                report.generated += 1
                report.coverage.add(scenario)
            count = report.examples
        try:
            example = self.player(scenario, self.target)
        except Exception as exc:  # the runner or a contract broke on this example: a finding, shrunk like any
            reraise_interrupt(exc)
            why = f"{type(exc).__name__}: {exc}"
            crash = Check(scenario.name, self.target, invariants.NAME, invariants.EXAMPLE_PLAYED, "fail", why)
            example = Example(scenario, self.target, [crash])
        with self.lock:
            if example.failures:
                report.failed += 1
            if self.progress is not None and count % 50 == 0:
                report.seconds = self._elapsed()
                self.progress(report)
            if example.failures and self.owner is None:
                self.owner = lane
                if self.max_time_s is not None:
                    now = self._elapsed()
                    self.shrink_until = now + max(0.0, self.max_time_s - now) * HYPOTHESIS_SHARE
            if self.owner is not lane:  # another lane's failure came first: this one is not shrunk too
                return None
            if example.failures and len(lane.failed) < MAX_REMEMBERED:
                lane.failed[dumps(scenario)] = example.failures
        return example

    def over_time(self) -> bool:
        return self.max_time_s is not None and self._elapsed() > self.max_time_s

    def _elapsed(self) -> float:
        return time.perf_counter() - self.started


class _Lane:
    """One hypothesis campaign: generates, plays through the campaign, and shrinks the failure it owns."""

    def __init__(
        self,
        campaign: _Campaign,
        strategy: st.SearchStrategy[Scenario],
        examples: int,
        seed_value: int,
        shrink: bool,
        database: ExampleDatabase | None,
    ) -> None:
        self.campaign = campaign
        self.last: list[Example] = []
        self.failure: Failure | None = None
        #: the failing checks of each failing scenario it played (its file text), replayed past --max-time
        self.failed: dict[str, list[Check]] = {}

        def body(scenario: Scenario) -> None:
            example = campaign.play(self, scenario)
            if example is not None and example.failures:
                self.last[:] = [example]
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
        self.test = test

    def run(self) -> None:
        last = self.last
        try:
            self.test()
        except ExampleFailed:
            pass
        except (FlakyFailure, FlakyReplay):
            # hypothesis's message is the example's repr (tens of lines): the written scenario says it better
            if last:
                self.failure = Failure(last[0].scenario, last[0].checks, flaky=True)
        except (HypothesisException, Exception) as exc:
            reraise_interrupt(exc)
            with self.campaign.lock:  # a generator or runner bug is this lane's failure unless another owns one
                if self.campaign.owner is None:
                    self.campaign.owner = self
            scenario = last[0].scenario if last else None
            self.failure = Failure(scenario, last[0].checks if last else [], error=f"{type(exc).__name__}: {exc}")


def _quiet_client_logs() -> Callable[[], None]:
    """The client logs every fault it survives; thousands of examples would bury the report."""
    logger = logging.getLogger("harness")
    level, propagate = logger.level, logger.propagate
    logger.setLevel(logging.CRITICAL)

    def restore() -> None:
        logger.setLevel(level)
        logger.propagate = propagate

    return restore
