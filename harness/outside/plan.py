"""The plan file an adapter follows (``CODEX_HARNESS_PLAN``): the scenario's client side, no ``[expect]``.

An adapter needs the turns' inputs, what the user does during each turn (cancel, steer, resume and when),
the approval decisions in order of arrival (and, per turn, how many approvals the turn asks and the decision
for each: an adapter whose client cannot send one knows which to report ``unsupported`` without tapping its
client), and the budgets. The truth stays with the harness: a plan
that carried the expected statuses would let an adapter copy them.
"""

from __future__ import annotations

from typing import Any

from contracts.scenario import ClientPlan, CommandItem, FileChangeItem, Scenario
from harness.budgets import plan_budgets

PLAN_FORMAT = 1


def budgets(plan: ClientPlan) -> dict[str, int]:
    """The plan's budgets (harness.budgets: a client's declared budgets are already in ``plan``)."""
    return plan_budgets(plan)


def turn_approvals(scenario: Scenario, number: int, asked_before: int) -> list[str | None]:
    """The plan's decision for each approval request turn ``number`` asks, in order, on the course the plan takes
    (``asked_before``: the session's approvals before the turn): one per scripted command or file change that
    needs approval, up to a ``cancel`` decision or a ``cancel`` held at that approval (None: the user cancels the
    turn while it is pending, and leaves it unanswered), or a response that fails (the rest is never asked)."""
    plan = scenario.client
    held = {a.n for a in plan.actions_for(number) if a.do == "cancel" and a.at == "approval_pending"}
    decisions: list[str | None] = []
    for response in scenario.turns[number - 1].responses:
        for item in response.items:
            if not isinstance(item, CommandItem | FileChangeItem) or not item.approval:
                continue
            if len(decisions) + 1 in held:
                return [*decisions, None]  # the user cancels the turn while it is pending: it stays unanswered
            decisions.append(plan.decision(asked_before + len(decisions)))
            if decisions[-1] == "cancel":
                return decisions
        if response.end != "completed":
            break
    return decisions


def adapter_plan(scenario: Scenario) -> dict[str, Any]:
    """The JSON an adapter reads: ``turns`` (1-based ``turn``, ``input``, ``actions``, ``approvals``: the
    decision for each approval the turn asks), ``approvals`` (the session's rule), budgets."""
    plan = scenario.client
    turns = []
    asked = 0
    for number, script in enumerate(scenario.turns, 1):
        actions = [
            {"do": a.do, "at": a.at, "n": a.n, "delay_ms": a.delay_ms, **({"text": a.text} if a.do == "steer" else {})}
            for a in plan.actions_for(number)
        ]
        decisions = turn_approvals(scenario, number, asked)
        asked += len(decisions)
        turns.append({"turn": number, "input": script.input, "actions": actions, "approvals": decisions})
    return {
        "format": PLAN_FORMAT,
        "scenario": scenario.name,
        "description": scenario.description,
        "turns": turns,
        "approvals": {"default": plan.approval, "in_order": list(plan.approvals)},
        "budgets": budgets(plan),
        "experimental_api": plan.experimental_api,
        "opt_out_notifications": list(plan.opt_out),
    }
