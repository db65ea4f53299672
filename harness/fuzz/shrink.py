"""A failing example as files a person can replay: the scenario TOML and the failing checks (JSON).

``codex-harness run --scenario DIR/NAME.toml`` plays the written scenario against the same target and
judges it by the same contracts, so the failure reproduces without the fuzzer.
"""

from __future__ import annotations

import hashlib
from dataclasses import replace
from pathlib import Path

import orjson

from contracts.checks import Check
from fake_server.scenario import Scenario
from fake_server.scenario_file import dump, dumps


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


def write_failure(
    scenario: Scenario, checks: list[Check], out_dir: Path, *, target: str = "fake", seed: int | None = None
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
        "reproduce": f"codex-harness run --target {target} --scenario {toml_path}",
        "failing": [c.to_dict() | {"scenario": name} for c in failing],
    }
    checks_path = out_dir / f"{name}.checks.json"
    checks_path.write_bytes(orjson.dumps(body, option=orjson.OPT_INDENT_2))
    return toml_path, checks_path
