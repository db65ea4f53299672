"""Fidelity: every model-level built-in scenario gives the same server side on the fake and on the real binary.

A difference is a bug in the fake to fix, or a behaviour of the release the fake must learn: there is no
exception list.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from contracts.fidelity import render
from fake_server.catalogue import model_level
from harness import scenario_lookup
from harness.fidelity_run import fidelity_diff


def model_level_scenarios() -> list[str]:
    return [s.name for s in model_level()]


def test_model_level_scenarios_exist() -> None:
    names = model_level_scenarios()
    assert {"plain", "command_approval", "interrupt_pending_approval", "stream_retry"} <= set(names)


@pytest.mark.real_codex
@pytest.mark.parametrize("name", model_level_scenarios())
def test_fake_and_real_agree(codex_bin: Path, tmp_path: Path, name: str) -> None:
    result = fidelity_diff(scenario_lookup.load_builtin(name), codex_bin, work_root=tmp_path)
    assert result.skipped is None and result.error is None, result.to_json()
    trace = "\n".join(result.trace_differences)
    assert result.equal, f"{name}: fake vs real codex {result.server_version}:\n{render(result.differences)}\n{trace}"
