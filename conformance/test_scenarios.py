"""The contract suite: every built-in scenario (and every file of ``--scenario-dir``) × target.

Targets: ``fake`` (in-process, virtual time), ``fake-process`` (``fake-codex app-server``), and ``real``
(marker ``real_codex``: runs when a binary is selected with ``--codex``, ``CODEX_BIN`` or
``--real-codex``). A (scenario, target) pair the scenario does not support is skipped with its reason.
Each test is independent (own process, own temp dirs), so the matrix spreads under ``pytest -n auto``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from harness import scenario_lookup
from harness.report import render_table

FAKE_TARGETS = ("fake", "fake-process")


def _cases(config: pytest.Config) -> list[tuple[str, str]]:
    cases = [(name, name) for name in scenario_lookup.builtin_names()]
    for directory in config.getoption("--scenario-dir") or []:
        for path in sorted(Path(directory).glob("*.toml")):
            cases.append((f"{Path(directory).name}/{path.stem}", str(path)))
    return cases


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if {"scenario_spec", "target"} <= set(metafunc.fixturenames):
        params = []
        for label, spec in _cases(metafunc.config):
            for target in FAKE_TARGETS:
                params.append(pytest.param(spec, target, id=f"{label}-{target}"))
            params.append(pytest.param(spec, "real", id=f"{label}-real", marks=pytest.mark.real_codex))
        metafunc.parametrize(("scenario_spec", "target"), params)


def test_contracts_hold(
    scenario_spec: str, target: str, run_scenario: Callable[..., object], request: pytest.FixtureRequest
) -> None:
    scenario = scenario_lookup.resolve(scenario_spec)
    supported, reason = scenario.supports(target)
    if not supported:
        pytest.skip(reason)
    codex = request.getfixturevalue("codex_bin") if target == "real" else None
    run = run_scenario(scenario, target, codex=codex)
    if run.skipped:  # type: ignore[attr-defined]
        pytest.skip(run.skipped)  # type: ignore[attr-defined]
    failures = [c for c in run.checks if c.status == "fail"]  # type: ignore[attr-defined]
    if failures:
        table = render_table(run.checks, ascii_only=True, show_skips=False)  # type: ignore[attr-defined]
        pytest.fail(f"{len(failures)} contract check(s) failed; replay: codex-harness show {run.saved_to}\n{table}")
