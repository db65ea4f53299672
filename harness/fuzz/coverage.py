"""Which fault kinds and client actions a fuzz run exercised.

A fault counts when it struck (the truth's ``notes.faults``), not merely when it was scripted; an
action counts when the client was told to do it; a decision when an approval request it answers
arrives.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from contracts.scenario import ACTION_TRIGGERS, DECISIONS, Scenario
from harness.fuzz.table import FUZZED
from harness.fuzz.truth import derive

#: Kinds the fuzzer draws (the table's ``not_fuzzed`` kinds say why they are not).
ALL_FAULTS: tuple[str, ...] = FUZZED
ALL_ACTIONS: tuple[str, ...] = (
    *(f"cancel@{t}" for t in ACTION_TRIGGERS),
    "steer",
    "resume",
    "second_turn",
    *(f"decision:{d}" for d in DECISIONS),
)


def scenario_coverage(scenario: Scenario) -> tuple[set[str], set[str]]:
    """(fault kinds that strike, client actions taken) in ``scenario``."""
    faults = set(scenario.expect.notes.get("faults", ()))
    actions: set[str] = set()
    for action in scenario.client.actions:
        actions.add(f"cancel@{action.at}" if action.do == "cancel" else action.do)
    if len(scenario.turns) > 1:
        actions.add("second_turn")
    arrived = sum(
        t.approvals_seen for t in derive(scenario.turns, scenario.client, scenario.config, scenario.release).turns
    )
    actions.update(f"decision:{scenario.client.decision(i)}" for i in range(arrived))
    return faults & set(ALL_FAULTS), actions


@dataclass(slots=True)
class Coverage:
    faults: Counter[str] = field(default_factory=Counter)
    actions: Counter[str] = field(default_factory=Counter)

    def add(self, scenario: Scenario) -> None:
        faults, actions = scenario_coverage(scenario)
        self.faults.update(faults)
        self.actions.update(actions)

    def missing_faults(self) -> list[str]:
        return [k for k in ALL_FAULTS if not self.faults[k]]

    def missing_actions(self) -> list[str]:
        return [k for k in ALL_ACTIONS if not self.actions[k]]

    def summary(self) -> str:
        def part(label: str, seen: Counter[str], every: tuple[str, ...]) -> str:
            hit = sum(1 for k in every if seen[k])
            missing = [k for k in every if not seen[k]]
            tail = f" (missing: {', '.join(missing)})" if missing else ""
            return f"{label} {hit}/{len(every)}{tail}"

        return part("faults", self.faults, ALL_FAULTS) + "; " + part("actions", self.actions, ALL_ACTIONS)

    def to_dict(self) -> dict[str, dict[str, int]]:
        return {"faults": dict(self.faults), "actions": dict(self.actions)}
