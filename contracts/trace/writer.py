"""Writer of rollout-trace bundles (envelope schema 3, replayable by ``codex debug trace-reduce``).

Another schema writes what the release declaring it writes instead (``fmt``, its folder's ``trace``, the
fake's release profiles): with ``payload_files`` one JSON file per payload referenced by ``path``, the fields
the format leaves out dropped, and with another closing event no ``recording_completed`` (``rollout_ended``
closes); :func:`contracts.releases.trace_formats`.

Ordering guarantees: ``seq`` 1..N is assigned under one :class:`threading.Lock`, wall time never decreases, a
payload record is written (and flushed as a zstd block) before the event line that references it, and the
shard's frame is finished only by :meth:`TraceWriter.complete` (or by rotation to the next shard).

"Ended exactly once" is structural: every window handle is consumed by its end (a second end raises
:class:`WindowAlreadyEnded`), and a handle used as a context manager that exits without an end records the
end its kind gets when its owner stops (``aborted``; ``inference_cancelled`` for inferences). ``leak()`` (on tool
calls and on their runtimes) is the one deliberate escape hatch, for fault injection.

Usage::

    writer = TraceWriter.create(root, rollout_id=thread_id, now_ms=clock)
    with writer.start_thread(thread_id) as thread:
        with thread.start_turn(turn_id) as turn:
            with turn.start_tool_call("call_1", arguments={"cmd": "ls"}) as tool:
                tool.complete(result={"output": "ok"})
            turn.end("completed")
        writer.complete()   # shutdown_complete, thread_ended, rollout_ended, recording_completed
"""

from __future__ import annotations

import itertools
import os
import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, Self, TypedDict

import orjson
import zstandard

from contracts.releases import trace_formats
from contracts.trace.errors import WindowAlreadyEnded, WriterClosed
from contracts.trace_format import (
    EVENT_LOG_NAME,
    EXECUTION_STATUSES,
    MANIFEST_NAME,
    PAYLOAD_KINDS,
    PAYLOADS_DIR_NAME,
    ROLLOUT_STATUSES,
    SCHEMA_VERSION,
    BundleFormat,
    encode_record,
    payload_id,
    shard_name,
)

DEFAULT_SHARD_MAX_BYTES = 16 * 1024 * 1024


def _system_now_ms() -> int:
    return time.time_ns() // 1_000_000


def _body_bytes(body: Any) -> bytes:
    if isinstance(body, bytes | bytearray | memoryview):
        return bytes(body)
    return orjson.dumps(body)


class Payload:
    """A payload to store with an event: its kind, its body (bytes, or any JSON value), optional parts."""

    __slots__ = ("body", "kind", "parts")

    def __init__(self, kind: str, body: Any, parts: Sequence[Payload] = ()) -> None:
        if kind not in PAYLOAD_KINDS:
            raise ValueError(f"unknown payload kind {kind!r}")
        self.kind = kind
        self.body = body
        self.parts = tuple(parts)


class TraceWriter:
    """Append-only writer of one bundle directory. Thread-safe: one lock orders every event."""

    def __init__(
        self,
        bundle_dir: str | os.PathLike[str],
        *,
        rollout_id: str,
        root_thread_id: str | None = None,
        trace_id: str | None = None,
        now_ms: Callable[[], int] | None = None,
        shard_max_bytes: int = DEFAULT_SHARD_MAX_BYTES,
        compression_level: int = 3,
        on_event: Callable[[int], None] | None = None,
        schema: int = SCHEMA_VERSION,
        fmt: BundleFormat | None = None,
    ) -> None:
        """``on_event(seq)`` runs under the writer lock after each event line is flushed (tests snapshot
        the files there to cut a bundle exactly where a killed writer could have left it). ``fmt``: the format
        to write (a release's, which wins over ``schema``); else the one declared for ``schema``."""
        self.path = Path(bundle_dir)
        if fmt is None:
            known = trace_formats()
            if schema not in known:
                raise ValueError(f"unknown trace schema {schema} (known: {', '.join(map(str, known))})")
            fmt = known[schema]
        self.schema = fmt.schema
        self._format = fmt
        self._on_event = on_event
        self.rollout_id = rollout_id
        self.root_thread_id = root_thread_id or rollout_id
        self.trace_id = trace_id or str(uuid.uuid4())
        self._now_ms = now_ms or _system_now_ms
        self._shard_max_bytes = max(1, shard_max_bytes)
        self._compressor = zstandard.ZstdCompressor(level=compression_level, write_checksum=True)
        self._lock = threading.Lock()
        self._seq = 0
        self._last_wall = 0
        self._payload_ids = itertools.count(1)
        self._shard_no = 0
        self._shard_file: Any = None
        self._shard_obj: Any = None
        self._shard_bytes = 0
        self._closed = False
        self._state = "open"
        self._open_windows: dict[int, _Window] = {}
        self._ended_threads: set[str] = set()
        self.path.mkdir(parents=True, exist_ok=True)
        (self.path / PAYLOADS_DIR_NAME).mkdir(exist_ok=True)
        self.started_at_unix_ms = self._now_ms()
        self._last_wall = self.started_at_unix_ms
        manifest = {
            "schema_version": self.schema,
            "trace_id": self.trace_id,
            "rollout_id": self.rollout_id,
            "root_thread_id": self.root_thread_id,
            "started_at_unix_ms": self.started_at_unix_ms,
            "raw_event_log": EVENT_LOG_NAME,
            "payloads_dir": PAYLOADS_DIR_NAME,
        }
        (self.path / MANIFEST_NAME).write_bytes(orjson.dumps(manifest, option=orjson.OPT_INDENT_2))
        self._log = open(self.path / EVENT_LOG_NAME, "ab")
        self._emit({"type": "rollout_started", "trace_id": self.trace_id, "root_thread_id": self.root_thread_id})

    @classmethod
    def create(
        cls,
        root: str | os.PathLike[str],
        *,
        rollout_id: str,
        root_thread_id: str | None = None,
        trace_id: str | None = None,
        now_ms: Callable[[], int] | None = None,
        shard_max_bytes: int = DEFAULT_SHARD_MAX_BYTES,
        on_event: Callable[[int], None] | None = None,
        schema: int = SCHEMA_VERSION,
        fmt: BundleFormat | None = None,
    ) -> TraceWriter:
        """A bundle at ``root/trace-<trace_id>-<root_thread_id>/``, as the real binary names it."""
        trace_id = trace_id or str(uuid.uuid4())
        directory = Path(root) / f"trace-{trace_id}-{root_thread_id or rollout_id}"
        return cls(
            directory,
            rollout_id=rollout_id,
            root_thread_id=root_thread_id,
            trace_id=trace_id,
            now_ms=now_ms,
            shard_max_bytes=shard_max_bytes,
            on_event=on_event,
            schema=schema,
            fmt=fmt,
        )

    # -- state ---------------------------------------------------------------------------------------
    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def state(self) -> str:
        """``open``, ``completed`` (graceful shutdown written) or ``abandoned`` (left as a crash leaves it)."""
        return self._state

    @property
    def seq(self) -> int:
        return self._seq

    # -- low level -----------------------------------------------------------------------------------
    def _write_payload(self, payload: Payload) -> dict[str, Any]:
        """Store one payload (and its parts) in the current shard; returns its RawPayloadRef. Lock held."""
        part_refs = [self._write_payload(part) for part in payload.parts]
        if self._format.payload_files:
            return self._write_payload_file(payload, part_refs)
        if self._shard_obj is None:
            self._shard_no += 1
            self._shard_file = open(self.path / PAYLOADS_DIR_NAME / shard_name(self._shard_no), "wb")
            self._shard_obj = self._compressor.compressobj()
            self._shard_bytes = 0
        rid = payload_id(next(self._payload_ids))
        chunk = self._shard_obj.compress(encode_record(rid, _body_bytes(payload.body)))
        # Each record ends a zstd block, so a killed writer leaves every earlier record decodable.
        chunk += self._shard_obj.flush(zstandard.COMPRESSOBJ_FLUSH_BLOCK)
        self._shard_file.write(chunk)
        self._shard_file.flush()
        self._shard_bytes += len(chunk)
        ref: dict[str, Any] = {"raw_payload_id": rid, "kind": {"type": payload.kind}, "shard": self._shard_no}
        if part_refs:
            ref["parts"] = part_refs
        if self._shard_bytes >= self._shard_max_bytes:
            self._finish_shard()
        return ref

    def _write_payload_file(self, payload: Payload, part_refs: list[dict[str, Any]]) -> dict[str, Any]:
        """Schemas 1 and 2: the payload is ``payloads/<n>.json`` (indented, as those releases write it)."""
        n = next(self._payload_ids)
        name = f"{n}.json"
        body = payload.body
        if isinstance(body, bytes | bytearray | memoryview):
            data = bytes(body)
        else:
            data = orjson.dumps(body, option=orjson.OPT_INDENT_2)
        (self.path / PAYLOADS_DIR_NAME / name).write_bytes(data)
        ref: dict[str, Any] = {
            "raw_payload_id": payload_id(n),
            "kind": {"type": payload.kind},
            "path": f"{PAYLOADS_DIR_NAME}/{name}",
        }
        if part_refs:
            ref["parts"] = part_refs
        return ref

    def _finish_shard(self) -> None:
        if self._shard_obj is None:
            return
        self._shard_file.write(self._shard_obj.flush(zstandard.COMPRESSOBJ_FLUSH_FINISH))
        self._shard_file.close()
        self._shard_obj = None
        self._shard_file = None

    def _emit(
        self,
        payload: dict[str, Any],
        *,
        thread_id: str | None = None,
        codex_turn_id: str | None = None,
        payloads: Mapping[str, Payload | None] | None = None,
    ) -> int:
        """Write one event (its payload records first); returns its seq."""
        with self._lock:
            if self._closed:
                raise WriterClosed(f"trace writer is {self._state}")
            body = dict(payload)
            etype = body.get("type")
            for slot, value in (payloads or {}).items():
                if (etype, slot) not in self._format.not_written:
                    body[slot] = None if value is None else self._write_payload(value)
            for dropped_type, name in self._format.not_written:  # what an older release does not write
                if dropped_type == etype:
                    body.pop(name, None)
            self._seq += 1
            wall = max(self._now_ms(), self._last_wall)
            self._last_wall = wall
            event = {
                "schema_version": self.schema,
                "seq": self._seq,
                "wall_time_unix_ms": wall,
                "rollout_id": self.rollout_id,
                "thread_id": thread_id,
                "codex_turn_id": codex_turn_id,
                "payload": body,
            }
            self._log.write(orjson.dumps(event) + b"\n")
            self._log.flush()
            if self._on_event is not None:
                self._on_event(self._seq)
            return self._seq

    def emit_raw(
        self,
        payload: dict[str, Any],
        *,
        thread_id: str | None = None,
        codex_turn_id: str | None = None,
        payloads: Mapping[str, Payload | None] | None = None,
    ) -> int:
        """Write any event payload as given (fault injection and vocabulary the handles do not cover)."""
        return self._emit(payload, thread_id=thread_id, codex_turn_id=codex_turn_id, payloads=payloads)

    # -- rollout-level events ----------------------------------------------------------------------
    def protocol_event_observed(self, event_type: str, payload: Any) -> int:
        return self._emit(
            {"type": "protocol_event_observed", "event_type": event_type},
            payloads={"event_payload": Payload("protocol_event", payload)},
        )

    def other(
        self,
        kind: str,
        summary: str | None = None,
        metadata: Any = None,
        payloads: Sequence[Payload] = (),
        *,
        thread_id: str | None = None,
        codex_turn_id: str | None = None,
    ) -> int:
        """An ``other`` event. Caution: the real reducer rejects any bundle holding one ("raw trace event
        has no reducer implementation"), and so does :func:`contracts.trace.reader.read_bundle`."""
        with self._lock:
            if self._closed:
                raise WriterClosed(f"trace writer is {self._state}")
            refs = [self._write_payload(p) for p in payloads]
        return self._emit(
            {"type": "other", "kind": kind, "summary": summary, "metadata": metadata, "payloads": refs},
            thread_id=thread_id,
            codex_turn_id=codex_turn_id,
        )

    def start_thread(
        self, thread_id: str, *, agent_path: str = "/root", metadata: Any = None, model: str = "mock-model"
    ) -> ThreadWindow:
        if metadata is None:
            metadata = {"thread_id": thread_id, "agent_path": agent_path, "model": model}
        seq = self._emit(
            {"type": "thread_started", "thread_id": thread_id, "agent_path": agent_path},
            payloads={"metadata_payload": Payload("session_metadata", metadata)},
        )
        return self._track(ThreadWindow(self, thread_id, seq))

    def resume_thread(self, thread_id: str) -> ThreadWindow:
        """Reopen a thread ended earlier in this bundle (``thread_resumed``); it needs a new end.

        The reducer rejects resuming a thread that has not ended ("resumed thread X has not ended").
        """
        with self._lock:
            if thread_id not in self._ended_threads:
                raise ValueError(f"thread {thread_id} has not ended in this trace; only an ended thread resumes")
            self._ended_threads.discard(thread_id)
        seq = self._emit({"type": "thread_resumed", "thread_id": thread_id}, thread_id=thread_id)
        return self._track(ThreadWindow(self, thread_id, seq))

    def _track(self, window: _W) -> _W:
        with self._lock:
            self._open_windows[id(window)] = window
        return window

    def _untrack(self, window: _Window) -> None:
        with self._lock:
            self._open_windows.pop(id(window), None)

    def open_windows(self) -> list[_Window]:
        with self._lock:
            return list(self._open_windows.values())

    # -- shutdown ------------------------------------------------------------------------------------
    def complete(self, *, rollout_status: str = "completed") -> None:
        """The graceful shutdown sequence of the real binary.

        Open windows are ended first as the fixed binary ends them when their owners stop (tool calls
        ``aborted``, inferences cancelled, turns ``cancelled`` with a ``turn_aborted`` protocol event), then
        ``shutdown_complete``, ``thread_ended`` for open threads, ``rollout_ended``, ``recording_completed``,
        and the shard's frame is finished. Leaked windows stay open, as the pre-fix bug left them.
        """
        if rollout_status not in ROLLOUT_STATUSES:
            raise ValueError(f"unknown rollout status {rollout_status!r}")
        windows = self.open_windows()
        for kind in (TerminalOperationWindow, ToolCallWindow, InferenceWindow):
            for w in reversed(windows):
                if isinstance(w, kind) and not w.ended:
                    w._end_on_owner_stop()
        for w in reversed(windows):
            if isinstance(w, TurnWindow) and not w.ended:
                w.interrupt()
        self.protocol_event_observed("shutdown_complete", {"type": "shutdown_complete"})
        for w in windows:
            if isinstance(w, ThreadWindow) and not w.ended:
                w.end("completed")
        self._emit({"type": "rollout_ended", "status": rollout_status})
        if self._format.closing_event == "recording_completed":  # schema 1 ends with rollout_ended
            self._emit({"type": "recording_completed"})
        with self._lock:
            self._closed = True
            self._state = "completed"
            self._finish_shard()
            self._log.close()

    def abandon(self) -> None:
        """Stop writing without closing anything: what a crash leaves (unclosed, frame unfinished)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._state = "abandoned"
            if self._shard_file is not None:
                self._shard_file.close()
            self._shard_obj = None
            self._shard_file = None
            self._log.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None) -> None:
        if not self._closed:
            if et is None:
                self.complete()
            else:
                self.abandon()


class _Window:
    """A window handle: consumed by its end; a context-manager exit without an end records the default end."""

    kind = "window"

    def __init__(self, writer: TraceWriter, window_id: str, started_seq: int) -> None:
        self.writer = writer
        self.id = window_id
        self.started_seq = started_seq
        self._ended = False
        self._claim_lock = threading.Lock()

    @property
    def ended(self) -> bool:
        return self._ended

    def _claim(self) -> None:
        with self._claim_lock:
            if self._ended:
                raise WindowAlreadyEnded(f"{self.kind} {self.id} was already ended")
            self._ended = True
        self.writer._untrack(self)

    def _end_on_owner_stop(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None) -> None:
        if self._ended or self.writer.closed:
            return
        self._end_on_owner_stop()


_W = Any  # a _Window subclass (kept loose: handles are created only here)


class ThreadWindow(_Window):
    kind = "thread"

    def start_turn(self, codex_turn_id: str | None = None) -> TurnWindow:
        turn_id = codex_turn_id or str(uuid.uuid4())
        seq = self.writer._emit(
            {"type": "codex_turn_started", "codex_turn_id": turn_id, "thread_id": self.id},
            thread_id=self.id,
            codex_turn_id=turn_id,
        )
        return self.writer._track(TurnWindow(self.writer, turn_id, seq, self.id))

    def end(self, status: str = "completed") -> int:
        if status not in ROLLOUT_STATUSES:
            raise ValueError(f"unknown thread status {status!r}")
        self._claim()
        seq = self.writer._emit({"type": "thread_ended", "thread_id": self.id, "status": status})
        with self.writer._lock:
            self.writer._ended_threads.add(self.id)
        return seq

    def _end_on_owner_stop(self) -> None:
        self.end("aborted")


class _TurnContext(TypedDict):
    """The keywords that place an event in its turn (``TraceWriter._emit``'s)."""

    thread_id: str
    codex_turn_id: str


class TurnWindow(_Window):
    kind = "codex_turn"

    def __init__(self, writer: TraceWriter, window_id: str, started_seq: int, thread_id: str) -> None:
        super().__init__(writer, window_id, started_seq)
        self.thread_id = thread_id
        self._tool_ids = itertools.count(1)
        self._inferences: list[InferenceWindow] = []

    def _ctx(self) -> _TurnContext:
        return {"thread_id": self.thread_id, "codex_turn_id": self.id}

    def leak(self) -> None:
        """FAULT INJECTION ONLY: drop this turn handle without any end, as a client that forgets a window does.

        The turn stays ``running`` in the bundle even after :meth:`TraceWriter.complete`; the closure checker
        reports it. The handle counts as consumed: a later end raises.
        """
        self._claim()

    def history_item_accepted(self, item_id: str, tool_output: Any = None) -> int:
        payloads = {"tool_output_payload": Payload("protocol_event", tool_output)} if tool_output is not None else None
        return self.writer._emit(
            {"type": "history_item_accepted", "item_id": item_id}, payloads=payloads, **self._ctx()
        )

    def start_inference(
        self,
        inference_call_id: str | None = None,
        *,
        model: str = "mock-model",
        provider_name: str = "mock",
        request: Any = None,
        prompt_items: Sequence[Any] = (),
    ) -> InferenceWindow:
        call_id = inference_call_id or str(uuid.uuid4())
        items = list(prompt_items)
        if request is None:
            request = {"model": model, "stream": True, "input": items}
        # The prepared prompt is the request text split around its model items (the parts), as upstream stores it.
        fragments = ['{"input":[', *([","] * max(0, len(items) - 1)), "]}"] if items else ['{"input":[]}']
        prompt = Payload("prepared_prompt", fragments, parts=[Payload("model_item", item) for item in items])
        seq = self.writer._emit(
            {
                "type": "inference_started",
                "inference_call_id": call_id,
                "thread_id": self.thread_id,
                "codex_turn_id": self.id,
                "model": model,
                "provider_name": provider_name,
            },
            payloads={
                "request_payload": Payload("inference_request", request),
                "prepared_prompt_payload": prompt,
            },
            **self._ctx(),
        )
        window = self.writer._track(InferenceWindow(self.writer, call_id, seq, self))
        self._inferences.append(window)
        return window

    def start_tool_call(
        self,
        tool_call_id: str | None = None,
        *,
        tool_name: str = "exec_command",
        kind: Mapping[str, Any] | None = None,
        arguments: Any = None,
        model_visible_call_id: str | None = None,
        invocation: Any = None,
    ) -> ToolCallWindow:
        call_id = tool_call_id or f"call_{self.id}_{next(self._tool_ids)}"
        args_text = arguments if isinstance(arguments, str) else orjson.dumps(arguments or {}).decode()
        if invocation is None:
            invocation = {
                "tool_name": tool_name,
                "tool_namespace": None,
                "payload": {"type": "function", "arguments": args_text},
            }
        tool_kind = dict(kind) if kind is not None else _tool_kind(tool_name)
        seq = self.writer._emit(
            {
                "type": "tool_call_started",
                "tool_call_id": call_id,
                "model_visible_call_id": model_visible_call_id if model_visible_call_id is not None else call_id,
                "code_mode_runtime_tool_id": None,
                "requester": {"type": "model"},
                "kind": tool_kind,
                "summary": {"type": "generic", "label": tool_name, "input_preview": args_text, "output_preview": None},
            },
            payloads={"invocation_payload": Payload("tool_invocation", invocation)},
            **self._ctx(),
        )
        return self.writer._track(ToolCallWindow(self.writer, call_id, seq, self))

    def end(self, status: str = "completed") -> int:
        """End the turn. Inferences still open are closed by this end (``cancelled`` on replay), as upstream."""
        if status not in EXECUTION_STATUSES:
            raise ValueError(f"unknown turn status {status!r}")
        self._claim()
        for inference in self._inferences:
            if not inference.ended:
                inference._claim()
        return self.writer._emit(
            {"type": "codex_turn_ended", "codex_turn_id": self.id, "status": status}, **self._ctx()
        )

    def interrupt(self, *, reason: str = "interrupted") -> int:
        """End the turn as an interrupt does: ``cancelled``, then the ``turn_aborted`` protocol event."""
        seq = self.end("cancelled")
        self.writer.protocol_event_observed(
            "turn_aborted", {"type": "turn_aborted", "turn_id": self.id, "reason": reason}
        )
        return seq

    def _end_on_owner_stop(self) -> None:
        self.end("aborted")


def _tool_kind(tool_name: str) -> dict[str, Any]:
    known = {
        "exec_command",
        "write_stdin",
        "apply_patch",
        "web",
        "image_generation",
        "spawn_agent",
        "assign_agent_task",
        "send_message",
        "wait_agent",
        "close_agent",
    }
    return {"type": tool_name} if tool_name in known else {"type": "other", "name": tool_name}


class InferenceWindow(_Window):
    kind = "inference_call"

    def __init__(self, writer: TraceWriter, window_id: str, started_seq: int, turn: TurnWindow) -> None:
        super().__init__(writer, window_id, started_seq)
        self.turn = turn

    def complete(
        self, *, response_id: str | None = None, output_items: Sequence[Any] = (), response: Any = None
    ) -> int:
        self._claim()
        if response is None:
            response = {
                "response_id": response_id,
                "upstream_request_id": None,
                "token_usage": None,
                "output_items": list(output_items),
            }
        return self.writer._emit(
            {
                "type": "inference_completed",
                "inference_call_id": self.id,
                "response_id": response_id,
                "upstream_request_id": None,
            },
            payloads={"response_payload": Payload("inference_response", response)},
            **self.turn._ctx(),
        )

    def fail(self, error: str) -> int:
        self._claim()
        return self.writer._emit(
            {
                "type": "inference_failed",
                "inference_call_id": self.id,
                "error": error,
                "upstream_request_id": None,
                "partial_response_payload": None,  # every release writes it (null when nothing streamed)
            },
            **self.turn._ctx(),
        )

    def cancel(self, reason: str = "cancelled") -> int:
        self._claim()
        return self.writer._emit(
            {
                "type": "inference_cancelled",
                "inference_call_id": self.id,
                "reason": reason,
                "upstream_request_id": None,
                "partial_response_payload": None,  # every release writes it (null: nothing kept of the stream)
            },
            **self.turn._ctx(),
        )

    def _end_on_owner_stop(self) -> None:
        self.cancel("aborted")


class ToolCallWindow(_Window):
    kind = "tool_call"

    def __init__(self, writer: TraceWriter, window_id: str, started_seq: int, turn: TurnWindow) -> None:
        super().__init__(writer, window_id, started_seq)
        self.turn = turn

    def end(self, status: str, *, result: Any = None) -> int:
        """The one terminal event of this call; ``result`` (any JSON) becomes the ``tool_result`` payload."""
        if status not in EXECUTION_STATUSES:
            raise ValueError(f"unknown tool status {status!r}")
        self._claim()
        return self.writer._emit(
            {"type": "tool_call_ended", "tool_call_id": self.id, "status": status},
            payloads={"result_payload": None if result is None else Payload("tool_result", result)},
            **self.turn._ctx(),
        )

    def complete(self, result: Any = None) -> int:
        return self.end("completed", result=result)

    def fail(self, result: Any = None) -> int:
        return self.end("failed", result=result)

    def abort(self) -> int:
        """Ended because its owner stopped (an interrupted turn): ``aborted`` with no result."""
        return self.end("aborted")

    def start_runtime(self, *, runtime: Any = None, kind: str = "exec_command") -> TerminalOperationWindow:
        seq = self.writer._emit(
            {"type": "tool_call_runtime_started", "tool_call_id": self.id, "kind": {"type": kind}},
            payloads={
                "runtime_payload": Payload("tool_runtime_event", runtime if runtime is not None else _RUNTIME_START)
            },
            **self.turn._ctx(),
        )
        return self.writer._track(TerminalOperationWindow(self.writer, self.id, seq, self.turn))

    def leak(self) -> None:
        """FAULT INJECTION ONLY: drop this handle without any end, as the pre-fix bug did.

        The call stays ``running`` in the bundle even after :meth:`TraceWriter.complete`; the closure
        checker reports it. The handle counts as consumed: a later end raises.
        """
        self._claim()

    def _end_on_owner_stop(self) -> None:
        self.abort()


class TerminalOperationWindow(_Window):
    kind = "terminal_operation"

    def __init__(self, writer: TraceWriter, window_id: str, started_seq: int, turn: TurnWindow) -> None:
        super().__init__(writer, window_id, started_seq)
        self.turn = turn

    def end(self, status: str = "completed", *, runtime: Any = None) -> int:
        if status not in EXECUTION_STATUSES:
            raise ValueError(f"unknown runtime status {status!r}")
        self._claim()
        return self.writer._emit(
            {"type": "tool_call_runtime_ended", "tool_call_id": self.id, "status": status},
            payloads={
                "runtime_payload": Payload("tool_runtime_event", runtime if runtime is not None else _RUNTIME_END)
            },
            **self.turn._ctx(),
        )

    def leak(self) -> None:
        """FAULT INJECTION ONLY: drop this runtime handle without a ``tool_call_runtime_ended``.

        What the real binary does to a cancelled patch's ``apply_patch`` runtime (every release recorded): the
        runtime stays open in the bundle even after :meth:`TraceWriter.complete`, and the closure checker
        reports it. The handle counts as consumed: a later end raises.
        """
        self._claim()

    def _end_on_owner_stop(self) -> None:
        self.end("aborted")


# Runtime payloads the reducer parses (a terminal runtime start needs `command` as a list and `cwd`).
_RUNTIME_START: dict[str, Any] = {"command": ["true"], "cwd": "/"}
_RUNTIME_END: dict[str, Any] = {"exit_code": 0}
