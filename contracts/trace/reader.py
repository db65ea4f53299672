"""Strict, bounded replay of a rollout-trace bundle (what ``codex debug trace-reduce`` accepts and rejects).

``read_bundle(path)`` returns a :class:`ReplayedTrace`: rollout and recording status, every execution
window with its start, end and every raw end event seen for it (so a second end is visible even though
replay keeps the last), and the payload evidence the closure checker needs. Rejections raise
:class:`TraceInvalid` with a message close to the reducer's.
"""

from __future__ import annotations

import dataclasses
import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from contracts import bounded_parse, safe_read
from contracts.releases import trace_formats
from contracts.safe_read import Refused, TooLarge
from contracts.trace.errors import TraceInvalid, TraceLimitExceeded, TraceUnreadable
from contracts.trace.shards import DecodedShard, ShardInfo, decode_shard
from contracts.trace_format import (
    CAPTURE_STATUSES,
    CHECKED_SLOT_KINDS,
    EVENT_LOG_NAME,
    EVENT_REQUIRED_FIELDS,
    EVENT_TYPES,
    MANIFEST_FIELDS,
    MANIFEST_NAME,
    MAX_PAYLOAD_PATH,
    PAYLOAD_KINDS,
    PAYLOAD_REF_LIST_FIELDS,
    PAYLOADS_DIR_NAME,
    REF_SLOTS_BY_TYPE,
    STATUS_ENUMS,
    BundleFormat,
    shard_name,
)

WINDOW_KINDS = (
    "thread",
    "codex_turn",
    "inference_call",
    "tool_call",
    "terminal_operation",
    "compaction_request",
    "code_cell",
)
_RERUN_HINT = "Run the exact Codex executable that recorded this bundle"
_MiB = 1024 * 1024


@dataclass(frozen=True, slots=True)
class ReadLimits:
    """Bounds of one read; anything beyond them is a :class:`TraceLimitExceeded`, never an exhausted machine."""

    max_manifest_bytes: int = _MiB
    max_line_bytes: int = 64 * _MiB
    max_log_bytes: int = 4096 * _MiB
    max_events: int = 5_000_000
    max_shard_file_bytes: int = 1024 * _MiB
    max_shard_decompressed_bytes: int = 512 * _MiB
    max_bundle_decompressed_bytes: int = 2048 * _MiB
    max_shards: int = 100_000


@dataclass(slots=True)
class EndMark:
    """One raw terminal event of a window (all of them are kept, in log order)."""

    seq: int
    wall_time_unix_ms: int
    status: str
    event_type: str
    has_result_payload: bool = False
    implicit: bool = False  # an inference closed by its turn's end, not by an event of its own


@dataclass(slots=True)
class Window:
    kind: str
    id: str
    started_seq: int
    started_at_unix_ms: int
    thread_id: str | None = None
    codex_turn_id: str | None = None
    label: str = ""
    ended_seq: int | None = None
    ended_at_unix_ms: int | None = None
    status: str = "running"
    ends: list[EndMark] = field(default_factory=list)

    def end(self, mark: EndMark) -> None:
        # Replay semantics: the last terminal event wins.
        self.ends.append(mark)
        self.ended_seq = mark.seq
        self.ended_at_unix_ms = mark.wall_time_unix_ms
        self.status = mark.status

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "id": self.id,
            "thread_id": self.thread_id,
            "codex_turn_id": self.codex_turn_id,
            "label": self.label,
            "execution": {
                "started_at_unix_ms": self.started_at_unix_ms,
                "started_seq": self.started_seq,
                "ended_at_unix_ms": self.ended_at_unix_ms,
                "ended_seq": self.ended_seq,
                "status": self.status,
            },
            "end_events": [m.seq for m in self.ends if not m.implicit],
        }


@dataclass(slots=True)
class PayloadRef:
    raw_payload_id: str
    kind: str
    shard: int | None
    capture: str  # complete | truncated | omitted
    seq: int
    slot: str
    path: str | None = None  # schemas 1 and 2: the payload's own JSON file, relative to the bundle


@dataclass(slots=True)
class ProtocolEvent:
    seq: int
    wall_time_unix_ms: int
    event_type: str
    payload_id: str | None


@dataclass(slots=True)
class WallTimeRegression:
    seq: int
    wall_time_unix_ms: int
    previous_unix_ms: int


@dataclass(slots=True)
class ReplayedTrace:
    path: Path
    manifest: dict[str, Any]
    status: str = "running"
    ended_at_unix_ms: int | None = None
    recording_status: str = "unclosed"
    event_count: int = 0
    log_bytes: int = 0
    log_newline_terminated: bool = True
    #: The seq of the event that closed the recording (see :attr:`closed_by`).
    recording_completed_seq: int | None = None
    #: What closed it, read from the bundle itself: ``recording_completed``, or, in a log that has none (older
    #: releases write none, whatever their envelope schema), its last ``rollout_ended``; None: unclosed.
    closed_by: str | None = None
    rollout_ended: list[EndMark] = field(default_factory=list)
    threads: dict[str, Window] = field(default_factory=dict)
    codex_turns: dict[str, Window] = field(default_factory=dict)
    inference_calls: dict[str, Window] = field(default_factory=dict)
    tool_calls: dict[str, Window] = field(default_factory=dict)
    terminal_operations: dict[str, Window] = field(default_factory=dict)
    compaction_requests: dict[str, Window] = field(default_factory=dict)
    code_cells: dict[str, Window] = field(default_factory=dict)
    protocol_events: list[ProtocolEvent] = field(default_factory=list)
    wall_time_regressions: list[WallTimeRegression] = field(default_factory=list)
    payload_refs: dict[str, PayloadRef] = field(default_factory=dict)
    shards: dict[int, ShardInfo] = field(default_factory=dict)
    _bodies: dict[str, bytes] = field(default_factory=dict, repr=False)

    @property
    def trace_id(self) -> str:
        return str(self.manifest["trace_id"])

    @property
    def rollout_id(self) -> str:
        return str(self.manifest["rollout_id"])

    @property
    def schema_version(self) -> int:
        return int(self.manifest["schema_version"])

    @property
    def started_at_unix_ms(self) -> int:
        return int(self.manifest["started_at_unix_ms"])

    @property
    def partial_payloads(self) -> list[PayloadRef]:
        return [r for r in self.payload_refs.values() if r.capture != "complete"]

    def windows_of(self, kind: str) -> dict[str, Window]:
        return {
            "thread": self.threads,
            "codex_turn": self.codex_turns,
            "inference_call": self.inference_calls,
            "tool_call": self.tool_calls,
            "terminal_operation": self.terminal_operations,
            "compaction_request": self.compaction_requests,
            "code_cell": self.code_cells,
        }[kind]

    def windows(self) -> Iterator[Window]:
        for kind in WINDOW_KINDS:
            yield from self.windows_of(kind).values()

    def payload_body(self, raw_payload_id: str) -> bytes | None:
        """The stored body of a referenced protocol-event payload (others are verified, not kept)."""
        return self._bodies.get(raw_payload_id)

    def to_json(self) -> dict[str, Any]:
        return {
            "trace_id": self.trace_id,
            "rollout_id": self.rollout_id,
            "started_at_unix_ms": self.started_at_unix_ms,
            "ended_at_unix_ms": self.ended_at_unix_ms,
            "status": self.status,
            "recording_status": self.recording_status,
            "closed_by": self.closed_by,
            "events": self.event_count,
            "windows": [w.to_json() for w in self.windows()],
        }


def _refusal(exc: OSError, what: str, path: Path) -> TraceInvalid:
    """A member of the bundle the bounded reader would not read, or could not."""
    if isinstance(exc, TooLarge):
        return TraceLimitExceeded(f"{what} {path}: over the limit of {exc.limit} bytes ({exc.reason})")
    if isinstance(exc, Refused):  # a FIFO or /dev/zero could never end; a link is never followed
        return TraceLimitExceeded(f"open {what} {path}: not a regular file ({exc.reason})")
    if isinstance(exc, FileNotFoundError):
        return TraceInvalid(f"open {what} {path}: No such file or directory")
    return TraceInvalid(f"read {what} {path}: {exc.strerror or exc}")


def _read_bounded(bundle: Path, name: str, what: str, limit: int, dir_fd: int | None = None) -> bytes:
    """A member of the bundle, whole, bounded; ``dir_fd``: the bundle's directory (``name`` is below it)."""
    path = bundle / name
    try:
        if dir_fd is None:
            return safe_read.read_bounded(path, limit)
        return safe_read.read_bounded(name, limit, dir_fd=dir_fd, shown=path)
    except OSError as exc:
        raise _refusal(exc, what, path) from exc


def read_manifest(bundle: Path, limits: ReadLimits = ReadLimits(), *, dir_fd: int | None = None) -> dict[str, Any]:
    data = _read_bounded(bundle, MANIFEST_NAME, "manifest", limits.max_manifest_bytes, dir_fd)
    try:
        manifest = bounded_parse.loads_json(data)
    except orjson.JSONDecodeError as exc:
        raise TraceInvalid(f"parse manifest: {exc}") from exc
    if not isinstance(manifest, dict):
        raise TraceInvalid("parse manifest: invalid type, expected struct TraceBundleManifest")
    for name in MANIFEST_FIELDS:
        if name not in manifest:
            raise TraceInvalid(f"parse manifest: missing field `{name}`")
    version = manifest["schema_version"]
    if type(version) is not int:
        raise TraceInvalid("parse manifest: invalid type for `schema_version`, expected u32")
    readable = trace_formats()
    if version not in readable:
        known = ", ".join(f"{f.schema} (codex {f.release})" if f.release else str(f.schema) for f in readable.values())
        raise TraceInvalid(f"unsupported manifest schema {version} (readable: {known}). {_RERUN_HINT}")
    for name in ("trace_id", "rollout_id", "root_thread_id", "raw_event_log", "payloads_dir"):
        if not isinstance(manifest[name], str):
            raise TraceInvalid(f"parse manifest: invalid type for `{name}`, expected a string")
    if type(manifest["started_at_unix_ms"]) is not int:
        raise TraceInvalid("parse manifest: invalid type for `started_at_unix_ms`, expected i64")
    return manifest


def bundles_under(root: Path) -> list[Path]:
    """The bundles under a trace root, first started first (the thread the client started, then any other:
    a fork gets its own); ``root`` itself when it is one bundle. Bundle folders are named after a random trace
    id, so their names say nothing of which came first: the manifests' start times do."""
    try:  # listed without following a link: a bundle is a real directory of its writer's
        listed = safe_read.entries(root)
    except OSError:
        return []
    bundles = [
        root / name for name, mode in listed if stat.S_ISDIR(mode) and safe_read.is_regular(root / name / MANIFEST_NAME)
    ]
    if not bundles and safe_read.is_regular(root / MANIFEST_NAME):
        return [root]
    return sorted(bundles, key=lambda p: (_started_at(p), p.name))


def _started_at(bundle: Path) -> int:
    try:
        started = read_manifest(bundle).get("started_at_unix_ms")
    except (TraceInvalid, TraceUnreadable):
        return 2**63  # an unreadable manifest comes last; the closure check says what is wrong with it
    return started if isinstance(started, int) else 2**63


def _format_of(trace: ReplayedTrace) -> BundleFormat:
    """The format of a bundle whose manifest was read (its schema was readable then).

    An envelope schema is not one release: one release writes schema 2 without the ``kind`` schema 1 leaves out of
    ``tool_call_runtime_started``, a later one schema 2 with it, and nothing in the bundle says which wrote it. So a
    bundle of an older schema than the newest may leave out any field some older format leaves out (each
    release's own reducer reads its bundles so); the newest schema is held to its own fields."""
    formats = trace_formats()
    fmt = formats.get(trace.schema_version)
    if fmt is None:  # the release declaring it left the store since the manifest was read
        raise TraceInvalid(f"unsupported manifest schema {trace.schema_version}. {_RERUN_HINT}")
    newest = max(formats)
    if fmt.schema < newest:
        older = frozenset().union(*(f.not_written for schema, f in formats.items() if schema < newest))
        fmt = dataclasses.replace(fmt, not_written=fmt.not_written | older)
    return fmt


def _parse_error(line: int, detail: str) -> TraceInvalid:
    return TraceInvalid(f"parse trace event line {line}: {detail}", line=line)


def _expect_str(value: Any, name: str, line: int) -> str:
    if not isinstance(value, str):
        raise _parse_error(line, f"invalid type for `{name}`, expected a string")
    return value


def _opt_str(value: Any, name: str, line: int) -> str | None:
    if value is None:
        return None
    return _expect_str(value, name, line)


def _expect_int(value: Any, name: str, line: int) -> int:
    if type(value) is not int:
        raise _parse_error(line, f"invalid type for `{name}`, expected an integer")
    return value


class _Replay:
    """The replay state machine: one call to :meth:`apply` per event line (sans-IO)."""

    def __init__(self, trace: ReplayedTrace) -> None:
        self.t = trace
        self.fmt: BundleFormat = _format_of(trace)
        self.required = self.fmt.required_fields()
        self.rollout_id = trace.rollout_id
        self.expected_seq = 1
        self.last_wall: int | None = None
        self.model_visible_ids: set[str] = set()
        self.turn_inferences: dict[str, list[Window]] = {}
        self.ref_map = trace.payload_refs
        self.handlers = {etype: getattr(self, "_on_" + etype) for etype in EVENT_TYPES}
        self._owner_id: Any = None

    # -- envelope --------------------------------------------------------------------------------
    def apply(self, event: Any, line: int) -> None:
        if type(event) is not dict:
            raise _parse_error(line, "invalid type, expected struct RawTraceEvent")
        try:
            version = event["schema_version"]
            seq = event["seq"]
            wall = event["wall_time_unix_ms"]
            rollout = event["rollout_id"]
        except KeyError as exc:
            raise _parse_error(line, f"missing field `{exc.args[0]}`") from None
        if "payload" not in event:
            raise _parse_error(line, "missing field `payload`")
        if type(version) is not int or type(seq) is not int or type(wall) is not int or type(rollout) is not str:
            _expect_int(version, "schema_version", line)
            _expect_int(seq, "seq", line)
            _expect_int(wall, "wall_time_unix_ms", line)
            _expect_str(rollout, "rollout_id", line)
        thread_ctx = event.get("thread_id")
        turn_ctx = event.get("codex_turn_id")
        if (thread_ctx is not None and type(thread_ctx) is not str) or (
            turn_ctx is not None and type(turn_ctx) is not str
        ):
            _opt_str(thread_ctx, "thread_id", line)
            _opt_str(turn_ctx, "codex_turn_id", line)
        payload = event["payload"]
        if not isinstance(payload, dict):
            raise _parse_error(line, "invalid type for `payload`, expected internally tagged enum")
        etype = payload.get("type")
        if etype is None:
            raise _parse_error(line, "missing field `type`")
        if etype not in EVENT_REQUIRED_FIELDS:
            variants = ", ".join(f"`{v}`" for v in EVENT_TYPES)
            raise _parse_error(line, f"unknown variant `{etype}`, expected one of {variants}")
        for name in self.required[etype]:
            if name not in payload:
                raise _parse_error(line, f"missing field `{name}`")
        enum = STATUS_ENUMS.get(etype)
        if enum is not None and payload["status"] not in enum:
            expected = ", ".join(f"`{v}`" for v in enum)
            raise _parse_error(line, f"unknown variant `{payload['status']}`, expected one of {expected}")
        refs = self._collect_refs(etype, payload, seq, line)
        if version != self.fmt.schema:
            raise TraceInvalid(
                f"unsupported trace event schema {version} at line {line} (expected {self.fmt.schema}). {_RERUN_HINT}",
                line=line,
                seq=seq,
            )
        if seq != self.expected_seq:
            raise TraceInvalid(f"missing or reordered trace event {self.expected_seq}", line=line, seq=seq)
        self.expected_seq += 1
        if rollout != self.rollout_id:
            raise TraceInvalid("trace event belongs to another rollout", line=line, seq=seq)
        if self.last_wall is not None and wall < self.last_wall:
            self.t.wall_time_regressions.append(WallTimeRegression(seq, wall, self.last_wall))
        self.last_wall = wall if self.last_wall is None else max(wall, self.last_wall)
        if thread_ctx is not None and etype != "thread_started" and thread_ctx not in self.t.threads:
            raise TraceInvalid(f"trace event referenced unknown thread {thread_ctx}", line=line, seq=seq)
        for ref in refs:
            self._register_ref(ref)
        self.t.event_count += 1
        self.handlers[etype](payload, seq, wall, thread_ctx, turn_ctx)

    # -- payload references ----------------------------------------------------------------------
    def _collect_refs(self, etype: str, payload: dict[str, Any], seq: int, line: int) -> list[PayloadRef]:
        refs: list[PayloadRef] = []
        slots = REF_SLOTS_BY_TYPE.get(etype)
        if slots is None and etype != "other":
            return refs
        self._owner_id = payload.get("inference_call_id")
        for slot in slots or ():
            value = payload.get(slot)
            if value is not None:
                self._parse_ref(value, etype, slot, seq, line, refs, top=True)
        for slot in PAYLOAD_REF_LIST_FIELDS:
            value = payload.get(slot)
            if value is None:
                continue
            if not isinstance(value, list):
                raise _parse_error(line, f"invalid type for `{slot}`, expected a sequence")
            for item in value:
                self._parse_ref(item, etype, slot, seq, line, refs, top=True)
        return refs

    def _parse_ref(
        self, value: Any, etype: str, slot: str, seq: int, line: int, refs: list[PayloadRef], *, top: bool
    ) -> None:
        if not isinstance(value, dict):
            raise _parse_error(line, f"invalid type for `{slot}`, expected struct RawPayloadRef")
        for name in ("raw_payload_id", "kind"):
            if name not in value:
                raise _parse_error(line, f"missing field `{name}`")
        rid = _expect_str(value["raw_payload_id"], "raw_payload_id", line)
        kind_obj = value["kind"]
        kind = kind_obj.get("type") if isinstance(kind_obj, dict) else None
        if kind not in PAYLOAD_KINDS:
            expected = ", ".join(f"`{k}`" for k in PAYLOAD_KINDS)
            raise _parse_error(line, f"unknown variant `{kind}`, expected one of {expected}")
        shard = value.get("shard")
        if shard is not None and (type(shard) is not int or shard < 1):
            raise _parse_error(line, "invalid value for `shard`, expected a positive u32")
        path = value.get("path") if self.fmt.payload_files else None
        if path is not None:
            path = _payload_path(path, line)
        capture_obj = value.get("capture")
        capture = "complete"
        if capture_obj is not None:
            status = capture_obj.get("status") if isinstance(capture_obj, dict) else None
            if not isinstance(status, str) or status not in CAPTURE_STATUSES:
                expected = ", ".join(f"`{c}`" for c in CAPTURE_STATUSES)
                raise _parse_error(line, f"unknown variant `{status}`, expected one of {expected}")
            capture = status
        if top:
            expected_kind = CHECKED_SLOT_KINDS.get((etype, slot))
            if expected_kind is not None and kind != expected_kind:
                owner = self._owner_id
                raise TraceInvalid(f"inference {owner} has mislabeled request evidence", line=line, seq=seq)
        refs.append(PayloadRef(rid, kind, shard, capture, seq, slot, path))
        parts = value.get("parts")
        if parts is not None:
            if not isinstance(parts, list):
                raise _parse_error(line, "invalid type for `parts`, expected a sequence")
            for part in parts:
                self._parse_ref(part, etype, slot, seq, line, refs, top=False)

    def _register_ref(self, ref: PayloadRef) -> None:
        stored_at = ref.path if self.fmt.payload_files else ref.shard
        if ref.capture == "omitted":
            if stored_at is not None:
                raise TraceInvalid(f"omitted payload has a location: {ref.raw_payload_id}", seq=ref.seq)
        elif stored_at is None:
            raise TraceInvalid("payload omitted by size limit", seq=ref.seq)
        known = self.ref_map.get(ref.raw_payload_id)
        if known is None:
            self.ref_map[ref.raw_payload_id] = ref
        elif (known.kind, known.shard, known.path, known.capture) != (ref.kind, ref.shard, ref.path, ref.capture):
            raise TraceInvalid(f"conflicting references for payload {ref.raw_payload_id}", seq=ref.seq)

    # -- windows ---------------------------------------------------------------------------------
    def _open(
        self,
        table: dict[str, Window],
        kind: str,
        wid: str,
        seq: int,
        wall: int,
        *,
        dup: str,
        thread_id: str | None = None,
        turn_id: str | None = None,
        label: str = "",
    ) -> Window:
        if wid in table:
            raise TraceInvalid(f"{dup} {wid}", seq=seq)
        w = Window(kind, wid, seq, wall, thread_id=thread_id, codex_turn_id=turn_id, label=label)
        table[wid] = w
        return w

    def _close(
        self,
        table: dict[str, Window],
        wid: str,
        seq: int,
        wall: int,
        status: str,
        etype: str,
        *,
        unknown: str,
        has_result: bool = False,
    ) -> Window:
        w = table.get(wid)
        if w is None:
            raise TraceInvalid(f"{unknown} {wid}", seq=seq)
        w.end(EndMark(seq, wall, status, etype, has_result_payload=has_result))
        return w

    def _need_thread(self, thread_id: str, seq: int) -> None:
        if thread_id not in self.t.threads:
            raise TraceInvalid(f"trace event referenced unknown thread {thread_id}", seq=seq)

    def _on_recording_completed(self, p: dict[str, Any], seq: int, wall: int, th: str | None, tu: str | None) -> None:
        self.t.recording_completed_seq = seq
        self.t.closed_by = "recording_completed"

    def _on_rollout_started(self, p: dict[str, Any], seq: int, wall: int, th: str | None, tu: str | None) -> None:
        pass

    def _on_rollout_ended(self, p: dict[str, Any], seq: int, wall: int, th: str | None, tu: str | None) -> None:
        self.t.status = p["status"]
        self.t.ended_at_unix_ms = wall
        self.t.rollout_ended.append(EndMark(seq, wall, p["status"], "rollout_ended"))

    def _on_thread_started(self, p: dict[str, Any], seq: int, wall: int, th: str | None, tu: str | None) -> None:
        tid = _expect_str(p["thread_id"], "thread_id", seq)
        self._open(
            self.t.threads, "thread", tid, seq, wall, dup="duplicate thread start for", label=str(p["agent_path"])
        )
        if th is not None and th not in self.t.threads:
            raise TraceInvalid(f"trace event referenced unknown thread {th}", seq=seq)

    def _on_thread_ended(self, p: dict[str, Any], seq: int, wall: int, th: str | None, tu: str | None) -> None:
        tid = _expect_str(p["thread_id"], "thread_id", seq)
        self._close(
            self.t.threads, tid, seq, wall, p["status"], "thread_ended", unknown="trace event referenced unknown thread"
        )

    def _on_thread_resumed(self, p: dict[str, Any], seq: int, wall: int, th: str | None, tu: str | None) -> None:
        tid = _expect_str(p["thread_id"], "thread_id", seq)
        self._need_thread(tid, seq)
        w = self.t.threads[tid]
        if w.ended_seq is None:
            raise TraceInvalid(f"resumed thread {tid} has not ended", seq=seq)
        # A resumed thread is open again until its next thread_ended; earlier ends no longer count as doubles.
        w.ended_seq = None
        w.ended_at_unix_ms = None
        w.status = "running"
        w.ends.clear()

    def _on_codex_turn_started(self, p: dict[str, Any], seq: int, wall: int, th: str | None, tu: str | None) -> None:
        tid = _expect_str(p["thread_id"], "thread_id", seq)
        self._need_thread(tid, seq)
        turn = _expect_str(p["codex_turn_id"], "codex_turn_id", seq)
        self._open(
            self.t.codex_turns, "codex_turn", turn, seq, wall, dup="duplicate codex turn start for", thread_id=tid
        )
        self.turn_inferences[turn] = []

    def _on_codex_turn_ended(self, p: dict[str, Any], seq: int, wall: int, th: str | None, tu: str | None) -> None:
        turn = _expect_str(p["codex_turn_id"], "codex_turn_id", seq)
        status = p["status"]
        self._close(
            self.t.codex_turns,
            turn,
            seq,
            wall,
            status,
            "codex_turn_ended",
            unknown="codex turn end referenced unknown turn",
        )
        # An inference still open when its turn ends is closed by it, `cancelled` whatever the turn's status
        # (observed: a SIGINT mid-stream, and an inference left open in a turn that completed).
        for inference in self.turn_inferences.get(turn, ()):
            if inference.ended_seq is None:
                inference.end(EndMark(seq, wall, "cancelled", "codex_turn_ended", implicit=True))

    def _on_history_item_accepted(self, p: dict[str, Any], seq: int, wall: int, th: str | None, tu: str | None) -> None:
        if th is None:
            raise TraceInvalid("history acceptance has no thread", seq=seq)

    def _on_inference_started(self, p: dict[str, Any], seq: int, wall: int, th: str | None, tu: str | None) -> None:
        tid = _expect_str(p["thread_id"], "thread_id", seq)
        self._need_thread(tid, seq)
        turn = _expect_str(p["codex_turn_id"], "codex_turn_id", seq)
        if turn not in self.t.codex_turns:
            raise TraceInvalid(f"inference start referenced unknown Codex turn {turn}", seq=seq)
        cid = _expect_str(p["inference_call_id"], "inference_call_id", seq)
        w = self._open(
            self.t.inference_calls,
            "inference_call",
            cid,
            seq,
            wall,
            dup="duplicate inference start for",
            thread_id=tid,
            turn_id=turn,
            label=str(p["model"]),
        )
        self.turn_inferences.setdefault(turn, []).append(w)

    def _inference_end(self, p: dict[str, Any], seq: int, wall: int, status: str, etype: str) -> None:
        cid = _expect_str(p["inference_call_id"], "inference_call_id", seq)
        w = self.t.inference_calls.get(cid)
        if w is None:
            raise TraceInvalid(f"inference completion referenced unknown call {cid}", seq=seq)
        mark = EndMark(seq, wall, status, etype)
        if w.ended_seq is None:
            w.end(mark)
        else:
            w.ends.append(mark)  # observed: an inference keeps its first end (unlike tool calls and turns)

    def _on_inference_completed(self, p: dict[str, Any], seq: int, wall: int, th: str | None, tu: str | None) -> None:
        self._inference_end(p, seq, wall, "completed", "inference_completed")

    def _on_inference_failed(self, p: dict[str, Any], seq: int, wall: int, th: str | None, tu: str | None) -> None:
        self._inference_end(p, seq, wall, "failed", "inference_failed")

    def _on_inference_cancelled(self, p: dict[str, Any], seq: int, wall: int, th: str | None, tu: str | None) -> None:
        self._inference_end(p, seq, wall, "cancelled", "inference_cancelled")

    def _on_tool_call_started(self, p: dict[str, Any], seq: int, wall: int, th: str | None, tu: str | None) -> None:
        if th is None or tu is None:
            raise TraceInvalid("tool call start did not include thread or Codex turn context", seq=seq)
        if tu not in self.t.codex_turns:
            raise TraceInvalid(f"tool call start referenced unknown Codex turn {tu}", seq=seq)
        call = _expect_str(p["tool_call_id"], "tool_call_id", seq)
        kind = p["kind"]
        label = str(kind.get("type")) if isinstance(kind, dict) else str(kind)
        self._open(
            self.t.tool_calls,
            "tool_call",
            call,
            seq,
            wall,
            dup="duplicate tool call start for",
            thread_id=th,
            turn_id=tu,
            label=label,
        )
        visible = p.get("model_visible_call_id")
        if visible is not None:
            visible = _expect_str(visible, "model_visible_call_id", seq)
            if visible in self.model_visible_ids:
                raise TraceInvalid(f"duplicate tool call for model-visible call id {visible}", seq=seq)
            self.model_visible_ids.add(visible)

    def _on_tool_call_ended(self, p: dict[str, Any], seq: int, wall: int, th: str | None, tu: str | None) -> None:
        call = _expect_str(p["tool_call_id"], "tool_call_id", seq)
        self._close(
            self.t.tool_calls,
            call,
            seq,
            wall,
            p["status"],
            "tool_call_ended",
            unknown="tool call end referenced unknown call",
            has_result=p.get("result_payload") is not None,
        )

    def _on_tool_call_runtime_started(
        self, p: dict[str, Any], seq: int, wall: int, th: str | None, tu: str | None
    ) -> None:
        call = _expect_str(p["tool_call_id"], "tool_call_id", seq)
        tool = self.t.tool_calls.get(call)
        if tool is None:
            raise TraceInvalid(f"tool call runtime referenced unknown call {call}", seq=seq)
        kind = p.get("kind")  # schema 1 does not write it: the runtime is the call's own kind then
        if kind is None:
            label = tool.label
        else:
            label = str(kind.get("type")) if isinstance(kind, dict) else str(kind)
        self._open(
            self.t.terminal_operations,
            "terminal_operation",
            call,
            seq,
            wall,
            dup="duplicate tool call runtime start for",
            thread_id=tool.thread_id,
            turn_id=tool.codex_turn_id,
            label=label,
        )

    def _on_tool_call_runtime_ended(
        self, p: dict[str, Any], seq: int, wall: int, th: str | None, tu: str | None
    ) -> None:
        call = _expect_str(p["tool_call_id"], "tool_call_id", seq)
        self._close(
            self.t.terminal_operations,
            call,
            seq,
            wall,
            p["status"],
            "tool_call_runtime_ended",
            unknown="tool call runtime end referenced unknown call",
        )

    def _on_mcp_tool_call_correlation_assigned(
        self, p: dict[str, Any], seq: int, wall: int, th: str | None, tu: str | None
    ) -> None:
        pass

    def _on_stdin_target_resolved(self, p: dict[str, Any], seq: int, wall: int, th: str | None, tu: str | None) -> None:
        pass

    def _on_code_cell_started(self, p: dict[str, Any], seq: int, wall: int, th: str | None, tu: str | None) -> None:
        if th is None:
            raise TraceInvalid("code cell start has no thread", seq=seq)
        cell = _expect_str(p["runtime_cell_id"], "runtime_cell_id", seq)
        self._open(
            self.t.code_cells,
            "code_cell",
            cell,
            seq,
            wall,
            dup="duplicate code cell start for",
            thread_id=th,
            turn_id=tu,
        )

    def _on_code_cell_initial_response(
        self, p: dict[str, Any], seq: int, wall: int, th: str | None, tu: str | None
    ) -> None:
        cell = _expect_str(p["runtime_cell_id"], "runtime_cell_id", seq)
        if cell not in self.t.code_cells:
            raise TraceInvalid(f"code cell response referenced unknown cell {cell}", seq=seq)

    def _on_code_cell_ended(self, p: dict[str, Any], seq: int, wall: int, th: str | None, tu: str | None) -> None:
        cell = _expect_str(p["runtime_cell_id"], "runtime_cell_id", seq)
        self._close(
            self.t.code_cells,
            cell,
            seq,
            wall,
            p["status"],
            "code_cell_ended",
            unknown="code cell end referenced unknown cell",
        )

    def _on_code_cell_wait_target_resolved(
        self, p: dict[str, Any], seq: int, wall: int, th: str | None, tu: str | None
    ) -> None:
        pass

    def _on_compaction_request_started(
        self, p: dict[str, Any], seq: int, wall: int, th: str | None, tu: str | None
    ) -> None:
        tid = _expect_str(p["thread_id"], "thread_id", seq)
        self._need_thread(tid, seq)
        rid = _expect_str(p["compaction_request_id"], "compaction_request_id", seq)
        self._open(
            self.t.compaction_requests,
            "compaction_request",
            rid,
            seq,
            wall,
            dup="duplicate compaction request start for",
            thread_id=tid,
            turn_id=_opt_str(p["codex_turn_id"], "codex_turn_id", seq),
            label=str(p["model"]),
        )

    def _compaction_end(self, p: dict[str, Any], seq: int, wall: int, status: str, etype: str) -> None:
        rid = _expect_str(p["compaction_request_id"], "compaction_request_id", seq)
        self._close(
            self.t.compaction_requests,
            rid,
            seq,
            wall,
            status,
            etype,
            unknown="compaction request end referenced unknown request",
        )

    def _on_compaction_request_completed(
        self, p: dict[str, Any], seq: int, wall: int, th: str | None, tu: str | None
    ) -> None:
        self._compaction_end(p, seq, wall, "completed", "compaction_request_completed")

    def _on_compaction_request_failed(
        self, p: dict[str, Any], seq: int, wall: int, th: str | None, tu: str | None
    ) -> None:
        self._compaction_end(p, seq, wall, "failed", "compaction_request_failed")

    def _on_compaction_installed(self, p: dict[str, Any], seq: int, wall: int, th: str | None, tu: str | None) -> None:
        if th is None:
            raise TraceInvalid("compaction installation has no thread", seq=seq)

    def _on_agent_result_observed(self, p: dict[str, Any], seq: int, wall: int, th: str | None, tu: str | None) -> None:
        pass

    def _on_protocol_event_observed(
        self, p: dict[str, Any], seq: int, wall: int, th: str | None, tu: str | None
    ) -> None:
        ref = p["event_payload"]
        rid = ref.get("raw_payload_id") if isinstance(ref, dict) else None
        self.t.protocol_events.append(ProtocolEvent(seq, wall, str(p["event_type"]), rid))

    def _on_other(self, p: dict[str, Any], seq: int, wall: int, th: str | None, tu: str | None) -> None:
        # The real reducer parses `other` but has no implementation for it (observed on every release).
        raise TraceInvalid("raw trace event has no reducer implementation", seq=seq)


def iter_event_lines(path: Path, limits: ReadLimits, *, dir_fd: int | None = None) -> Iterator[tuple[int, bytes, bool]]:
    """(line number, line without its newline, newline-terminated) for each line, read incrementally.

    ``dir_fd``: ``path``'s directory, and ``path.name`` is opened in it."""
    try:
        if dir_fd is None:
            f = safe_read.open_bounded(path, limits.max_log_bytes)
        else:
            f = safe_read.open_bounded(path.name, limits.max_log_bytes, dir_fd=dir_fd, shown=path)
    except OSError as exc:
        raise _refusal(exc, "trace event log", path) from exc
    with f:
        number = 0
        cap = limits.max_line_bytes + 1
        while True:
            try:
                raw = f.readline(cap)
            except TooLarge as exc:  # still growing while it is read
                raise TraceLimitExceeded(
                    f"trace event log grew past {limits.max_log_bytes} bytes", line=number + 1
                ) from exc
            except OSError as exc:
                raise TraceInvalid(f"read trace event log {path}: {exc.strerror or exc}") from exc
            if not raw:
                return
            number += 1
            if raw[-1:] == b"\n":
                yield number, raw[:-1], True
            elif len(raw) >= cap:
                raise TraceLimitExceeded(
                    f"read trace event line {number}: longer than {limits.max_line_bytes} bytes", line=number
                )
            else:
                yield number, raw, False


def read_bundle(path: str | os.PathLike[str], limits: ReadLimits = ReadLimits()) -> ReplayedTrace:
    """Replay a bundle directory; raises :class:`TraceInvalid` for what replay rejects (plus missing checksums).

    Raises :class:`TraceUnreadable` when ``path`` is not a readable directory.
    """
    bundle = Path(path)
    try:  # the directory named (a link to it is the namer's); nothing below it is followed
        fd = safe_read.open_dir(bundle, follow=True)
    except PermissionError:
        raise TraceUnreadable(f"{bundle}: permission denied") from None
    except OSError:
        raise TraceUnreadable(f"{bundle}: not a bundle directory") from None
    try:
        return _read_bundle(bundle, fd, limits)
    finally:
        os.close(fd)


def _read_bundle(bundle: Path, fd: int, limits: ReadLimits) -> ReplayedTrace:
    manifest = read_manifest(bundle, limits, dir_fd=fd)
    trace = ReplayedTrace(path=bundle, manifest=manifest)
    replay = _Replay(trace)
    log_path = bundle / EVENT_LOG_NAME
    completed = False
    terminated = True
    loads = bounded_parse.loads_json
    for number, raw, terminated in iter_event_lines(log_path, limits, dir_fd=fd):
        trace.log_bytes += len(raw) + (1 if terminated else 0)
        if number > limits.max_events:
            # Blank lines count: 300 MB of newlines cost as much to read as events do, and judged nothing.
            raise TraceLimitExceeded(
                f"more than {limits.max_events} trace events (blank lines count as events)", line=number
            )
        if not raw.strip():
            continue  # blank lines are tolerated, even after recording_completed (observed)
        if completed:
            raise TraceInvalid("trace event after recording completed", line=number)
        if trace.event_count >= limits.max_events:
            raise TraceLimitExceeded(f"more than {limits.max_events} trace events", line=number)
        try:
            event = loads(raw)
        except orjson.JSONDecodeError as exc:
            try:
                raw.decode("utf-8")
            except UnicodeDecodeError:
                raise TraceInvalid(
                    f"read trace event line {number}: stream did not contain valid UTF-8", line=number
                ) from exc
            raise _parse_error(number, str(exc)) from exc
        try:
            replay.apply(event, number)
        except TraceInvalid as exc:
            if exc.line is None:
                exc.line = number
            raise
        except (TypeError, ValueError, KeyError, AttributeError) as exc:  # a shape the checks above did not foresee
            raise _parse_error(number, f"invalid event shape: {exc}") from exc
        # Only recording_completed ends the log: a release writing none (schema 1, and the first writers of schema 2)
        # has its reducer replay what follows rollout_ended too (a killed command's runtime end can land after
        # shutdown, observed on a schema 1 writer).
        if trace.closed_by == "recording_completed":
            completed = True
    trace.log_newline_terminated = terminated
    # Which event closes a recording is read from the bundle, not from the release: the first writers of payload
    # files (schema 1, and schema 2 up to 0.166) write no recording_completed, later ones do, and a log without
    # one is closed by its rollout_ended, as those releases' reducers take it. A sharded bundle is different:
    # its shards are finished only by recording_completed, and its writer's reducer calls the recording
    # unclosed without it (observed on the sharded writer's own trace-reduce), so rollout_ended does not close it.
    if trace.closed_by is None and trace.rollout_ended and replay.fmt.payload_files:
        trace.recording_completed_seq = trace.rollout_ended[-1].seq
        trace.closed_by = "rollout_ended"
    # A final line without its newline was still being written: it is replayed, but does not close the recording.
    closed = trace.closed_by is not None and terminated
    # Shards are finished when recording_completed is written: without it, only the referenced ones are read.
    _load_payloads(trace, bundle, fd, limits, closed=closed and trace.closed_by == "recording_completed")
    if not closed:
        trace.recording_status = "unclosed"
    elif trace.partial_payloads:
        trace.recording_status = "closed_with_partial_payloads"
    else:
        trace.recording_status = "complete"
    return trace


def _payload_path(value: Any, line: int) -> str:
    """A schema 1/2 payload file: ``payloads/<name>.json`` inside the bundle, nothing that leaves it."""
    if not isinstance(value, str) or not value or len(value) > MAX_PAYLOAD_PATH:
        raise _parse_error(line, f"invalid value for `path`, expected a file name of at most {MAX_PAYLOAD_PATH}")
    parts = value.split("/")
    if len(parts) != 2 or parts[0] != PAYLOADS_DIR_NAME or parts[1] in ("", ".", "..") or "\\" in value:
        raise _parse_error(line, f"invalid value for `path`: {value!r} is not a file in {PAYLOADS_DIR_NAME}/")
    return value


def _load_payload_files(trace: ReplayedTrace, bundle: Path, fd: int, limits: ReadLimits) -> None:
    """Schemas 1 and 2: each complete or truncated payload is its own JSON file."""
    files = [ref for ref in trace.payload_refs.values() if ref.path is not None]
    if len(files) > limits.max_shards:
        raise TraceLimitExceeded(f"more than {limits.max_shards} payload files")
    total = 0
    for ref in files:
        limit = min(limits.max_shard_file_bytes, limits.max_bundle_decompressed_bytes)
        try:
            body = _read_bounded(bundle, str(ref.path), "payload file", limit, fd)
        except TraceInvalid as exc:
            if isinstance(exc.__cause__, FileNotFoundError):
                raise TraceInvalid(f"missing payload {ref.raw_payload_id}: no file {ref.path}", seq=ref.seq) from None
            raise
        total += len(body)
        if total > limits.max_bundle_decompressed_bytes:
            raise TraceLimitExceeded(f"payload files past {limits.max_bundle_decompressed_bytes} bytes in all")
        _check_body(trace, ref, body)


def _load_payloads(trace: ReplayedTrace, bundle: Path, fd: int, limits: ReadLimits, *, closed: bool) -> None:
    if _format_of(trace).payload_files:
        _load_payload_files(trace, bundle, fd, limits)
        return
    payloads_dir = bundle / PAYLOADS_DIR_NAME
    wanted: dict[int, list[PayloadRef]] = {}
    for ref in trace.payload_refs.values():
        if ref.shard is not None:
            wanted.setdefault(ref.shard, []).append(ref)
    present: set[int] = set()
    if safe_read.is_dir(PAYLOADS_DIR_NAME, dir_fd=fd):
        try:
            names = [name for name, _ in safe_read.entries(PAYLOADS_DIR_NAME, dir_fd=fd, limit=limits.max_shards + 1)]
        except OSError as exc:
            raise TraceInvalid(f"read payload directory {payloads_dir}: {safe_read.describe(exc)}") from exc
        for name in names:
            stem = name.removesuffix(".zst")
            if name.endswith(".zst") and len(stem) == 6 and stem.isdigit() and int(stem) > 0:
                present.add(int(stem))
    if closed:
        # A closed recording's shards must all be finished, checksummed frames, referenced or not.
        shards = sorted(present | set(wanted))
    else:
        shards = sorted(wanted)
    if len(shards) > limits.max_shards:
        raise TraceLimitExceeded(f"more than {limits.max_shards} payload shards")
    total = 0
    for shard in shards:
        name = f"{PAYLOADS_DIR_NAME}/{shard_name(shard)}"
        data = _read_bounded(bundle, name, "shard", limits.max_shard_file_bytes, fd)
        decoded = decode_shard(
            data,
            shard,
            max_decompressed=min(limits.max_shard_decompressed_bytes, limits.max_bundle_decompressed_bytes - total),
        )
        total += decoded.info.decompressed_bytes
        trace.shards[shard] = decoded.info
        if closed:
            if not decoded.info.finished:
                raise TraceInvalid(f"missing footer in payload shard {shard}")
            if not decoded.info.has_checksum:
                raise TraceInvalid(
                    f"payload shard {shard} has no content checksum (a closed recording's shards must carry one)"
                )
        _check_refs(trace, decoded, wanted.get(shard, ()))


def _check_refs(trace: ReplayedTrace, decoded: DecodedShard, refs: list[PayloadRef] | tuple[()]) -> None:
    shard = decoded.info.shard
    for ref in refs:
        body = decoded.body(ref.raw_payload_id)
        if body is None:
            raise TraceInvalid(f"missing payload {ref.raw_payload_id} in shard {shard}", seq=ref.seq)
        _check_body(trace, ref, body)


def _check_body(trace: ReplayedTrace, ref: PayloadRef, body: bytes) -> None:
    """A stored payload is JSON (unless truncated); protocol-event bodies are kept for the checks."""
    if ref.capture != "truncated":
        try:
            bounded_parse.loads_json(body)
        except orjson.JSONDecodeError as exc:
            try:
                body.decode("utf-8")
            except UnicodeDecodeError as uexc:
                raise TraceInvalid(f"invalid utf-8 sequence in payload {ref.raw_payload_id}: {uexc}") from exc
            raise TraceInvalid(f"invalid payload {ref.raw_payload_id}: {exc}", seq=ref.seq) from exc
        if ref.kind == "protocol_event" and ref.slot == "event_payload":
            trace._bodies[ref.raw_payload_id] = body
