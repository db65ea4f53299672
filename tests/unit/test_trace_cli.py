"""``codex-harness trace check|show``: exit codes 0/1/2/3 and output naming kind, id, seq and time."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_trace_support import DECLINE, INTERRUPT, MUTATIONS, SIGKILL, build, reference_bundle

from harness.cli import main


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(argv)
    out = capsys.readouterr()
    return code, out.out, out.err


def mutated(name: str, tmp_path: Path) -> Path:
    (mutation,) = [m for m in MUTATIONS if m.name == name]
    return build(mutation, tmp_path)


@pytest.mark.parametrize(("name", "code"), [(INTERRUPT, 0), (DECLINE, 0), (SIGKILL, 1)])
def test_real_bundles(name: str, code: int, capsys: pytest.CaptureFixture[str]) -> None:
    got, out, _ = run(["trace", "check", str(reference_bundle(name))], capsys)
    assert got == code
    assert ("CLOSED" if code == 0 else "UNCLOSED") in out


def test_unclosed_names_the_open_windows(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(["trace", "check", str(reference_bundle(SIGKILL))], capsys)
    assert code == 1
    assert "UNCLOSED" in out and "VIOLATION" not in out
    assert "tool_call call_1, seq 12, t=1796022649898" in out


def test_pre_fix_bug_exits_1_naming_the_open_tool_call(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(["trace", "check", str(mutated("prefix_bug_tool_end_removed", tmp_path))], capsys)
    assert code == 1
    assert "VIOLATION" in out
    assert "tool_call call_1, seq 12, t=1796022620717" in out
    assert "never ended" in out


def test_double_end_exits_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(["trace", "check", str(mutated("double_tool_end", tmp_path))], capsys)
    assert code == 1 and "ended 2 times" in out and "seq 14" in out


@pytest.mark.parametrize(
    "name", ["shard_checksum_mismatch", "end_before_start", "shard_without_checksum", "log_torn_last_line"]
)
def test_invalid_exits_2(name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(["trace", "check", str(mutated(name, tmp_path))], capsys)
    assert code == 2 and "INVALID" in out


def test_partial_payloads_exit_0_with_a_warning(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(["trace", "check", str(mutated("partial_payload", tmp_path))], capsys)
    assert code == 0 and "warning" in out and "raw_payload:13" in out


def test_json_output(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(["trace", "check", "--json", str(mutated("prefix_bug_tool_end_removed", tmp_path))], capsys)
    assert code == 1
    data = json.loads(out)
    assert data["verdict"] == "violation" and data["recording_status"] == "complete"
    problem = data["problems"][0]
    assert {k: problem[k] for k in ("kind", "id", "seq", "time_unix_ms")} == {
        "kind": "tool_call",
        "id": "call_1",
        "seq": 12,
        "time_unix_ms": 1796022620717,
    }
    assert problem["invariant"] in (3, 5)


def test_json_invalid(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(["trace", "check", "--json", str(mutated("seq_gap", tmp_path))], capsys)
    assert code == 2 and json.loads(out)["verdict"] == "invalid"


def test_unreadable_paths_exit_3(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["trace", "check", str(tmp_path / "missing")], capsys)[0] == 3
    (tmp_path / "file").write_text("x")
    assert run(["trace", "check", str(tmp_path / "file")], capsys)[0] == 3
    assert run(["trace", "show", str(tmp_path / "missing")], capsys)[0] == 3


def test_usage_errors_exit_3(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["trace", "check"])
    assert exc.value.code == 3
    assert run(["trace"], capsys)[0] == 3


def test_show_prints_the_timeline(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(["trace", "show", str(reference_bundle(INTERRUPT))], capsys)
    assert code == 0
    assert "tool_call call_1 (exec_command) [aborted]" in out
    assert "12-13" in out and "recording_completed" in out


def test_show_invalid_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(["trace", "show", str(mutated("seq_gap", tmp_path))], capsys)
    assert code == 2 and "INVALID" in err
