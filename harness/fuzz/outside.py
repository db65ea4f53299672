"""``fuzz --client-cmd``: the fuzzer's generated scenarios played against an outside client.

Each example is played exactly as ``run --client-cmd`` plays a scenario (:class:`harness.client_under_test.
CommandClient`: its own process tree, home, plan and deadline, on fake-process) and judged by the same
contracts and levels. A finding is a failed ``must`` check not in the baseline; ``should`` failures and known
ones are not findings (a baseline entry matches by contract and check: generated scenarios have no stable
names). The shrunk scenario is replayed once more: a failure that does not come back is reported as flaky, a
finding of its own kind.

Each example's deadline is the scenario's own (:func:`example_deadline_s`), not the worst case of its turn count:
a client that hangs on a turn the server ends at once is stopped when a correct client would long be done.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import replace

from contracts.checks import Check
from contracts.report import BaselineEntry
from contracts.scenario import Scenario
from harness.budgets import DEADLINE_EXTRA_S, scenario_deadline_s, with_budgets
from harness.client_under_test import CommandClient, play_one_staggered
from harness.fuzz.invariants import Example
from harness.fuzz.truth import RacyScenario, derive, end_time
from harness.outside.command import StartGate
from harness.outside.runner import ClientSpec


def is_known(check: Check, baseline: Sequence[BaselineEntry]) -> bool:
    """Whether ``check`` is a baseline entry's, by contract and check name, the turn's number left out: a
    generated scenario has no stable name, nor the turn a known bug strikes in (``turn 1 status`` listed for the
    built-in ``garbage_lines`` is the same bug as ``turn 2 status`` on a generated scenario with garbage in turn 2)."""
    kind = _turnless(check.name)
    return any(e.contract == check.contract and (e.name is None or _turnless(e.name) == kind) for e in baseline)


def _turnless(name: str) -> str:
    return re.sub(r"^turn \d+ ", "turn N ", name)


def findings(checks: Sequence[Check], baseline: Sequence[BaselineEntry] = ()) -> list[Check]:
    return [c for c in checks if c.status == "fail" and c.level == "must" and not is_known(c, baseline)]


def outside_player(
    spec: ClientSpec, baseline: Sequence[BaselineEntry] = (), *, gate: StartGate | None = None
) -> Callable[[Scenario, str], Example]:
    """How the fuzzer plays one example on the outside client: the checks it fails are its findings only.
    ``gate``: examples played at once (``--jobs``) start staggered, as ``run --jobs`` starts scenarios."""

    def play(scenario: Scenario, target: str) -> Example:
        own = spec
        if spec.deadline_s is None:  # --client-deadline, when given, wins
            own = replace(spec, deadline_s=example_deadline_s(with_budgets(scenario, spec.budgets)))
        run = play_one_staggered(CommandClient(own), scenario, target, gate)
        found = {id(c) for c in findings(run.checks, baseline)}
        # Everything else is kept, but not as a failure: the driver shrinks on failures only.
        kept = [c if c.status != "fail" or id(c) in found else _not_a_finding(c) for c in run.checks]
        return Example(scenario, target, kept, run.record)

    return play


#: Room per turn over what the walk says the turn takes: its requests' round trips and the real clock's
#: scheduling on a loaded machine (the walk's times are the fake's sleeps alone).
TURN_SLACK_MS = 2000


def example_deadline_s(scenario: Scenario) -> float:
    """What a client that keeps the scenario's budgets may take on it, by its truth: the start-up budget, each turn
    as long as the server plays it (a turn it ends on its own), or up to where the cancel or the turn deadline
    lands plus the interrupt budget and one request budget (the formula's per-turn terms), then the teardown,
    plus :data:`TURN_SLACK_MS` and one start-up budget a turn (a client that starts a server per turn) and
    :data:`~harness.budgets.DEADLINE_EXTRA_S`. Never above the run deadline
    (:func:`~harness.budgets.scenario_deadline_s`, the formula every run uses), which a scenario the walk cannot judge
    keeps.

    A correct client is done by then whatever its style: a turn the server ends within a second gives it no reason
    to wait its turn budget. A hanging client's example so takes seconds, not the worst case of its turn count."""
    plan = scenario.client
    worst = scenario_deadline_s(scenario)
    try:
        truth = derive(scenario.turns, plan, scenario.config, scenario.release)
    except (RacyScenario, ValueError):
        return worst
    total_ms = plan.startup_timeout_ms + plan.teardown_ms
    for turn in truth.turns:
        # A client may start a server per turn (a correct style): each turn has room for one more start-up.
        total_ms += TURN_SLACK_MS + plan.startup_timeout_ms + turn.approvals_seen * plan.approval_delay_ms
        if turn.cancel is not None:
            total_ms += turn.cancel.t + plan.interrupt_budget_ms + plan.request_timeout_ms
            continue
        end = end_time(turn.steps)
        per_turn = plan.turn_timeout_ms + plan.interrupt_budget_ms + plan.request_timeout_ms
        total_ms += per_turn if end is None else end
    return min(worst, total_ms / 1000 + DEADLINE_EXTRA_S)


def _not_a_finding(check: Check) -> Check:
    why = "known (baseline)" if check.level == "must" else "should"
    return replace(check, status="warn", detail=f"[{why}] {check.detail}")
