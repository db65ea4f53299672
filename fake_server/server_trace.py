"""The fake's rollout trace bundle, in the real format, written with :mod:`contracts.trace.writer`.

The engine emits semantic :class:`~fake_server.effects.TraceEvent` s (thread and turn started and
ended, model requests, tool calls, shutdown); this class turns them into the writer's windows. One
bundle per root thread under ``CODEX_ROLLOUT_TRACE_ROOT``, as the real binary lays them out.

The events follow the real server's order (the default release's bundles of every model-level built-in scenario,
recorded with ``codex-harness run --target real``, compared by :mod:`contracts.trace.sequence`): a ``warning``
protocol event before each turn (the model-metadata warning), the history items the turn accepts (two context items on
a thread's first turn, then each user input, each output item, each tool output, the interrupt marker of an aborted
turn), an open inference cancelled when its stream is abandoned, ``error`` and ``turn_complete`` protocol events after
a failed or finished turn.

Closed on graceful shutdown (the ``shutdown`` event: stdin EOF or SIGTERM), left unclosed after a
crash or kill (:meth:`finish` with ``graceful=False``). The ``trace_unclosed_tool`` fault leaks the
pending tool's window, as the pre-fix binary did: the recording completes while the tool stays open.
Time comes from the events (the engine's clock), so MockClock runs write deterministic times.
"""

from __future__ import annotations

import hashlib
import traceback
from pathlib import Path
from typing import Any

from contracts.trace.writer import (
    InferenceWindow,
    TerminalOperationWindow,
    ThreadWindow,
    ToolCallWindow,
    TraceWriter,
    TurnWindow,
)
from contracts.trace_format import SCHEMA_VERSION, BundleFormat
from fake_server.effects import TraceEvent
from fake_server.profiles import Profile

_TURN_END = {"completed": "completed", "failed": "failed"}
#: The reason every release wrote for a stream abandoned (input that arrived, an interrupt).
_STREAM_DROPPED = "response stream dropped before provider terminal event"
#: Output items accepted when their call starts, not when the response completes.
_CALL_TYPES = frozenset({"function_call", "custom_tool_call", "local_shell_call"})


class ServerTrace:
    def __init__(
        self,
        root: Path,
        schema: int = SCHEMA_VERSION,
        *,
        abort_leaves_tools_open: bool = False,
        history: str = "output",
        failed_turn_traced: str = "failed",
        fmt: BundleFormat | None = None,
    ) -> None:
        """The keywords: what the release played writes (:mod:`fake_server.profiles`); ``fmt``, its bundle
        format, wins over ``schema``."""
        self.root = Path(root)
        self.schema = fmt.schema if fmt is not None else schema
        self.fmt = fmt
        self.abort_leaves_tools_open = abort_leaves_tools_open
        self.history = history
        self.failed_turn_traced = failed_turn_traced
        self._uuids = 0
        self._threads_with_turns: set[str] = set()  # a thread's first turn accepts the context items
        self._now = 0
        self.writers: dict[str, TraceWriter] = {}
        self._threads: dict[str, ThreadWindow] = {}
        self._turns: dict[str, TurnWindow] = {}
        self._turn_writer: dict[str, str] = {}
        self._inference: dict[str, InferenceWindow] = {}
        self._tools: dict[tuple[str, str], ToolCallWindow] = {}
        self._runtimes: dict[tuple[str, str], TerminalOperationWindow] = {}
        self.broken: str | None = None  # why tracing stopped, if it did

    @classmethod
    def for_profile(cls, root: Path, profile: Profile) -> ServerTrace:
        """The trace the release ``profile`` writes: its envelope schema, its tool calls left open at abort."""
        return cls(
            root,
            profile.trace_schema,
            abort_leaves_tools_open=profile.abort_leaves_tools_open,
            history=profile.trace_history,
            failed_turn_traced=profile.failed_turn_traced,
            fmt=profile.trace,
        )

    @property
    def bundles(self) -> list[Path]:
        return [w.path for w in self.writers.values()]

    def _clock(self) -> int:
        return self._now

    def on_event(self, event: TraceEvent) -> None:
        if self.broken is not None:
            return
        self._now = max(self._now, int(event.data.get("at_ms", self._now)))
        try:
            getattr(self, f"_on_{event.kind}", self._ignore)(event.data)
        except Exception:  # tracing must never take the server down
            self.broken = traceback.format_exc(limit=3)

    def finish(self, *, graceful: bool) -> None:
        for writer in self.writers.values():
            if writer.closed:
                continue
            try:
                if graceful:
                    writer.complete()
                else:
                    writer.abandon()
            except Exception:  # a full disk: the bundle stays unfinished, the server still leaves cleanly
                self.broken = traceback.format_exc(limit=3)

    # --- events -------------------------------------------------------------------------------

    def _ignore(self, data: dict[str, Any]) -> None:
        pass

    def _on_thread_started(self, data: dict[str, Any]) -> None:
        thread_id = data["thread_id"]
        trace_id = hashlib.sha256(thread_id.encode()).hexdigest()
        trace_id = f"{trace_id[:8]}-{trace_id[8:12]}-4{trace_id[13:16]}-8{trace_id[17:20]}-{trace_id[20:32]}"
        writer = TraceWriter.create(
            self.root, rollout_id=thread_id, trace_id=trace_id, now_ms=self._clock, schema=self.schema, fmt=self.fmt
        )
        self.writers[thread_id] = writer
        self._threads[thread_id] = writer.start_thread(thread_id, model=str(data.get("model", "mock-model")))
        writer.protocol_event_observed("session_configured", {"type": "session_configured", "cwd": data.get("cwd")})

    def _item_id(self, prefix: str) -> str:
        """A history item id of the real form (``msg_<uuid>``, ``fco_<uuid>``), from a counter: deterministic."""
        self._uuids += 1
        digest = hashlib.sha256(f"{self.root}:{self._uuids}".encode()).hexdigest()
        return f"{prefix}_{digest[:8]}-{digest[8:12]}-7{digest[13:16]}-8{digest[17:20]}-{digest[20:32]}"

    def _accept(self, turn: TurnWindow, item_id: str, tool_output: Any = None) -> None:
        if self.history != "none":
            turn.history_item_accepted(item_id, tool_output if self.history == "output" else None)

    def _on_protocol_event(self, data: dict[str, Any]) -> None:
        writer = self.writers.get(str(data.get("thread_id")))
        if writer is not None and not writer.closed:
            event_type = str(data["event_type"])
            writer.protocol_event_observed(event_type, {"type": event_type, **data.get("payload", {})})

    def _on_turn_started(self, data: dict[str, Any]) -> None:
        thread_id = data["thread_id"]
        thread = self._threads[thread_id]
        turn = thread.start_turn(data["turn_id"])
        self._turns[data["turn_id"]] = turn
        thread.writer.protocol_event_observed("turn_started", {"type": "turn_started", "turn_id": data["turn_id"]})
        if thread_id not in self._threads_with_turns:  # the developer instructions and the environment context
            self._threads_with_turns.add(thread_id)
            self._accept(turn, self._item_id("msg"))
            self._accept(turn, self._item_id("msg"))

    def _on_input_accepted(self, data: dict[str, Any]) -> None:
        """A user input became part of the history (the turn's own, or one that waited for the model)."""
        turn = self._turns.get(data["turn_id"])
        if turn is not None and not turn.ended:
            self._accept(turn, self._item_id("msg"))

    def _on_inference_started(self, data: dict[str, Any]) -> None:
        turn = self._turns.get(data["turn_id"])
        if turn is not None and not turn.ended:
            self._inference[data["turn_id"]] = turn.start_inference(model=str(data.get("model", "mock-model")))

    def _on_inference_ended(self, data: dict[str, Any]) -> None:
        window = self._inference.pop(data["turn_id"], None)
        if window is None or window.ended:
            return
        status = data.get("status")
        if status == "completed":
            items = data.get("items", [])
            window.complete(response_id=data.get("response_id"), output_items=items)
            # Output items are accepted as they complete; a tool call's just before its call starts.
            for item in items:
                if isinstance(item, dict) and item.get("type") not in _CALL_TYPES and item.get("id"):
                    self._accept(window.turn, str(item["id"]))
        elif status == "cancelled":
            window.cancel(_STREAM_DROPPED)  # the stream was abandoned for input that arrived
        else:
            window.fail(str(data.get("error", "stream error")))

    def _on_tool_started(self, data: dict[str, Any]) -> None:
        turn = self._turns.get(data["turn_id"])
        if turn is None or turn.ended:
            return
        key = (data["turn_id"], data["call_id"])
        # The function call's own arguments text, as the real binary stores the invocation.
        arguments = data.get("arguments") or {"cmd": data.get("command", "")}
        self._accept(turn, f"fc_{data['call_id']}")
        self._tools[key] = turn.start_tool_call(data["call_id"], arguments=arguments)
        if data.get("item_kind") == "file_change":
            # Observed: the apply_patch runtime starts with the call, before the approval.
            self._runtimes[key] = self._tools[key].start_runtime(kind="apply_patch")

    def _on_tool_running(self, data: dict[str, Any]) -> None:
        tool = self._tools.get((data["turn_id"], data["call_id"]))
        if tool is not None and not tool.ended:
            self._runtimes[(data["turn_id"], data["call_id"])] = tool.start_runtime(kind="exec_command")

    def _on_tool_ended(self, data: dict[str, Any]) -> None:
        key = (data["turn_id"], data["call_id"])
        tool = self._tools.pop(key, None)
        runtime = self._runtimes.pop(key, None)
        if tool is None or tool.ended:
            return
        decision = data.get("decision")
        if decision == "cancel":
            if runtime is not None and not runtime.ended:
                # The real server ends a cancelled patch's call but never its apply_patch runtime (a closure
                # violation the real binary writes).
                runtime.leak()
            self._end_at_abort(tool)
            self._tool_output(tool, "aborted")
            return
        status = str(data.get("status"))
        if runtime is not None and not runtime.ended:
            runtime.end("completed" if status in ("completed", "failed") else "cancelled")
        if status == "completed" or (status == "failed" and runtime is not None):
            tool.complete(result={"status": status})
        else:
            tool.fail(result={"status": status})
        self._tool_output(tool, status)

    def _tool_output(self, tool: ToolCallWindow, status: str) -> None:
        """The call's output item, accepted after the call ends (or is left open by an abort)."""
        item_id = self._item_id("fco")
        output = {
            "type": "function_call_output",
            "id": item_id,  # the reducer matches the payload to the accepted item by it
            "call_id": tool.id,
            "output": "aborted by user" if status == "aborted" else f"Process ended: {status}",
            "internal_chat_message_metadata_passthrough": {"turn_id": tool.turn.id, "create_time": self._now / 1000},
        }
        self._accept(tool.turn, item_id, output)

    def _on_tool_pending_at_abort(self, data: dict[str, Any]) -> None:
        tool = self._tools.pop((data["turn_id"], data["call_id"]), None)
        if tool is None or tool.ended:
            return
        if data.get("traced_end", True):
            self._end_at_abort(tool)
        else:
            tool.leak()  # the pre-fix bug: this call never gets its tool_call_ended
        self._tool_output(tool, "aborted")

    def _on_turn_ended(self, data: dict[str, Any]) -> None:
        turn_id = data["turn_id"]
        turn = self._turns.pop(turn_id, None)
        if turn is None or turn.ended:
            return
        inference = self._inference.pop(turn_id, None)
        if inference is not None and not inference.ended:
            inference.cancel(_STREAM_DROPPED)
        for key in [k for k in self._tools if k[0] == turn_id]:
            tool = self._tools.pop(key)
            if not tool.ended:
                self._end_at_abort(tool)
                self._tool_output(tool, "aborted")
        status = str(data.get("status"))
        if status == "interrupted":
            self._accept(turn, self._item_id("msg"))  # the marker telling the model the turn was aborted
            turn.interrupt()
        else:
            ended = _TURN_END.get(status, "failed")
            if ended == "failed":
                turn.writer.protocol_event_observed("error", {"type": "error", "turn_id": turn_id})
            turn.end(self.failed_turn_traced if ended == "failed" else ended)
            turn.writer.protocol_event_observed("turn_complete", {"type": "turn_complete", "turn_id": turn_id})
        # Observed: a command still running when its turn is aborted reports its runtime failed afterwards.
        for key in [k for k in self._runtimes if k[0] == turn_id]:
            runtime = self._runtimes.pop(key)
            if not runtime.ended:
                runtime.end("failed")

    def _end_at_abort(self, tool: ToolCallWindow) -> None:
        """A tool call open when its turn is aborted: ended ``aborted``, unless the release's
        switch ``abort_leaves_tools_open`` leaves it open."""
        if self.abort_leaves_tools_open:
            tool.leak()
        else:
            tool.abort()

    def _on_shutdown(self, data: dict[str, Any]) -> None:
        self.finish(graceful=True)
