"""``fuzz --client-cmd``: the fuzzer's generated scenarios played against an outside client.

Each example is played exactly as ``run --client-cmd`` plays a scenario (:class:`harness.client_under_test.
CommandClient`: its own process tree, home, plan and deadline, on fake-process) and judged by the same
contracts and levels. A finding is a failed ``must`` check not in the baseline; ``should`` failures and known
ones are not findings (a baseline entry matches by contract and check: generated scenarios have no stable
names). The shrunk scenario is replayed once more: a failure that does not come back is reported as flaky, a
finding of its own kind.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from contracts.checks import Check
from contracts.report import BaselineEntry
from contracts.scenario import Scenario
from harness.client_under_test import CommandClient, play_one_staggered
from harness.fuzz.invariants import Example
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

    client = CommandClient(spec)

    def play(scenario: Scenario, target: str) -> Example:
        run = play_one_staggered(client, scenario, target, gate)
        found = {id(c) for c in findings(run.checks, baseline)}
        # Everything else is kept, but not as a failure: the driver shrinks on failures only.
        kept = [c if c.status != "fail" or id(c) in found else _not_a_finding(c) for c in run.checks]
        return Example(scenario, target, kept, run.record)

    return play


def _not_a_finding(check: Check) -> Check:
    from dataclasses import replace

    why = "known (baseline)" if check.level == "must" else "should"
    return replace(check, status="warn", detail=f"[{why}] {check.detail}")
