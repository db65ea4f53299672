"""The runners reach a client through one seam (harness.client_under_test): no command plays a scenario past it."""

from __future__ import annotations

import ast

from support import paths

from harness.client_under_test import ClientUnderTest, CommandClient, OurClient
from harness.outside.runner import ClientSpec

ROOT = paths.REPO
#: The ways of playing a scenario that sit behind the seam.
BEHIND_THE_SEAM = {"run_many", "run_one", "run_clients", "run_outside_one", "play_outside"}


def test_no_command_plays_a_scenario_past_the_seam() -> None:
    past = []
    for path in sorted((ROOT / "harness" / "commands").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom):
                past += [f"{path.name}: {a.name}" for a in node.names if a.name in BEHIND_THE_SEAM]
    assert not past, f"play through harness.client_under_test, not: {past}"


def test_both_clients_are_clients_under_test() -> None:
    clients: list[ClientUnderTest] = [OurClient(), CommandClient(ClientSpec(["true"]))]
    assert all(callable(c.play) and callable(c.play_one) for c in clients)
