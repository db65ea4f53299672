"""The trace writer writes the bundle formats of the older releases (schema 1: 0.163.0, schema 2: 0.169.0) for
the fake's release profiles: the reader judges them like the real ones, and the fields each event carries are
those the real release writes (tests/data/real/<release>/trace-bundles/)."""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path
from typing import Any

import orjson
import pytest
from support import paths

from contracts.trace import check_bundle
from contracts.trace.writer import TraceWriter
from fake_server.catalogue import load_builtin
from harness.runner import play

DATA = paths.DATA / "real"
SCHEMAS = {"0.163.0": 1, "0.169.0": 2, "0.171.0": 3}


def events(bundle: Path) -> list[dict[str, Any]]:
    return [orjson.loads(line) for line in (bundle / "trace.jsonl").read_bytes().splitlines()]


def write(root: Path, schema: int, *, leak: bool = False, complete: bool = True) -> Path:
    clock = iter(range(1_000, 100_000, 7))
    writer = TraceWriter(root / f"s{schema}", rollout_id="r1", now_ms=lambda: next(clock), schema=schema)
    thread = writer.start_thread("r1")
    turn = thread.start_turn("t1")
    turn.start_inference(model="m").complete(response_id="resp", output_items=[])
    tool = turn.start_tool_call("call_1", arguments={"cmd": "ls"})
    runtime = tool.start_runtime(kind="exec_command")
    runtime.end("completed")
    if leak:
        tool.leak()
        turn.interrupt()
    else:
        tool.complete(result={"ok": True})
        turn.end("completed")
    if complete:
        writer.complete()
    else:
        writer.abandon()
    return writer.path


@pytest.mark.parametrize("schema", [1, 2, 3])
def test_a_graceful_bundle_of_each_schema_is_closed(schema: int, tmp_path: Path) -> None:
    bundle = write(tmp_path, schema)
    assert orjson.loads((bundle / "manifest.json").read_bytes())["schema_version"] == schema
    verdict = check_bundle(bundle)
    assert verdict.verdict == "closed", (verdict.error, [p.describe() for p in verdict.problems])
    rows = events(bundle)
    assert {e["schema_version"] for e in rows} == {schema}
    last = rows[-1]["payload"]["type"]
    assert last == ("rollout_ended" if schema == 1 else "recording_completed")
    refs = [v for e in rows for v in e["payload"].values() if isinstance(v, dict) and "raw_payload_id" in v]
    assert refs
    if schema < 3:  # one JSON file per payload, referenced by path
        assert all("path" in r and "shard" not in r and (bundle / r["path"]).is_file() for r in refs)
        assert not list((bundle / "payloads").glob("*.zst"))
    else:
        assert all("shard" in r and "path" not in r for r in refs)


@pytest.mark.parametrize("schema", [1, 2])
def test_fields_an_older_schema_does_not_write_are_left_out(schema: int, tmp_path: Path) -> None:
    rows = {e["payload"]["type"]: e["payload"] for e in events(write(tmp_path, schema))}
    assert "prepared_prompt_payload" not in rows["inference_started"]
    assert ("kind" in rows["tool_call_runtime_started"]) is (schema == 2)


@pytest.mark.parametrize("schema", [1, 2])
def test_a_planted_unclosed_tool_fails_and_a_crash_is_unclosed(schema: int, tmp_path: Path) -> None:
    leaked = check_bundle(write(tmp_path / "leak", schema, leak=True))
    assert leaked.verdict == "violation"
    assert {p.invariant for p in leaked.problems} == {3, 5}
    assert check_bundle(write(tmp_path / "crash", schema, complete=False)).verdict == "unclosed"


def test_an_unknown_schema_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="unknown trace schema 4"):
        TraceWriter(tmp_path / "b", rollout_id="r", schema=4)


def field_sets(bundle: Path) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for e in events(bundle):
        payload = e["payload"]
        out.setdefault(payload["type"], set()).update(payload)
    return out


RECORDED = (
    "command_approval",
    "file_change_approval",
    "interrupt_pending_approval",
    "approval_cancel",
    "file_change_cancel",
    "running_command_interrupt",
    "experimental_unread",
)


def problems(bundle: Path) -> list[tuple[int, str, str | None]]:
    return sorted((p.invariant, p.kind, p.id) for p in check_bundle(bundle).problems)


@pytest.mark.parametrize("release", ["0.163.0", "0.169.0"])
@pytest.mark.parametrize("name", RECORDED)
def test_the_fake_writes_the_fields_the_real_release_writes(release: str, name: str, tmp_path: Path) -> None:
    """Per event type both write, the same payload fields; the same verdict and the same windows left open
    (an aborted turn's tool calls, pending or running, never end on these releases) as the real bundle."""
    real = DATA / release / "trace-bundles" / name
    record = play(dataclasses.replace(load_builtin(name), release=release), "fake", work_dir=tmp_path)
    assert record.server_trace is not None
    mine, theirs = field_sets(record.server_trace), field_sets(real)
    for etype in sorted(set(mine) & set(theirs)):
        assert mine[etype] == theirs[etype], etype
    assert check_bundle(record.server_trace).verdict == check_bundle(real).verdict
    assert problems(record.server_trace) == problems(real)
    assert events(record.server_trace)[-1]["payload"]["type"] == events(real)[-1]["payload"]["type"]


def move_runtime_end_last(bundle: Path) -> None:
    """The killed command's runtime end written after everything else, as a slow shutdown can leave it."""
    rows = events(bundle)
    at = next(i for i, e in enumerate(rows) if e["payload"]["type"] == "tool_call_runtime_ended")
    rows.append(rows.pop(at))
    for n, e in enumerate(rows, 1):
        e["seq"] = n
    rows[-1]["wall_time_unix_ms"] = max(rows[-1]["wall_time_unix_ms"], rows[-2]["wall_time_unix_ms"])
    (bundle / "trace.jsonl").write_bytes(b"".join(orjson.dumps(e) + b"\n" for e in rows))


@pytest.mark.parametrize(("release", "verdict"), [("0.163.0", "violation"), ("0.169.0", "invalid")])
def test_an_event_after_the_rollout_ended(release: str, verdict: str, tmp_path: Path) -> None:
    """Schema 1 has no recording_completed: 0.163.0's reducer replays an event after rollout_ended (observed once
    in a matrix run: a killed command's runtime end after shutdown); schema 2 ends at recording_completed and its
    reducer rejects anything after it. tests/real/test_real_releases.py asks each release's own reducer."""
    bundle = tmp_path / "b"
    shutil.copytree(DATA / release / "trace-bundles" / "running_command_interrupt", bundle)
    move_runtime_end_last(bundle)
    result = check_bundle(bundle)
    assert result.verdict == verdict, result.error
    if verdict == "violation":  # the same open tool call as before the move, nothing more
        assert {p.invariant for p in result.problems} == {3, 5}
