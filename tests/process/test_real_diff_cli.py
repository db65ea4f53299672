"""``codex-harness diff``: exit codes and output (the real binary for the comparing cases)."""

from __future__ import annotations

from pathlib import Path

import pytest

from contracts.expect import Expect
from contracts.fidelity import Difference
from contracts.record import SessionRecord, WireEntry
from harness import scenario_lookup
from harness.cli import main
from harness.fidelity_run import FidelityResult, fidelity_diff, server_side


def test_usage_error_without_a_binary(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.delenv("CODEX_BIN", raising=False)
    assert main(["diff", "--scenario", "plain"]) == 3
    assert "no real codex selected" in capsys.readouterr().err


def test_unknown_scenario_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["diff", "--scenario", "no_such_scenario", "--codex", str(tmp_path)]) == 3


def test_invalid_scenario_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text("name = 3\n")
    assert main(["diff", "--scenario", str(bad), "--codex", str(tmp_path)]) == 2


def test_fake_only_scenario_cannot_be_compared(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["diff", "--scenario", "crash_mid_turn", "--codex", str(tmp_path)]) == 2
    assert "can only be produced by the fake" in capsys.readouterr().out
    result = fidelity_diff(scenario_lookup.load_builtin("crash_mid_turn"), tmp_path)
    assert not result.equal and result.skipped and result.to_json()["equal"] is False


def test_result_json_and_server_side() -> None:
    record = SessionRecord("s", "fake", Expect())
    record.wire = [
        WireEntry(0.0, "c2s", {"id": 1, "method": "initialize"}),
        WireEntry(0.1, "s2c", {"id": 1, "result": {}}),
        WireEntry(0.2, "note", note="stdin closed"),
    ]
    assert server_side(record) == [{"id": 1, "result": {}}]
    result = FidelityResult("s", "fake", differences=[Difference(1, (("turn/completed", "completed"),), (), "missing")])
    body = result.to_json()
    assert body["equal"] is False and body["differences"][0]["what"] == "missing"
    assert "segment 1: missing" in body["differences"][0]["text"]


@pytest.mark.real_codex
def test_equal_scenario_exits_0(codex_bin: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["diff", "--scenario", "plain", "--codex", str(codex_bin)]) == 0
    out = capsys.readouterr().out
    assert "plain: fake playing 0.171.0 (the binary's own release) vs real codex 0.171.0" in out
    assert "structurally equal" in out


@pytest.mark.real_codex
def test_differing_sides_exit_1(
    codex_bin: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import harness.runner

    original = harness.runner.play

    def fake_without_turn_completed(scenario, target, **kwargs):  # type: ignore[no-untyped-def]
        record = original(scenario, target, **kwargs)
        if target == "fake":  # a fake that forgets turn/completed
            record.wire = [e for e in record.wire if not (e.frame or {}).get("method") == "turn/completed"]
        return record

    monkeypatch.setattr(harness.runner, "play", fake_without_turn_completed)
    assert main(["diff", "--scenario", "plain", "--codex", str(codex_bin)]) == 1
    out = capsys.readouterr().out
    assert "segment 1: only on real: fake nothing; real turn/completed/completed" in out
    assert main(["diff", "--scenario", "plain", "--codex", str(codex_bin), "--json"]) == 1
    assert '"equal": false' in capsys.readouterr().out
