"""The real 0.171.0 bundles get their README verdicts; every mutation class gets its documented verdict."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_trace_support import MUTATIONS, REAL_BUNDLES, Mutation, build, copy_bundle, reference_bundle

from contracts.trace.closure import check_bundle
from contracts.trace.reader import read_bundle


@pytest.mark.parametrize("name", sorted(REAL_BUNDLES))
def test_real_bundle_verdicts(name: str) -> None:
    verdict = check_bundle(reference_bundle(name))
    assert verdict.verdict == REAL_BUNDLES[name], verdict.to_json()
    if verdict.verdict == "closed":
        assert verdict.problems == []
        assert verdict.recording_status == "complete"


def test_real_interrupt_bundle_windows() -> None:
    trace = read_bundle(reference_bundle("real-as-interrupt-pending-approval"))
    assert trace.status == "completed"
    assert trace.recording_status == "complete"
    tool = trace.tool_calls["call_1"]
    assert (tool.started_seq, tool.ended_seq, tool.status) == (12, 13, "aborted")
    assert tool.started_at_unix_ms == 1796022620717 and tool.ended_at_unix_ms == 1796022621081
    (turn,) = trace.codex_turns.values()
    assert (turn.started_seq, turn.ended_seq, turn.status) == (4, 16, "cancelled")
    (thread,) = trace.threads.values()
    assert (thread.ended_seq, thread.status) == (19, "completed")
    (inference,) = trace.inference_calls.values()
    assert (inference.started_seq, inference.ended_seq, inference.status) == (9, 10, "completed")


def test_real_sigkill_bundle_is_unclosed_with_the_pending_tool_open() -> None:
    verdict = check_bundle(reference_bundle("real-as-pending-sigkill"))
    assert verdict.verdict == "unclosed"
    assert verdict.trace is not None
    assert verdict.trace.status == "running"
    assert verdict.trace.tool_calls["call_1"].status == "running"
    assert not verdict.trace.shards[1].finished
    assert any(p.kind == "tool_call" and p.id == "call_1" for p in verdict.open_windows())


@pytest.mark.parametrize("mutation", MUTATIONS, ids=lambda m: m.name)
def test_mutation_verdict(mutation: Mutation, tmp_path: Path) -> None:
    bundle = build(mutation, tmp_path)
    verdict = check_bundle(bundle)
    assert verdict.verdict == mutation.verdict, verdict.to_json()
    if mutation.verdict == "invalid":
        assert verdict.error is not None and mutation.message in verdict.error
    else:
        text = " ".join(p.message for p in verdict.problems) + " ".join(verdict.warnings)
        assert mutation.message in text, verdict.to_json()
    if mutation.verdict == "closed" and not mutation.message:
        assert not verdict.warnings
    if mutation.problem_id is not None:
        assert any(p.id == mutation.problem_id for p in verdict.problems)


def test_every_documented_rejection_class_is_in_the_corpus() -> None:
    names = {m.name for m in MUTATIONS}
    for required in (
        "seq_gap",
        "seq_reordered",
        "event_after_recording_completed",
        "wrong_rollout_id",
        "event_schema_version",
        "manifest_schema_version",
        "manifest_missing_field",
        "shard_checksum_mismatch",
        "shard_trailing_garbage",
        "shard_truncated_in_complete_recording",
        "payload_missing",
        "payload_duplicate",
        "log_invalid_utf8",
        "log_invalid_json",
        "log_torn_last_line",
        "unknown_payload_type",
        "tool_end_for_unknown_call",
        "duplicate_thread_start",
        "duplicate_model_visible_call_id",
        "tool_start_without_context",
        "mislabeled_request_payload",
        "shard_without_checksum",
        "prefix_bug_tool_end_removed",
        "double_tool_end",
        "end_before_start",
    ):
        assert required in names


def test_prefix_bug_names_the_open_tool_call(tmp_path: Path) -> None:
    (mutation,) = [m for m in MUTATIONS if m.name == "prefix_bug_tool_end_removed"]
    verdict = check_bundle(build(mutation, tmp_path))
    assert verdict.verdict == "violation"
    assert verdict.recording_status == "complete"  # what the lenient reducer reports
    tool_problems = [p for p in verdict.problems if p.kind == "tool_call"]
    assert tool_problems and all(p.id == "call_1" and p.seq == 12 for p in tool_problems)
    assert {p.invariant for p in tool_problems} == {3, 5}
    assert tool_problems[0].time_unix_ms == 1796022620717


def test_double_end_is_caught_though_replay_keeps_the_last(tmp_path: Path) -> None:
    (mutation,) = [m for m in MUTATIONS if m.name == "double_tool_end"]
    verdict = check_bundle(build(mutation, tmp_path))
    assert verdict.trace is not None
    assert verdict.trace.tool_calls["call_1"].status == "completed"  # last one wins, as in the reducer
    (problem,) = [p for p in verdict.problems if p.invariant == 3]
    assert problem.seq == 14 and problem.id == "call_1"


@pytest.mark.parametrize("name", ["real-as-interrupt-pending-approval", "real-as-decline-approval"])
def test_every_whole_line_prefix_of_a_real_bundle_is_unclosed(name: str, tmp_path: Path) -> None:
    """A prefix of whole event lines, with a shard holding every record they reference, is never
    invalid and never closed."""
    lines = (reference_bundle(name) / "trace.jsonl").read_bytes().splitlines(keepends=True)
    for k in range(len(lines)):
        bundle = copy_bundle(name, tmp_path / f"p{k}")
        (bundle / "trace.jsonl").write_bytes(b"".join(lines[:k]))
        verdict = check_bundle(bundle)
        # sharded: only recording_completed (the last line) closes it, not rollout_ended before it
        assert verdict.verdict == "unclosed", (k, verdict.to_json())
