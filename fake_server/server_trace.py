"""The fake's rollout trace bundle, in the real format, written with :mod:`contracts.trace.writer`.

The engine emits semantic :class:`~fake_server.effects.TraceEvent` s (thread and turn started and
ended, model requests, tool calls, shutdown); this class turns them into the writer's windows. One
bundle per root thread under ``CODEX_ROLLOUT_TRACE_ROOT``, as the real binary lays them out.

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

from contracts.trace.format import SCHEMA_VERSION
from contracts.trace.writer import (
    InferenceWindow,
    TerminalOperationWindow,
    ThreadWindow,
    ToolCallWindow,
    TraceWriter,
    TurnWindow,
)
from fake_server.effects import TraceEvent
from fake_server.profiles import Profile

_TURN_END = {"completed": "completed", "failed": "failed"}


class ServerTrace:
    def __init__(self, root: Path, schema: int = SCHEMA_VERSION, *, abort_leaves_tools_open: bool = False) -> None:
        """``schema`` and ``abort_leaves_tools_open``: what the release played writes (fake_server.profiles)."""
        self.root = Path(root)
        self.schema = schema
        self.abort_leaves_tools_open = abort_leaves_tools_open
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
        return cls(root, profile.trace_schema, abort_leaves_tools_open=profile.abort_leaves_tools_open)

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
            if graceful:
                writer.complete()
            else:
                writer.abandon()

    # --- events -------------------------------------------------------------------------------

    def _ignore(self, data: dict[str, Any]) -> None:
        pass

    def _on_thread_started(self, data: dict[str, Any]) -> None:
        thread_id = data["thread_id"]
        trace_id = hashlib.sha256(thread_id.encode()).hexdigest()
        trace_id = f"{trace_id[:8]}-{trace_id[8:12]}-4{trace_id[13:16]}-8{trace_id[17:20]}-{trace_id[20:32]}"
        writer = TraceWriter.create(
            self.root, rollout_id=thread_id, trace_id=trace_id, now_ms=self._clock, schema=self.schema
        )
        self.writers[thread_id] = writer
        self._threads[thread_id] = writer.start_thread(thread_id, model=str(data.get("model", "mock-model")))
        writer.protocol_event_observed("session_configured", {"type": "session_configured", "cwd": data.get("cwd")})

    def _on_turn_started(self, data: dict[str, Any]) -> None:
        thread = self._threads[data["thread_id"]]
        turn = thread.start_turn(data["turn_id"])
        self._turns[data["turn_id"]] = turn
        thread.writer.protocol_event_observed("turn_started", {"type": "turn_started", "turn_id": data["turn_id"]})

    def _on_inference_started(self, data: dict[str, Any]) -> None:
        turn = self._turns.get(data["turn_id"])
        if turn is not None and not turn.ended:
            self._inference[data["turn_id"]] = turn.start_inference(model=str(data.get("model", "mock-model")))

    def _on_inference_ended(self, data: dict[str, Any]) -> None:
        window = self._inference.pop(data["turn_id"], None)
        if window is None or window.ended:
            return
        if data.get("status") == "completed":
            window.complete(response_id=data.get("response_id"), output_items=data.get("items", []))
        else:
            window.fail(str(data.get("error", "stream error")))

    def _on_tool_started(self, data: dict[str, Any]) -> None:
        turn = self._turns.get(data["turn_id"])
        if turn is None or turn.ended:
            return
        key = (data["turn_id"], data["call_id"])
        # The function call's own arguments text, as the real binary stores the invocation.
        arguments = data.get("arguments") or {"cmd": data.get("command", "")}
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
                # 0.171.0 ends a cancelled patch's call but never its apply_patch runtime (a closure
                # violation the real binary writes).
                runtime.leak()
            self._end_at_abort(tool)
            return
        status = str(data.get("status"))
        if runtime is not None and not runtime.ended:
            runtime.end("completed" if status in ("completed", "failed") else "cancelled")
        if status == "completed" or (status == "failed" and runtime is not None):
            tool.complete(result={"status": status})
        else:
            tool.fail(result={"status": status})

    def _on_tool_pending_at_abort(self, data: dict[str, Any]) -> None:
        tool = self._tools.pop((data["turn_id"], data["call_id"]), None)
        if tool is None or tool.ended:
            return
        if data.get("traced_end", True):
            self._end_at_abort(tool)
        else:
            tool.leak()  # the pre-fix bug: this call never gets its tool_call_ended

    def _on_turn_ended(self, data: dict[str, Any]) -> None:
        turn_id = data["turn_id"]
        turn = self._turns.pop(turn_id, None)
        if turn is None or turn.ended:
            return
        for key in [k for k in self._tools if k[0] == turn_id]:
            tool = self._tools.pop(key)
            if not tool.ended:
                self._end_at_abort(tool)
        status = str(data.get("status"))
        if status == "interrupted":
            turn.interrupt()
        else:
            turn.end(_TURN_END.get(status, "failed"))
        # Observed: a command still running when its turn is aborted reports its runtime failed afterwards.
        for key in [k for k in self._runtimes if k[0] == turn_id]:
            runtime = self._runtimes.pop(key)
            if not runtime.ended:
                runtime.end("failed")

    def _end_at_abort(self, tool: ToolCallWindow) -> None:
        """A tool call open when its turn is aborted: ended ``aborted``; 0.163.0 and 0.169.0 never end it."""
        if self.abort_leaves_tools_open:
            tool.leak()
        else:
            tool.abort()

    def _on_shutdown(self, data: dict[str, Any]) -> None:
        self.finish(graceful=True)
