"""The client's trace bundle: every window closed on every path, approval / interrupt steps recorded."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from codex_client.trace import ClientTrace
from contracts.trace import TraceInvalid, check_bundle, read_bundle

CMD = {"type": "commandExecution", "id": "call_1", "command": "ls", "cwd": "/w", "status": "inProgress"}


def events(path: Path) -> list[dict]:
    return [orjson.loads(line)["payload"] for line in (path / "trace.jsonl").read_bytes().splitlines()]


def test_interrupted_turn_with_open_tool_is_closed(tmp_path: Path) -> None:
    trace = ClientTrace(tmp_path / "b")
    trace.thread_started("thr")
    trace.turn_started("t1", "thr")
    trace.tool_started("call_1", "commandExecution", CMD, "thr", "t1")
    trace.other("approval.opened", {"request_id": 0, "method": "m", "item_id": "call_1"}, turn_id="t1")
    trace.other("interrupt.sent", {"request_id": 5, "reason": "aborted"}, turn_id="t1")
    trace.other("interrupt.answered", {"request_id": 5, "outcome": "ok"}, turn_id="t1")
    trace.turn_ended("t1", "cancelled")  # the tool is still open: ended aborted first
    trace.other("approval.resolved", {"request_id": 0, "local": True}, turn_id="t1")
    trace.close("completed")
    verdict = check_bundle(tmp_path / "b")
    assert verdict.verdict == "closed", verdict
    replay = read_bundle(tmp_path / "b")
    assert replay.tool_calls["call_1"].status == "aborted"
    assert replay.codex_turns["t1"].status == "cancelled"
    kinds = [e.event_type for e in replay.protocol_events]
    assert kinds[:4] == ["turn_started", "approval.opened", "interrupt.sent", "interrupt.answered"]
    assert "turn_aborted" in kinds and kinds[-1] == "shutdown_complete"
    assert events(tmp_path / "b")[-1]["type"] == "recording_completed"


def test_close_ends_everything_left_open(tmp_path: Path) -> None:
    trace = ClientTrace(tmp_path / "b")
    trace.thread_started("thr")
    trace.turn_started("t1", "thr")
    trace.tool_started("call_1", "commandExecution", CMD, "thr", "t1")
    trace.close("failed")  # e.g. the server was killed mid-turn
    assert check_bundle(tmp_path / "b").verdict == "closed"
    replay = read_bundle(tmp_path / "b")
    assert replay.threads["thr"].status == "failed"
    assert replay.tool_calls["call_1"].status == "aborted"


def test_resume_and_reused_call_ids(tmp_path: Path) -> None:
    trace = ClientTrace(tmp_path / "b")
    trace.thread_started("thr")
    trace.turn_started("t1", "thr")
    trace.tool_started("call_1", "commandExecution", CMD, "thr", "t1")
    trace.tool_ended("call_1", "completed", {**CMD, "status": "completed", "exitCode": 0})
    trace.turn_ended("t1", "completed")
    trace.thread_started("thr", resumed=True)
    trace.turn_started("t2", "thr")
    trace.tool_started("call_1", "fileChange", {"type": "fileChange", "id": "call_1", "changes": []}, "thr", "t2")
    trace.tool_ended("call_1", "failed", {"status": "declined"})
    trace.turn_ended("t2", "completed")
    trace.close("completed")
    verdict = check_bundle(tmp_path / "b")
    assert verdict.verdict == "closed", verdict
    assert len(read_bundle(tmp_path / "b").tool_calls) == 2


def test_session_without_thread_still_writes_a_closed_bundle(tmp_path: Path) -> None:
    trace = ClientTrace(tmp_path / "b")
    trace.close("failed")
    assert check_bundle(tmp_path / "b").verdict == "closed"


def test_other_marker_events_are_recorded_but_not_replayable(tmp_path: Path) -> None:
    trace = ClientTrace(tmp_path / "b", marker_events="other")
    trace.thread_started("thr")
    trace.turn_started("t1", "thr")
    trace.other("interrupt.sent", {"request_id": 1, "reason": "aborted"}, turn_id="t1")
    trace.turn_ended("t1", "cancelled")
    trace.close("completed")
    assert [e["kind"] for e in events(tmp_path / "b") if e["type"] == "other"] == ["interrupt.sent"]
    with pytest.raises(TraceInvalid, match="no reducer implementation"):
        read_bundle(tmp_path / "b")
    with pytest.raises(ValueError):
        ClientTrace(tmp_path / "c", marker_events="bogus")


def test_a_writer_failure_never_escapes(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    trace = ClientTrace(blocker / "b")
    trace.thread_started("thr")
    trace.turn_started("t1", "thr")
    trace.close("completed")
    assert trace.errors and "thread_started" in trace.errors[0]
