"""Against the real binary (``--codex PATH``): every built-in scenario the real target can play gives a
server side structurally equal to the fake's (``codex-harness diff`` for the whole catalogue)."""

from __future__ import annotations

from pathlib import Path

import pytest

from contracts.fidelity import render
from fake_server.catalogue import builtin_names, load_builtin

REAL_SCENARIOS = [n for n in builtin_names() if load_builtin(n).supports("real")[0]]


@pytest.mark.real_codex
@pytest.mark.parametrize("name", REAL_SCENARIOS)
def test_fake_matches_real_binary(name: str, codex_bin: Path, tmp_path: Path) -> None:
    from harness.commands.diff import fidelity_diff

    result = fidelity_diff(load_builtin(name), codex_bin, work_root=tmp_path)
    assert result.error is None and result.skipped is None, result.error or result.skipped
    assert result.differences == [], render(result.differences)
