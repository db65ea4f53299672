"""What must hold on every fuzz example, and playing one example to judge it.

The contracts (:func:`contracts.checks.run_all`) carry most invariants, against the example's derived
``[expect]``: exactly one Result per turn with the declared status (terminal_status), cancel→Result
within the interrupt budget plus the teardown bound (latency), the client trace closed
(trace_closure), usage exactly equal per bucket (usage), schema-valid client frames (schema), every
server request answered or resolved (protocol), no exception escaping the client (terminal_status).
:func:`invariants` adds what a generated example promises beyond them: every Result arrives within
the turn's own bound, and the session itself ends.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

from contracts.checks import Check
from contracts.checks.registry import Contract
from contracts.record import SessionRecord
from contracts.scenario import Scenario

NAME = "fuzz"
REFERENCE = "docs/client-rules.md §2-3"
#: The ids of its checks (other modules name a check by these).
TURN_N_ONE_RESULT = "turn N one Result"
TURN_N_RESULT_IN_BOUND = "turn N Result in bound"
NO_EXCEPTION_ESCAPES = "no exception escapes the client"
EXAMPLE_PLAYED = "example played"
#: ``example played``: the runner or a contract raised on the example (harness.fuzz.driver).
CONTRACT = Contract(
    NAME,
    citation=REFERENCE,
    suite="fuzz",
    checks=(TURN_N_ONE_RESULT, TURN_N_RESULT_IN_BOUND, NO_EXCEPTION_ESCAPES, EXAMPLE_PLAYED),
)
#: Slack for the scheduler between steps of the teardown (virtual time needs none, real time some).
SLACK_S = 0.25


@CONTRACT.judge
def invariants(record: SessionRecord, scenario: Scenario) -> list[Check]:
    """The fuzz-specific invariants of one played example (failing ones only matter)."""

    maker = CONTRACT.maker(record)

    def make(name: str, ok: bool, detail: str) -> Check:
        return maker(name, "pass" if ok else "fail", detail)

    plan = scenario.client
    checks: list[Check] = []
    budget = plan.interrupt_budget_ms / 1000 + plan.teardown_ms / 1000 + SLACK_S
    for i in range(len(scenario.turns)):
        results = [r for r in record.results if r.index == i]
        checks.append(make(f"turn {i + 1} one Result", len(results) == 1, f"{len(results)} Result(s)"))
        if len(results) != 1:
            continue
        result = results[0]
        if result.started_at and result.ended_at:
            # Never longer than the deadline plus one interrupt budget and one teardown.
            limit = plan.turn_timeout_ms / 1000 + budget
            took = result.ended_at - result.started_at
            checks.append(
                make(
                    f"turn {i + 1} Result in bound",
                    took <= limit,
                    f"turn/start→Result {took:.3f} s, bound {limit:.3f} s",
                )
            )
    checks.append(
        make(
            "no exception escapes the client",
            not record.client_errors,
            "; ".join(record.client_errors)[:500] or "none",
        )
    )
    return checks


def failures(checks: list[Check]) -> list[Check]:
    """The failing checks of an example. A failing ``scenario`` check (``fault_not_struck``: a fault the
    run never reached) counts too: the generator places faults only where its walk says they strike
    (:func:`harness.fuzz.strategies.reached_only`), so an unreached one is a bug of the generator or of
    its truth model, shrunk and reported like any other failure."""
    return [c for c in checks if c.status == "fail"]


@dataclass(slots=True)
class Example:
    """One played example: its scenario, record, every check, and the failing ones."""

    scenario: Scenario
    target: str
    checks: list[Check] = field(default_factory=list)
    record: SessionRecord | None = None
    wall_s: float = 0.0

    @property
    def failures(self) -> list[Check]:
        return failures(self.checks)


def run_example(scenario: Scenario, target: str = "fake", *, work_root: Path | None = None) -> Example:
    """Play ``scenario`` on ``target`` with the client and judge it by the contracts and the invariants."""
    from harness.runner import run_one

    started = time.perf_counter()
    run = run_one(scenario, target, work_root=work_root)
    example = Example(scenario, target, list(run.checks), run.record)
    if run.record is not None:
        example.checks += invariants(run.record, scenario)
    example.wall_s = time.perf_counter() - started
    return example
