"""The plan file an adapter follows (``CODEX_HARNESS_PLAN``): the scenario's client side, no ``[expect]``.

An adapter needs the turns' inputs, what the user does during each turn (cancel, steer, resume and when),
the approval decisions in order of arrival, and the budgets. The truth stays with the harness: a plan
that carried the expected statuses would let an adapter copy them.
"""

from __future__ import annotations

from typing import Any

from contracts.scenario import ClientPlan, Scenario
from harness.budgets import plan_budgets

PLAN_FORMAT = 1


def budgets(plan: ClientPlan) -> dict[str, int]:
    """The plan's budgets (harness.budgets: a client's declared budgets are already in ``plan``)."""
    return plan_budgets(plan)


def adapter_plan(scenario: Scenario) -> dict[str, Any]:
    """The JSON an adapter reads: ``turns`` (1-based ``turn``, ``input``, ``actions``), ``approvals``, budgets."""
    plan = scenario.client
    turns = []
    for number, script in enumerate(scenario.turns, 1):
        actions = [
            {"do": a.do, "at": a.at, "n": a.n, "delay_ms": a.delay_ms, **({"text": a.text} if a.do == "steer" else {})}
            for a in plan.actions_for(number)
        ]
        turns.append({"turn": number, "input": script.input, "actions": actions})
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
