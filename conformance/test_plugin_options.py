"""The plugin's options from a user's point of view: ``--scenario-dir`` adds their scenarios to the matrix."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

SUITE = Path(__file__).with_name("test_scenarios.py")
USER_SCENARIO = """
name = "users_own"
description = "a user's scenario file"

[[turns]]
input = "Say hello"

[[expect.turns]]
status = "{status}"
"""


def test_scenario_dir_adds_user_scenarios(pytester: pytest.Pytester) -> None:
    scenarios = pytester.mkdir("my_scenarios")
    (scenarios / "users_own.toml").write_text(USER_SCENARIO.format(status="failed"))
    pytester.makepyfile(test_suite=SUITE.read_text())
    result = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "--scenario-dir", str(scenarios), "-k", "users_own and fake and not process", "-q"
    )
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*my_scenarios/users_own-fake*", "*terminal_status / turn 1 status*"])
