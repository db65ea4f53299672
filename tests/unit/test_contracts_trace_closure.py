"""trace_closure: bundles pass the closure checker, or give exactly the verdict [expect] declares."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import orjson
from support import paths
from test_contracts_records import interrupted_record, plain_record

from contracts.checks import trace_closure
from contracts.record import WireEntry
from contracts.trace import TraceWriter


def _bundle(path: Path, how: str) -> Path:
    writer = TraceWriter(path, rollout_id="r-1", root_thread_id="thr-1")
    thread = writer.start_thread("thr-1")
    turn = thread.start_turn("turn-1")
    tool = turn.start_tool_call("call_1")
    if how == "closed":
        tool.end("completed")
        turn.end("completed")
        writer.complete()
    elif how == "unclosed":
        writer.abandon()
    else:  # the pre-fix bug: a tool awaiting approval, interrupted, never ended
        writer._untrack(tool)
        turn.interrupt()
        writer.complete()
    return path


def by_name(record) -> dict[str, object]:
    return {c.name: c for c in trace_closure.check(record)}


def test_closed_bundles_pass(tmp_path: Path) -> None:
    record = plain_record()
    record.client_trace = _bundle(tmp_path / "client", "closed")
    record.server_trace = _bundle(tmp_path / "server", "closed")
    assert {c.status for c in trace_closure.check(record)} == {"pass"}


def test_unclosed_client_trace_fails(tmp_path: Path) -> None:
    record = plain_record()
    record.client_trace = _bundle(tmp_path / "client", "unclosed")
    check = by_name(record)["client trace"]
    assert check.status == "fail" and "unclosed" in check.detail


def test_missing_client_trace_fails() -> None:
    assert by_name(plain_record())["client trace"].status == "fail"


def test_missing_server_trace_is_a_skip_with_its_reason() -> None:
    check = by_name(plain_record())["server trace"]
    assert check.status == "skip" and "wrote no server trace" in check.detail


OLDER = paths.DATA / "older-releases"


def _recorded(name: str) -> object:
    """plain_record's frame with the wire of a session recorded on an older release (``record``'s transcript)."""
    record = plain_record()
    lines = (OLDER / name).read_bytes().splitlines()
    record.wire = [WireEntry.from_json(orjson.loads(line)) for line in lines if line.strip()]
    record.expect = dataclasses.replace(record.expect, server_trace="violation")
    return record


def test_expected_violation_passes_only_when_found(tmp_path: Path) -> None:
    record = _recorded("0.150.0/approval_cancel.jsonl")  # the approval answered cancel: the turn aborted
    record.server_trace = _bundle(tmp_path / "leaky", "violation")
    check = by_name(record)["server trace"]
    assert check.status == "pass", check.detail
    record.server_trace = _bundle(tmp_path / "fixed", "closed")
    assert by_name(record)["server trace"].status == "fail"


def test_an_expected_violation_with_no_aborted_tool_call_to_strike_is_a_closed_trace_that_passes(
    tmp_path: Path,
) -> None:
    """The known bug strikes an aborted turn's open tool call. 0.130.0 ran the command experimental_unread
    expects it to ask for (its third turn completed; only its second, streaming, was interrupted) and closed its
    trace: it did nothing wrong."""
    record = _recorded("0.130.0/experimental_unread.jsonl")
    record.server_trace = _bundle(tmp_path / "closed", "closed")
    check = by_name(record)["server trace"]
    assert check.status == "pass" and "no turn was aborted with a tool call" in check.detail, check.detail
    record.server_trace = _bundle(tmp_path / "unclosed", "unclosed")
    assert by_name(record)["server trace"].status == "fail"
    assert by_name(interrupted_record())["server trace"].status != "pass"  # no bundle: never a pass on nothing


def test_crash_leaves_the_server_trace_unclosed_as_declared(tmp_path: Path) -> None:
    record = plain_record()
    record.expect = dataclasses.replace(record.expect, server_trace="unclosed")
    record.server_trace = _bundle(tmp_path / "crashed", "unclosed")
    assert by_name(record)["server trace"].status == "pass"
    record.server_trace = _bundle(tmp_path / "graceful", "closed")
    assert by_name(record)["server trace"].status == "fail"


def test_unreadable_bundle_is_invalid_and_fails(tmp_path: Path) -> None:
    (tmp_path / "junk").mkdir()
    (tmp_path / "junk" / "manifest.json").write_text("{not json")
    record = plain_record()
    record.client_trace = tmp_path / "junk"
    check = by_name(record)["client trace"]
    assert check.status == "fail" and "invalid" in check.detail


OTHERS = "other threads' server traces"


def test_one_server_bundle_has_no_check_for_others(tmp_path: Path) -> None:
    record = plain_record()
    record.server_trace = _bundle(tmp_path / "server", "closed")
    assert OTHERS not in by_name(record)


def test_an_other_threads_bundle_is_judged_like_the_first(tmp_path: Path) -> None:
    record = plain_record()
    record.server_trace = _bundle(tmp_path / "server", "closed")
    record.other_server_traces = [_bundle(tmp_path / "fork-a", "closed"), _bundle(tmp_path / "fork-b", "closed")]
    check = by_name(record)[OTHERS]
    assert check.status == "pass" and check.detail.startswith("2 bundle(s), verdict closed")
    record.other_server_traces[1] = _bundle(tmp_path / "fork-c", "unclosed")  # the first one is fine
    check = by_name(record)[OTHERS]
    assert check.status == "fail" and check.detail.startswith("1 of 2 bundle(s) off: fork-c: verdict unclosed")
    assert by_name(record)["server trace"].status == "pass"


def test_a_fork_gets_its_bundle_judged_and_kept(tmp_path: Path) -> None:
    """threads_after_turn forks its thread: the fake writes the fork a bundle, as 0.171.0 does."""
    from contracts.record import SessionRecord
    from harness import scenario_lookup
    from harness.runner import play

    spec = paths.DATA / "real" / "scenarios" / "threads_after_turn.toml"
    record = play(scenario_lookup.resolve(str(spec)), "fake", work_dir=tmp_path / "run")
    assert len(record.other_server_traces) == 1
    assert by_name(record)[OTHERS].status == "pass"
    saved = SessionRecord.load(record.save(tmp_path / "saved"))
    assert [p.name for p in saved.other_server_traces] == ["server-trace-2"]
    assert (saved.other_server_traces[0] / "manifest.json").is_file()
    assert by_name(saved)[OTHERS].status == "pass"


def test_a_record_names_only_its_own_bundle_folders(tmp_path: Path) -> None:
    import orjson

    from contracts.record import SessionRecord

    record = plain_record()
    folder = record.save(tmp_path / "r")
    body = orjson.loads((folder / "record.json").read_bytes())
    body["other_server_traces"] = ["../../elsewhere", "/etc", "server-trace-2", 7]
    (folder / "record.json").write_bytes(orjson.dumps(body))
    assert [p.name for p in SessionRecord.load(folder).other_server_traces] == ["server-trace-2"]


def test_other_threads_are_closed_when_the_first_shows_the_pre_fix_bug(tmp_path: Path) -> None:
    record = plain_record()
    record.expect = dataclasses.replace(record.expect, server_trace="violation")
    record.server_trace = _bundle(tmp_path / "leaky", "violation")
    record.other_server_traces = [_bundle(tmp_path / "fork", "closed")]
    assert by_name(record)[OTHERS].status == "pass"
    record.other_server_traces = [_bundle(tmp_path / "fork-leaky", "violation")]
    assert by_name(record)[OTHERS].status == "fail"
