"""A failing example as files a person can replay: the scenario TOML and the failing checks (JSON).

``codex-harness run --scenario DIR/NAME.toml`` plays the written scenario against the same target and
judges it by the same contracts, so the failure reproduces without the fuzzer.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path

import orjson

from contracts.checks import Check
from contracts.safe_dir import write_file
from contracts.scenario import Scenario
from contracts.scenario_file import dump, dumps


def scenario_size(scenario: Scenario) -> dict[str, int]:
    """How big a scenario is, in the units shrinking reduces (shown next to a written failure)."""
    responses = sum(len(t.responses) for t in scenario.turns)
    items = sum(len(r.items) for t in scenario.turns for r in t.responses)
    return {
        "turns": len(scenario.turns),
        "responses": responses,
        "items": items,
        "faults": len(scenario.faults),
        "actions": len(scenario.client.actions),
        "toml_lines": dumps(scenario).count("\n"),
    }


def failure_name(scenario: Scenario, prefix: str = "fuzz_failure") -> str:
    digest = hashlib.sha256(dumps(replace(scenario, name="x", description="x")).encode()).hexdigest()[:10]
    return f"{prefix}_{digest}"


def reproduce_line(target: str, scenario_file: Path, replay: str = "") -> str:
    """The command that plays a written failure again: ``replay`` is what ``fuzz --client-cmd`` adds (the client's
    command and the options that shaped its play, shell-quoted)."""
    return f"codex-harness run{' ' + replay if replay else ''} --target {target} --scenario {scenario_file}"


def write_failure(
    scenario: Scenario,
    checks: list[Check],
    out_dir: Path,
    *,
    target: str = "fake",
    seed: int | None = None,
    replay: str = "",
) -> tuple[Path, Path]:
    """Write ``NAME.toml`` (the scenario, named after its content) and ``NAME.checks.json``; returns both paths."""
    out_dir.mkdir(parents=True, exist_ok=True)
    name = failure_name(scenario)
    failing = [c for c in checks if c.status == "fail"]
    kinds = ", ".join(sorted({f"{c.contract}/{c.name}" for c in failing}))[:200]
    named = replace(
        scenario,
        name=name,
        description=f"shrunk fuzz failure on target {target}: {kinds or 'no failing check'}",
        source=None,
    )
    toml_path = dump(named, out_dir / f"{name}.toml")
    body = {
        "scenario": str(toml_path),
        "target": target,
        "seed": seed,
        "size": scenario_size(named),
        "reproduce": reproduce_line(target, toml_path, replay),
        "failing": [c.to_dict() | {"scenario": name} for c in failing],
    }
    checks_path = write_file(out_dir / f"{name}.checks.json", orjson.dumps(body, option=orjson.OPT_INDENT_2))
    return toml_path, checks_path


# --- structural simplification after hypothesis ---------------------------------------------------


def _without_turn(s: Scenario, index: int) -> Scenario:
    turns = s.turns[:index] + s.turns[index + 1 :]
    actions = tuple(
        replace(a, turn=a.turn - 1 if a.turn > index + 1 else a.turn) for a in s.client.actions if a.turn != index + 1
    )
    return replace(s, turns=turns, client=replace(s.client, actions=actions))


def _candidates(s: Scenario) -> Iterator[Scenario]:
    """Smaller scenarios, biggest cuts first: a turn, a fault, an action, a response, an item, the decisions.

    Turns and faults first: they are what a failure is told by (a scenario of so many turns and faults), and when
    each candidate that still fails costs a whole example (a client that hangs: its whole deadline) the time may
    end before the later cuts."""
    if len(s.turns) > 1:
        for i in range(len(s.turns)):
            yield _without_turn(s, i)
    for i, turn in enumerate(s.turns):
        for j in range(len(turn.faults)):
            faults = turn.faults[:j] + turn.faults[j + 1 :]
            yield replace(s, turns=(*s.turns[:i], replace(turn, faults=faults), *s.turns[i + 1 :]))
    for k in range(len(s.client.actions)):
        yield replace(s, client=replace(s.client, actions=s.client.actions[:k] + s.client.actions[k + 1 :]))
    for i, turn in enumerate(s.turns):
        for r in range(len(turn.responses)):
            responses = turn.responses[:r] + turn.responses[r + 1 :]
            yield replace(s, turns=(*s.turns[:i], replace(turn, responses=responses), *s.turns[i + 1 :]))
            response = turn.responses[r]
            for m in range(len(response.items)):
                items = response.items[:m] + response.items[m + 1 :]
                changed = (*turn.responses[:r], replace(response, items=items), *turn.responses[r + 1 :])
                yield replace(s, turns=(*s.turns[:i], replace(turn, responses=changed), *s.turns[i + 1 :]))
    if s.client.approvals or s.client.approval != "accept":
        yield replace(s, client=replace(s.client, approvals=(), approval="accept"))


def _kind(check: Check) -> tuple[str, str]:
    """A failing check without its turn number: cutting a turn renumbers the rest."""
    return check.contract, re.sub(r"^turn \d+ ", "turn N ", check.name)


def simplify(
    scenario: Scenario,
    checks: list[Check],
    fails: Callable[[Scenario], list[Check]],
    *,
    budget: int = 80,
) -> tuple[Scenario, list[Check]]:
    """Cut ``scenario`` down while it still fails a check it failed before (truth re-derived each time).

    Hypothesis shrinks the draws; this removes whole turns, faults, actions, responses and items, which
    the draws cannot always express. ``fails`` plays a candidate and returns its failing checks.
    """
    from harness.fuzz.truth import RacyScenario, derive

    wanted = {_kind(c) for c in checks if c.status == "fail"}
    tries = 0
    improved = True
    while improved and tries < budget:
        improved = False
        for candidate in _candidates(scenario):
            if tries >= budget:
                break
            try:
                truth = derive(candidate.turns, candidate.client, candidate.config, candidate.release)
                candidate = replace(candidate, expect=truth.expect)
            except RacyScenario:
                continue
            tries += 1
            failing = fails(candidate)
            if {_kind(c) for c in failing} & wanted:
                scenario, checks, improved = candidate, failing, True
                break
    return scenario, checks
