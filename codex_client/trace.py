"""The client's own rollout-trace bundle, written with :mod:`contracts.trace.writer`.

What the client records (documented in ``docs/client.md``):

- the session as the rollout, each thread as a thread window (the first thread is the root);
- each turn as a codex turn: ``completed`` / ``failed``; an interrupted or timed-out turn ends
  ``cancelled`` followed by the ``turn_aborted`` protocol event (as the real binary records it); a turn
  whose server the client killed ends ``aborted``;
- each tool item (``commandExecution`` -> ``exec_command``, ``fileChange`` -> ``apply_patch``,
  ``mcpToolCall`` -> ``mcp``) as a tool call ending ``completed``, ``failed`` (failed or declined) or
  ``aborted`` (closed locally: the server never completed it), always before its turn ends;
- approvals and interrupts as ``protocol_event_observed`` events whose ``event_type`` names the step:
  ``approval.opened`` / ``approval.answered`` / ``approval.resolved`` (paired by ``request_id``: one
  opened, at most one answered, exactly one resolved) and ``interrupt.sent`` / ``interrupt.answered``
  (paired by ``request_id``: exactly one answered per sent, ``outcome`` ok | error | timeout | no answer).
  Not ``other`` events: the real reducer rejects any bundle holding one ("raw trace event has no
  reducer implementation"), while protocol events of any type replay, so the bundle stays replayable by
  ``codex debug trace-reduce``;
- ``recording_completed`` last, on every path: :meth:`ClientTrace.close` runs in the session's teardown.

Recording never breaks the client: a writer error is kept in :attr:`ClientTrace.errors` and recording stops.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from contracts.trace.writer import ThreadWindow, ToolCallWindow, TraceWriter, TurnWindow

APPROVAL_EVENTS = ("approval.opened", "approval.answered", "approval.resolved")
INTERRUPT_EVENTS = ("interrupt.sent", "interrupt.answered")


class NullTrace:
    """Records nothing; same interface as :class:`ClientTrace`."""

    path: Path | None = None
    errors: list[str] = []  # noqa: RUF012  (never mutated: nothing is recorded)

    def thread_started(self, thread_id: str, *, resumed: bool = False, metadata: dict[str, Any] | None = None) -> None:
        pass

    def turn_started(self, turn_id: str, thread_id: str) -> None:
        pass

    def turn_ended(self, turn_id: str, status: str) -> None:
        pass

    def tool_started(self, item_id: str, item_type: str, item: dict[str, Any], thread_id: str, turn_id: str) -> None:
        pass

    def tool_ended(self, item_id: str, status: str, item: dict[str, Any] | None = None) -> None:
        pass

    def other(self, kind: str, metadata: dict[str, Any], *, turn_id: str | None = None) -> None:
        pass

    def close(self, status: str) -> None:
        pass


def _tool_shape(item_type: str, item: dict[str, Any]) -> tuple[str, dict[str, Any], Any]:
    """(tool name, tool kind, arguments) of a tool item; MCP arguments are never recorded (they may hold secrets)."""
    if item_type == "commandExecution":
        return "exec_command", {"type": "exec_command"}, {"cmd": item.get("command"), "workdir": item.get("cwd")}
    if item_type == "fileChange":
        changes = item.get("changes")
        paths = [c.get("path") for c in changes if isinstance(c, dict)] if isinstance(changes, list) else []
        return "apply_patch", {"type": "apply_patch"}, {"paths": paths}
    server, tool = str(item.get("server", "")), str(item.get("tool", ""))
    return tool or "mcp", {"type": "mcp", "server": server, "tool": tool}, {"arguments": "[not recorded]"}


def _tool_result(item: dict[str, Any] | None) -> dict[str, Any] | None:
    if not item:
        return None
    keep = ("status", "exitCode", "durationMs", "error")
    return {key: item[key] for key in keep if key in item}


class ClientTrace:
    """One bundle at ``bundle_dir`` (``manifest.json`` directly inside), created at the first thread."""

    def __init__(
        self, bundle_dir: Path, *, now_ms: Callable[[], int] | None = None, marker_events: str = "protocol_event"
    ) -> None:
        """``marker_events``: how approval / interrupt steps are recorded, ``protocol_event`` (replayable) or
        ``other`` (``other`` events with the same kinds; the real reducer rejects such a bundle)."""
        if marker_events not in ("protocol_event", "other"):
            raise ValueError(f"marker_events must be protocol_event or other, not {marker_events!r}")
        self.marker_events = marker_events
        self.bundle_dir = Path(bundle_dir)
        self.path: Path | None = None
        self.errors: list[str] = []
        self._now_ms = now_ms
        self._writer: TraceWriter | None = None
        self._threads: dict[str, ThreadWindow] = {}
        self._turns: dict[str, TurnWindow] = {}
        self._turn_of: dict[str, str] = {}  # turn id -> thread id
        self._tools: dict[str, ToolCallWindow] = {}  # item id -> open tool call
        self._tool_turn: dict[str, str] = {}
        self._tool_ids: set[str] = set()
        self._reopened: set[str] = set()  # resumed after their end: closed by a raw thread_ended
        self._closed = False

    # --- guard: recording must never break the client ---------------------------------------------

    def _guard(self, what: str, action: Callable[[], Any]) -> None:
        if self._closed:
            return
        try:
            action()
        except Exception as exc:
            self.errors.append(f"client trace: {what}: {exc!r}")

    def _ensure_writer(self, rollout_id: str) -> TraceWriter:
        if self._writer is None:
            self._writer = TraceWriter(self.bundle_dir, rollout_id=rollout_id, now_ms=self._now_ms)
            self.path = self._writer.path
        return self._writer

    # --- events -----------------------------------------------------------------------------------

    def thread_started(self, thread_id: str, *, resumed: bool = False, metadata: dict[str, Any] | None = None) -> None:
        def act() -> None:
            writer = self._ensure_writer(thread_id)
            if thread_id in self._threads:
                # the reducer resumes only an ended thread, and the resumed thread needs its own end
                thread = self._threads[thread_id]
                if not thread.ended:
                    thread.end("completed")
                elif thread_id in self._reopened:
                    writer.emit_raw({"type": "thread_ended", "thread_id": thread_id, "status": "completed"})
                writer.emit_raw({"type": "thread_resumed", "thread_id": thread_id}, thread_id=thread_id)
                self._reopened.add(thread_id)
                return
            model = (metadata or {}).get("model") or "unknown"
            self._threads[thread_id] = writer.start_thread(
                thread_id, metadata={"thread_id": thread_id, "agent_path": "/root", "model": model, "resumed": resumed}
            )

        self._guard("thread_started", act)

    def turn_started(self, turn_id: str, thread_id: str) -> None:
        def act() -> None:
            thread = self._threads.get(thread_id)
            if thread is None or turn_id in self._turns:
                return
            self._turns[turn_id] = thread.start_turn(turn_id)
            self._turn_of[turn_id] = thread_id
            assert self._writer is not None
            self._writer.protocol_event_observed("turn_started", {"type": "turn_started", "turn_id": turn_id})

        self._guard("turn_started", act)

    def turn_ended(self, turn_id: str, status: str) -> None:
        def act() -> None:
            turn = self._turns.get(turn_id)
            if turn is None or turn.ended:
                return
            for item_id, owner in list(self._tool_turn.items()):
                if owner == turn_id and item_id in self._tools:
                    self._tools.pop(item_id).abort()
            assert self._writer is not None
            if status == "cancelled":
                turn.interrupt(reason="interrupted")
            else:
                turn.end(status)
                if status == "completed":
                    self._writer.protocol_event_observed("turn_complete", {"type": "turn_complete", "turn_id": turn_id})

        self._guard("turn_ended", act)

    def leak_turn(self, turn_id: str) -> None:
        """FAULT INJECTION ONLY: forget the turn's window without ending it (it stays open in the bundle).

        What a client that loses track of a turn leaves behind; the fuzz tests plant it to prove the
        trace-closure contract catches it.
        """

        def act() -> None:
            turn = self._turns.pop(turn_id, None)
            if turn is not None and not turn.ended:
                turn.leak()

        self._guard("leak_turn", act)

    def tool_started(self, item_id: str, item_type: str, item: dict[str, Any], thread_id: str, turn_id: str) -> None:
        def act() -> None:
            turn = self._turns.get(turn_id)
            if turn is None or turn.ended or item_id in self._tools:
                return
            call_id = item_id
            while call_id in self._tool_ids:  # a model-visible id reused in a later turn must stay unique
                call_id = f"{item_id}#{uuid.uuid4().hex[:8]}"
            self._tool_ids.add(call_id)
            name, kind, arguments = _tool_shape(item_type, item)
            self._tools[item_id] = turn.start_tool_call(call_id, tool_name=name, kind=kind, arguments=arguments)
            self._tool_turn[item_id] = turn_id

        self._guard("tool_started", act)

    def tool_ended(self, item_id: str, status: str, item: dict[str, Any] | None = None) -> None:
        def act() -> None:
            tool = self._tools.pop(item_id, None)
            if tool is None:
                return
            if status == "aborted":
                tool.abort()  # stopped with its owner: no result payload
            else:
                tool.end(status, result=_tool_result(item))

        self._guard("tool_ended", act)

    def other(self, kind: str, metadata: dict[str, Any], *, turn_id: str | None = None) -> None:
        def act() -> None:
            if self._writer is None:
                return
            body = {"type": kind, "turn_id": turn_id, **metadata}
            if self.marker_events == "other":
                thread_id = self._turn_of.get(turn_id) if turn_id else None
                self._writer.other(kind, None, body, thread_id=thread_id, codex_turn_id=turn_id if thread_id else None)
            else:
                self._writer.protocol_event_observed(kind, body)

        self._guard(kind, act)

    def close(self, status: str) -> None:
        """End what is open (tools aborted, turns cancelled, threads ended) and write ``recording_completed``."""

        def act() -> None:
            writer = self._ensure_writer(f"client-{uuid.uuid4()}")  # a session that never got a thread
            for tool in self._tools.values():
                if not tool.ended:
                    tool.abort()
            self._tools.clear()
            for turn_id, turn in self._turns.items():
                if not turn.ended:
                    turn.interrupt(reason="interrupted")
                    self._turn_of.pop(turn_id, None)
            thread_status = "completed" if status == "completed" else "failed"
            for thread_id, thread in self._threads.items():
                if not thread.ended:
                    thread.end(thread_status)
                elif thread_id in self._reopened:
                    writer.emit_raw({"type": "thread_ended", "thread_id": thread_id, "status": thread_status})
            writer.complete(rollout_status="completed")

        self._guard("close", act)
        self._closed = True
