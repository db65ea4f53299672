"""``codex-harness show``: the timeline of a saved record or a bare wire.jsonl."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_contracts_records import approval_record, interrupted_record

from contracts.exitcodes import FAILED, INVALID_INPUT, OK, USAGE
from contracts.record import WireEntry
from harness.cli import main


def test_show_record_dir_marks_windows_faults_and_failures(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    record = approval_record(answer=False)
    record.wire.append(WireEntry(9.0, "s2c", error="not_json", raw="this is not JSON", size=16))
    record.save(tmp_path / "rec")
    # The contracts are judged as `run` judges them: a failing check fails show too (it exited 0 before).
    assert main(["show", str(tmp_path / "rec")]) == FAILED
    out = capsys.readouterr().out
    assert out.rstrip().endswith("RESULT: FAIL"), out
    assert main(["show", str(tmp_path / "rec"), "--no-checks"]) == OK  # a timeline only: no verdict
    assert "RESULT" not in capsys.readouterr().out
    assert out.splitlines()[0].startswith("command_approval on fake")
    assert "item/commandExecution/requestApproval #0" in out and "[opens server request 0]" in out
    assert "!! not a frame: not_json (16 bytes)" in out
    assert "Open at the end of the transcript:" in out and "server request 0" in out
    assert "FAIL protocol / server requests answered" in out


def test_show_bare_wire_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    record = interrupted_record()
    record.save(tmp_path / "rec")
    assert main(["show", str(tmp_path / "rec" / "wire.jsonl")]) == OK
    out = capsys.readouterr().out
    assert "→ c2s turn/interrupt" in out and "[answers interrupt" in out
    assert "turn/completed  turn turn-1 interrupted" in out
    assert "Contracts:" not in out


def test_show_unreadable_path_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["show", str(tmp_path / "nope")]) == USAGE
    (tmp_path / "bad.jsonl").write_text("{broken\n")
    assert main(["show", str(tmp_path / "bad.jsonl")]) == INVALID_INPUT  # a malformed line: invalid input
    (tmp_path / "empty").mkdir()
    assert main(["show", str(tmp_path / "empty")]) == USAGE
    assert "record.json" in capsys.readouterr().err
