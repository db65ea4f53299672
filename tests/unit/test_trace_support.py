"""Shared helpers of the trace tests: locating the real bundles, and the mutation corpus built from them.

Each mutation copies a real 0.171.0 bundle into a temporary directory and changes it the way one class of
bad input does; ``MUTATIONS`` pairs it with the verdict and the message fragment the checker must give.
``reducer`` says what the real ``codex debug trace-reduce`` does with it ("accept" / "reject"); where our
checker is deliberately stricter (closure violations, missing checksums) the two differ by design.
"""

from __future__ import annotations

import json
import shutil
import stat
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import zstandard
from support import paths

from contracts.trace_format import encode_record, unpack_record_header

REPO_ROOT = paths.REPO
#: The real 0.171.0 bundles the corpus starts from, kept byte for byte (the mutations edit fixed lines and
#: payload ids of these exact bundles; see the folder's README for where they came from).
BUNDLES = REPO_ROOT / "tests" / "data" / "real" / "0.171.0" / "trace-bundles"
INTERRUPT = "real-as-interrupt-pending-approval"
DECLINE = "real-as-decline-approval"
SIGKILL = "real-as-pending-sigkill"
REAL_BUNDLES = {INTERRUPT: "closed", DECLINE: "closed", SIGKILL: "unclosed"}


def reference_bundle(name: str) -> Path:
    path = BUNDLES / name
    if not (path / "manifest.json").is_file():
        pytest.fail(f"test data missing: {path} (part of the repository; `make reference` records it again)")
    return path


def copy_bundle(name: str, dest: Path) -> Path:
    shutil.copytree(reference_bundle(name), dest)
    for p in [dest, *dest.rglob("*")]:
        p.chmod(p.stat().st_mode | stat.S_IWUSR)
    return dest


# -- editing helpers ------------------------------------------------------------------------------------
def read_lines(bundle: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (bundle / "trace.jsonl").read_text().splitlines() if line.strip()]


def write_lines(bundle: Path, lines: list[dict[str, Any]], *, renumber: bool = True) -> None:
    if renumber:
        for i, line in enumerate(lines):
            line["seq"] = i + 1
    text = "".join(json.dumps(line, separators=(",", ":")) + "\n" for line in lines)
    (bundle / "trace.jsonl").write_text(text)


def index_of(lines: list[dict[str, Any]], event_type: str, nth: int = 0) -> int:
    found = [i for i, line in enumerate(lines) if line["payload"]["type"] == event_type]
    return found[nth]


def edit_lines(fn: Callable[[list[dict[str, Any]]], Any], *, renumber: bool = True) -> Callable[[Path], None]:
    def apply(bundle: Path) -> None:
        lines = read_lines(bundle)
        result = fn(lines)
        write_lines(bundle, lines if result is None else result, renumber=renumber)

    return apply


def shard_path(bundle: Path, n: int = 1) -> Path:
    return bundle / "payloads" / f"{n:06d}.zst"


def shard_records(bundle: Path, n: int = 1) -> list[tuple[str, bytes]]:
    raw = zstandard.ZstdDecompressor().decompressobj().decompress(shard_path(bundle, n).read_bytes())
    records = []
    pos = 0
    while pos < len(raw):
        id_len, body_len = unpack_record_header(raw, pos)
        pos += 10
        rid = raw[pos : pos + id_len].decode()
        pos += id_len
        records.append((rid, raw[pos : pos + body_len]))
        pos += body_len
    return records


def write_shard(
    bundle: Path, records: list[tuple[str, bytes]], n: int = 1, *, checksum: bool = True, frames: int = 1
) -> None:
    blob = b"".join(encode_record(rid, body) for rid, body in records)
    cctx = zstandard.ZstdCompressor(write_checksum=checksum)
    if frames == 1:
        data = cctx.compress(blob)
    else:
        cut = len(blob) // 2
        data = cctx.compress(blob[:cut]) + cctx.compress(blob[cut:])
    shard_path(bundle, n).write_bytes(data)


def edit_shard(fn: Callable[[list[tuple[str, bytes]]], list[tuple[str, bytes]]], **kw: Any) -> Callable[[Path], None]:
    def apply(bundle: Path) -> None:
        write_shard(bundle, fn(shard_records(bundle)), **kw)

    return apply


def edit_manifest(fn: Callable[[dict[str, Any]], Any]) -> Callable[[Path], None]:
    def apply(bundle: Path) -> None:
        manifest = json.loads((bundle / "manifest.json").read_text())
        fn(manifest)
        (bundle / "manifest.json").write_text(json.dumps(manifest, indent=2))

    return apply


def edit_bytes(path_of: Callable[[Path], Path], fn: Callable[[bytes], bytes]) -> Callable[[Path], None]:
    def apply(bundle: Path) -> None:
        p = path_of(bundle)
        p.write_bytes(fn(p.read_bytes()))

    return apply


def log(bundle: Path) -> Path:
    return bundle / "trace.jsonl"


# -- the corpus ----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Mutation:
    name: str
    base: str
    apply: Callable[[Path], None]
    verdict: str  # closed / unclosed / violation / invalid
    message: str  # a fragment of the error (invalid) or of a problem message (violation/unclosed)
    reducer: str  # what codex 0.171.0 does: accept / reject
    problem_id: str | None = None  # the window a violation must name


def _set(path: list[Any], value: Any) -> Callable[[dict[str, Any]], None]:
    def setter(obj: dict[str, Any]) -> None:
        for key in path[:-1]:
            obj = obj[key]
        obj[path[-1]] = value

    return setter


def _at(event_type: str, fn: Callable[[dict[str, Any]], None], nth: int = 0) -> Callable[[list[dict[str, Any]]], None]:
    def apply(lines: list[dict[str, Any]]) -> None:
        fn(lines[index_of(lines, event_type, nth)])

    return apply


def _remove(event_type: str, nth: int = 0) -> Callable[[list[dict[str, Any]]], None]:
    def apply(lines: list[dict[str, Any]]) -> None:
        del lines[index_of(lines, event_type, nth)]

    return apply


def _both(*edits: Callable[[list[dict[str, Any]]], None]) -> Callable[[list[dict[str, Any]]], None]:
    def apply(lines: list[dict[str, Any]]) -> None:
        for edit in edits:
            edit(lines)

    return apply


def _duplicate(event_type: str, fn: Callable[[dict[str, Any]], None] | None = None) -> Callable[[list[dict]], None]:
    def apply(lines: list[dict[str, Any]]) -> None:
        i = index_of(lines, event_type)
        copy = json.loads(json.dumps(lines[i]))
        if fn is not None:
            fn(copy)
        lines.insert(i + 1, copy)

    return apply


def _move_after(event_type: str, anchor: str) -> Callable[[list[dict[str, Any]]], list[dict[str, Any]]]:
    def apply(lines: list[dict[str, Any]]) -> list[dict[str, Any]]:
        line = lines.pop(index_of(lines, event_type))
        lines.insert(index_of(lines, anchor) + 1, line)
        return lines

    return apply


def _move_before(event_type: str, anchor: str) -> Callable[[list[dict[str, Any]]], list[dict[str, Any]]]:
    def apply(lines: list[dict[str, Any]]) -> list[dict[str, Any]]:
        line = lines.pop(index_of(lines, event_type))
        lines.insert(index_of(lines, anchor), line)
        return lines

    return apply


def _swap(i: int, j: int) -> Callable[[list[dict[str, Any]]], None]:
    def apply(lines: list[dict[str, Any]]) -> None:
        lines[i], lines[j] = lines[j], lines[i]

    return apply


def _both(*fns: Callable[[Path], None]) -> Callable[[Path], None]:
    def apply(bundle: Path) -> None:
        for fn in fns:
            fn(bundle)

    return apply


def _replace_line(n: int, text: bytes) -> Callable[[bytes], bytes]:
    def apply(data: bytes) -> bytes:
        lines = data.split(b"\n")
        lines[n - 1] = text
        return b"\n".join(lines)

    return apply


def _without_record(rid: str) -> Callable[[list[tuple[str, bytes]]], list[tuple[str, bytes]]]:
    return lambda records: [r for r in records if r[0] != rid]


def _with_body(rid: str, body: bytes) -> Callable[[list[tuple[str, bytes]]], list[tuple[str, bytes]]]:
    return lambda records: [(r, body if r == rid else b) for r, b in records]


def _flip_checksum(data: bytes) -> bytes:
    return data[:-2] + bytes([data[-2] ^ 0xFF]) + data[-1:]


def _mark_truncated(line: dict[str, Any]) -> None:
    ref = line["payload"]["event_payload"]
    ref["capture"] = {"status": "truncated", "original_bytes": 5000, "retained_bytes": 28}


IPA, DEC, KIL = INTERRUPT, DECLINE, SIGKILL
TOOL_START_CTX = ("thread_id", "codex_turn_id")

MUTATIONS: list[Mutation] = [
    # --- replay rejections (exit 2) ---
    Mutation(
        "seq_gap", IPA, edit_lines(_remove("history_item_accepted"), renumber=False), "invalid", "reordered", "reject"
    ),
    Mutation(
        "seq_duplicate",
        IPA,
        edit_lines(_duplicate("history_item_accepted"), renumber=False),
        "invalid",
        "missing or reordered trace event",
        "reject",
    ),
    Mutation("seq_reordered", IPA, edit_lines(_swap(5, 6), renumber=False), "invalid", "reordered", "reject"),
    Mutation(
        "seq_from_zero",
        IPA,
        edit_lines(lambda ls: [line.update(seq=line["seq"] - 1) for line in ls] and None, renumber=False),
        "invalid",
        "missing or reordered trace event 1",
        "reject",
    ),
    Mutation(
        "event_after_recording_completed",
        IPA,
        edit_lines(lambda ls: [*ls, json.loads(json.dumps(ls[2]))]),
        "invalid",
        "trace event after recording completed",
        "reject",
    ),
    Mutation(
        "partial_line_after_recording_completed",
        IPA,
        edit_bytes(log, lambda b: b + b'{"schema_version":3,"se'),
        "invalid",
        "trace event after recording completed",
        "reject",
    ),
    Mutation(
        "wrong_rollout_id",
        IPA,
        edit_lines(_at("codex_turn_started", _set(["rollout_id"], "other-rollout"))),
        "invalid",
        "trace event belongs to another rollout",
        "reject",
    ),
    Mutation(
        "event_schema_version",
        IPA,
        edit_lines(lambda ls: ls[4].update(schema_version=2) and None),
        "invalid",
        "unsupported trace event schema 2 at line 5 (expected 3)",
        "reject",
    ),
    Mutation(
        "manifest_schema_version",
        IPA,
        edit_manifest(_set(["schema_version"], 2)),
        "invalid",
        "unsupported trace event schema 3 at line 1 (expected 2)",
        "reject",
    ),
    Mutation(
        "manifest_missing_field",
        IPA,
        edit_manifest(lambda m: m.pop("trace_id")),
        "invalid",
        "missing field `trace_id`",
        "reject",
    ),
    Mutation(
        "manifest_missing_started_at",
        DEC,
        edit_manifest(lambda m: m.pop("started_at_unix_ms")),
        "invalid",
        "missing field `started_at_unix_ms`",
        "reject",
    ),
    Mutation(
        "shard_checksum_mismatch",
        IPA,
        edit_bytes(shard_path, _flip_checksum),
        "invalid",
        "Restored data doesn't match checksum",
        "reject",
    ),
    Mutation(
        "shard_trailing_garbage",
        IPA,
        edit_bytes(shard_path, lambda b: b + b"trailing garbage"),
        "invalid",
        "Unknown frame descriptor",
        "reject",
    ),
    Mutation(
        "shard_truncated_in_complete_recording",
        IPA,
        edit_bytes(shard_path, lambda b: b[:-9]),
        "invalid",
        "missing footer in payload shard 1",
        "reject",
    ),
    Mutation("shard_missing", IPA, lambda b: shard_path(b).unlink(), "invalid", "No such file or directory", "reject"),
    Mutation(
        "payload_missing",
        IPA,
        edit_shard(_without_record("raw_payload:13")),
        "invalid",
        "missing payload raw_payload:13 in shard 1",
        "reject",
    ),
    Mutation(
        "payload_duplicate",
        IPA,
        edit_shard(lambda rs: [*rs, rs[3]]),
        "invalid",
        "duplicate payload raw_payload:4 in shard 1",
        "reject",
    ),
    Mutation(
        "payload_not_json",
        IPA,
        edit_shard(_with_body("raw_payload:13", b'{"type":shutdown}')),
        "invalid",
        "invalid payload raw_payload:13",
        "reject",
    ),
    Mutation(
        "payload_not_utf8",
        IPA,
        edit_shard(_with_body("raw_payload:13", b'{"type":"\xff\xfe"}')),
        "invalid",
        "invalid utf-8 sequence",
        "reject",
    ),
    Mutation(
        "log_invalid_utf8",
        IPA,
        edit_bytes(log, lambda b: b.replace(b'"item_id":"msg_', b'"item_id":"\xff\xfemsg_', 1)),
        "invalid",
        "read trace event line 6: stream did not contain valid UTF-8",
        "reject",
    ),
    Mutation(
        "log_invalid_json",
        IPA,
        edit_bytes(log, _replace_line(5, b'{"schema_version":3,"seq":5,}')),
        "invalid",
        "parse trace event line 5",
        "reject",
    ),
    Mutation(
        "log_torn_last_line",
        KIL,
        edit_bytes(log, lambda b: b + b'{"schema_version":3,"seq":13,"wall_time_unix_ms":17960'),
        "invalid",
        "parse trace event line 13",
        "reject",
    ),
    Mutation(
        "unknown_payload_type",
        IPA,
        edit_lines(_at("history_item_accepted", _set(["payload", "type"], "history_item_bogus"))),
        "invalid",
        "unknown variant `history_item_bogus`",
        "reject",
    ),
    Mutation(
        "unknown_status_variant",
        IPA,
        edit_lines(_at("tool_call_ended", _set(["payload", "status"], "weird"))),
        "invalid",
        "unknown variant `weird`",
        "reject",
    ),
    Mutation(
        "missing_payload_field",
        IPA,
        edit_lines(_at("rollout_started", lambda line: line["payload"].pop("trace_id"))),
        "invalid",
        "missing field `trace_id`",
        "reject",
    ),
    Mutation(
        "tool_end_for_unknown_call",
        IPA,
        edit_lines(_at("tool_call_ended", _set(["payload", "tool_call_id"], "call_zzz"))),
        "invalid",
        "tool call end referenced unknown call call_zzz",
        "reject",
    ),
    Mutation(
        "turn_end_for_unknown_turn",
        IPA,
        edit_lines(_at("codex_turn_ended", _set(["payload", "codex_turn_id"], "turn_zzz"))),
        "invalid",
        "codex turn end referenced unknown turn turn_zzz",
        "reject",
    ),
    Mutation(
        "inference_end_for_unknown_call",
        IPA,
        edit_lines(_at("inference_completed", _set(["payload", "inference_call_id"], "inf_zzz"))),
        "invalid",
        "inference completion referenced unknown call inf_zzz",
        "reject",
    ),
    Mutation(
        "thread_end_for_unknown_thread",
        IPA,
        edit_lines(_at("thread_ended", _set(["payload", "thread_id"], "thread_zzz"))),
        "invalid",
        "trace event referenced unknown thread thread_zzz",
        "reject",
    ),
    Mutation(
        "envelope_unknown_thread",
        IPA,
        edit_lines(_at("history_item_accepted", _set(["thread_id"], "thread_zzz"))),
        "invalid",
        "trace event referenced unknown thread thread_zzz",
        "reject",
    ),
    Mutation(
        "duplicate_thread_start",
        IPA,
        edit_lines(_duplicate("thread_started")),
        "invalid",
        "duplicate thread start for",
        "reject",
    ),
    Mutation(
        "duplicate_turn_start",
        IPA,
        edit_lines(_duplicate("codex_turn_started")),
        "invalid",
        "duplicate codex turn start for",
        "reject",
    ),
    Mutation(
        "duplicate_tool_call_start",
        IPA,
        edit_lines(_duplicate("tool_call_started", _set(["payload", "model_visible_call_id"], "call_2"))),
        "invalid",
        "duplicate tool call start for call_1",
        "reject",
    ),
    Mutation(
        "duplicate_model_visible_call_id",
        IPA,
        edit_lines(_duplicate("tool_call_started", _set(["payload", "tool_call_id"], "call_2"))),
        "invalid",
        "duplicate tool call for model-visible call id call_1",
        "reject",
    ),
    Mutation(
        "tool_start_without_context",
        IPA,
        edit_lines(_at("tool_call_started", lambda line: line.update(thread_id=None, codex_turn_id=None))),
        "invalid",
        "tool call start did not include thread or Codex turn context",
        "reject",
    ),
    Mutation(
        "history_without_thread",
        IPA,
        edit_lines(_at("history_item_accepted", lambda line: line.update(thread_id=None, codex_turn_id=None))),
        "invalid",
        "history acceptance has no thread",
        "reject",
    ),
    Mutation(
        "mislabeled_request_payload",
        IPA,
        edit_lines(_at("inference_started", _set(["payload", "request_payload", "kind", "type"], "protocol_event"))),
        "invalid",
        "has mislabeled request evidence",
        "reject",
    ),
    Mutation(
        "conflicting_payload_references",
        IPA,
        edit_lines(
            _at("protocol_event_observed", _set(["payload", "event_payload", "raw_payload_id"], "raw_payload:1"))
        ),
        "invalid",
        "conflicting references for payload raw_payload:1",
        "reject",
    ),
    Mutation(
        "payload_in_missing_shard",
        IPA,
        edit_lines(_at("thread_started", _set(["payload", "metadata_payload", "shard"], 2))),
        "invalid",
        "000002.zst",
        "reject",
    ),
    Mutation(
        "end_before_start",
        IPA,
        edit_lines(_move_before("tool_call_ended", "tool_call_started")),
        "invalid",
        "tool call end referenced unknown call call_1",
        "reject",
    ),
    Mutation(
        "other_event",
        IPA,
        edit_lines(
            lambda ls: ls.insert(
                3, {**ls[2], "payload": {"type": "other", "kind": "note", "summary": None, "payloads": []}}
            )
        ),
        "invalid",
        "raw trace event has no reducer implementation",
        "reject",
    ),
    # Stricter than 0.171.0 by design: a closed recording's shard must carry the content checksum.
    Mutation(
        "shard_without_checksum",
        IPA,
        edit_shard(lambda rs: rs, checksum=False),
        "invalid",
        "no content checksum",
        "accept",
    ),
    # Stricter by design (invariant 1: every shard of a closed recording is a finished, checksummed frame):
    # 0.171.0 ignores a shard nothing references.
    Mutation(
        "unreferenced_garbage_shard",
        IPA,
        lambda b: shard_path(b, 2).write_bytes(b"not zstd"),
        "invalid",
        "shard 2: Unknown frame descriptor",
        "accept",
    ),
    # --- closure violations the reducer accepts (exit 1) ---
    Mutation(
        "prefix_bug_tool_end_removed",
        IPA,
        edit_lines(_remove("tool_call_ended")),
        "violation",
        "never ended",
        "accept",
        problem_id="call_1",
    ),
    Mutation(
        "double_tool_end",
        IPA,
        edit_lines(_duplicate("tool_call_ended", _set(["payload", "status"], "completed"))),
        "violation",
        "ended 2 times",
        "accept",
        problem_id="call_1",
    ),
    Mutation(
        "double_turn_end",
        DEC,
        edit_lines(_duplicate("codex_turn_ended")),
        "violation",
        "ended 2 times",
        "accept",
    ),
    Mutation(
        "tool_end_status_running",
        IPA,
        edit_lines(_at("tool_call_ended", _set(["payload", "status"], "running"))),
        "violation",
        "status 'running'",
        "accept",
        problem_id="call_1",
    ),
    # The wall clock is for display: the order is seq's (the real writer reads the clock outside its seq lock, and
    # codex-cli 0.171.0 wrote a step back of 1 ms). Said as a warning, never judged.
    Mutation(
        "tool_end_time_before_start",
        IPA,
        edit_lines(_at("tool_call_ended", _set(["wall_time_unix_ms"], 1796022620000))),
        "closed",
        "before its start at",
        "accept",
    ),
    Mutation(
        "tool_end_after_interrupted_turn_end",
        IPA,
        edit_lines(_move_after("tool_call_ended", "codex_turn_ended")),
        "violation",
        "after its interrupted turn",
        "accept",
        problem_id="call_1",
    ),
    Mutation(
        "interrupt_without_turn_aborted",
        IPA,
        edit_lines(lambda ls: [line for line in ls if line["payload"].get("event_type") != "turn_aborted"]),
        "violation",
        "no turn_aborted",
        "accept",
    ),
    Mutation("thread_end_removed", IPA, edit_lines(_remove("thread_ended")), "violation", "no thread_ended", "accept"),
    Mutation(
        "rollout_end_removed", IPA, edit_lines(_remove("rollout_ended")), "violation", "no rollout_ended", "accept"
    ),
    Mutation(
        "rollout_ended_failed",
        IPA,
        edit_lines(_at("rollout_ended", _set(["payload", "status"], "failed"))),
        "violation",
        "rollout ended 'failed'",
        "accept",
    ),
    Mutation(
        "rollout_ended_twice", IPA, edit_lines(_duplicate("rollout_ended")), "violation", "written 2 times", "accept"
    ),
    Mutation(
        "wall_time_backwards",
        DEC,
        edit_lines(_at("history_item_accepted", _set(["wall_time_unix_ms"], 1796022000000), nth=2)),
        "closed",
        "went backwards",
        "accept",
    ),
    # --- unclosed (exit 1) ---
    Mutation(
        "recording_completed_and_rollout_ended_removed",
        IPA,
        edit_lines(_both(_remove("recording_completed"), _remove("rollout_ended"))),
        "unclosed",
        "recording is unclosed",
        "accept",
    ),
    # a sharded log without recording_completed stays unclosed: its shards are finished only by that event, and
    # the sharded writer's reducer calls the recording unclosed (a payload-files log is closed by rollout_ended:
    # tests/process/test_trace_formats.py, on 0.165.0's and 0.166.0's own bundles)
    Mutation(
        "recording_completed_removed",
        IPA,
        edit_lines(_remove("recording_completed")),
        "unclosed",
        "recording is unclosed",
        "accept",
    ),
    Mutation(
        "last_newline_missing", IPA, edit_bytes(log, lambda b: b.rstrip(b"\n")), "unclosed", "not terminated", "accept"
    ),
    # --- accepted variations (exit 0) ---
    Mutation(
        "blank_lines", IPA, edit_bytes(log, lambda b: b.replace(b"\n", b"\n\n", 3) + b"\n"), "closed", "", "accept"
    ),
    Mutation("crlf_lines", IPA, edit_bytes(log, lambda b: b.replace(b"\n", b"\r\n")), "closed", "", "accept"),
    Mutation(
        "unknown_extra_fields",
        IPA,
        edit_lines(lambda ls: [line.update(extra=1) or line["payload"].update(extra=2) for line in ls] and None),
        "closed",
        "",
        "accept",
    ),
    Mutation(
        "manifest_wrong_root_thread",
        IPA,
        edit_manifest(_set(["root_thread_id"], "someone-else")),
        "closed",
        "",
        "accept",
    ),
    Mutation("two_frames_in_shard", DEC, edit_shard(lambda rs: rs, frames=2), "closed", "", "accept"),
    Mutation(
        "partial_payload",
        IPA,
        edit_lines(lambda ls: _mark_truncated(ls[index_of(ls, "protocol_event_observed", 3)])),
        "closed",
        "partial payloads",
        "accept",
    ),
]


def build(mutation: Mutation, tmp_path: Path) -> Path:
    bundle = copy_bundle(mutation.base, tmp_path / mutation.name)
    mutation.apply(bundle)
    return bundle
