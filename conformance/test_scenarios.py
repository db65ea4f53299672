"""The contract suite: every built-in scenario (and every file of ``--scenario-dir``) × target.

Targets: ``fake`` (in-process, virtual time), ``fake-process`` (``fake-codex app-server``), and ``real``
(marker ``real_codex``: runs when a binary is selected with ``--codex``, ``CODEX_BIN`` or
``--real-codex``). A (scenario, target) pair the scenario does not support is not collected;
``test_every_scenario_says_why_a_target_is_left_out`` checks each such pair has its reason.
Each test is independent (own process, own temp dirs), so the matrix spreads under ``pytest -n auto``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from harness import scenario_lookup
from harness.report import render_table

if TYPE_CHECKING:
    from harness.runner import ScenarioRun

FAKE_TARGETS = ("fake", "fake-process")


def _cases(config: pytest.Config) -> list[tuple[str, str]]:
    cases = [(name, name) for name in scenario_lookup.builtin_names()]
    for directory in config.getoption("--scenario-dir") or []:
        for path in sorted(Path(directory).glob("*.toml")):
            cases.append((f"{Path(directory).name}/{path.stem}", str(path)))
    return cases


def _targets(spec: str) -> tuple[str, ...]:
    """The targets a scenario can run on. A pair it cannot run on is not a test at all (a skip is only for
    what this machine lacks); ``test_every_scenario_says_why_a_target_is_left_out`` keeps the reasons.
    A file that does not load keeps every target, so its test reports the load error."""
    try:
        scenario = scenario_lookup.resolve(spec)
    except Exception:
        return (*FAKE_TARGETS, "real")
    return tuple(t for t in (*FAKE_TARGETS, "real") if scenario.supports(t)[0])


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if {"scenario_spec", "target"} <= set(metafunc.fixturenames):
        params = []
        for label, spec in _cases(metafunc.config):
            for target in _targets(spec):
                marks = [pytest.mark.real_codex] if target == "real" else []
                params.append(pytest.param(spec, target, id=f"{label}-{target}", marks=marks))
        metafunc.parametrize(("scenario_spec", "target"), params)


def test_every_scenario_says_why_a_target_is_left_out() -> None:
    left_out = {}
    for name in scenario_lookup.builtin_names():
        scenario = scenario_lookup.load_builtin(name)
        for target in (*FAKE_TARGETS, "real"):
            supported, reason = scenario.supports(target)
            if not supported:
                left_out[(name, target)] = reason
    assert left_out, "no built-in scenario is fake-only: the real target's exclusion is untested"
    assert all(reason for reason in left_out.values()), left_out
    assert all(target == "real" for _, target in left_out), left_out  # every scenario runs on both fakes


def test_contracts_hold(
    scenario_spec: str, target: str, run_scenario: Callable[..., ScenarioRun], request: pytest.FixtureRequest
) -> None:
    scenario = scenario_lookup.resolve(scenario_spec)
    supported, reason = scenario.supports(target)
    if not supported:
        pytest.skip(reason)
    codex = request.getfixturevalue("codex_bin") if target == "real" else None
    run = run_scenario(scenario, target, codex=codex)
    if run.skipped:
        pytest.skip(run.skipped)
    failures = [c for c in run.checks if c.status == "fail"]
    if failures:
        table = render_table(run.checks, ascii_only=True, show_skips=False)
        pytest.fail(f"{len(failures)} contract check(s) failed; replay: codex-harness show {run.saved_to}\n{table}")
