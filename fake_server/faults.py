"""Faults that strike at once where they are attached (the engine and turn programs call these).

Faults that change the course of a turn (delayed or dropped completion, interrupt handling,
resolved order, the trace bug) are read by :mod:`fake_server.turns` at their points instead.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

import orjson

from contracts.scenario import Fault
from fake_server.state import TurnRun

if TYPE_CHECKING:
    from fake_server.engine import Engine

#: Kinds that steer the turn rather than strike at once.
COURSE_KINDS: Final = frozenset(
    {
        "delayed_completion",
        "completion_after_interrupt",
        "interrupt_ignored",
        "interrupt_answer_missing",
        "drop_turn_completed",
        "resolved_order",
        "trace_unclosed_tool",
        "duplicate_usage",
        "replay_usage",
    }
)
_STDERR_LINE: Final = "WARN codex_core::flood: " + "x" * 200 + "\n"


def half_frame(engine: Engine, run: TurnRun | None) -> bytes:
    """The first half of the frame the server was writing when it died."""
    params = {"threadId": run.thread_id if run else "", "turnId": run.turn_id if run else "", "itemId": "msg-cut"}
    frame = {"method": "item/agentMessage/delta", "params": {**params, "delta": "cut mid-li"}}
    data = orjson.dumps({**frame, "emittedAtMs": engine.now_ms})
    return data[: len(data) // 2]


def apply_instant(engine: Engine, run: TurnRun | None, fault: Fault) -> None:
    kind = fault.kind
    if kind == "crash":
        partial = half_frame(engine, run) if fault.param("mid_line") else b""
        engine.crash(int(fault.param("exit_code")), partial)
    elif kind == "hang":
        engine.hang()
    elif kind == "stdout_closed":
        engine.close_stdout()
    elif kind == "grandchild_holds_stdout":
        engine.spawn_grandchild(int(fault.param("hold_ms")))
    elif kind == "garbage_lines":
        for _ in range(int(fault.param("count"))):
            engine.send_raw(str(fault.param("text")).replace("\n", " ").encode() + b"\n")
    elif kind == "oversized_line":
        size = max(64, int(fault.param("size")))
        head, tail = b'{"method":"x/oversized","params":{"pad":"', b'"}}'
        engine.send_raw(head + b"x" * (size - len(head) - len(tail)) + tail + b"\n")
    elif kind == "invalid_utf8":
        for _ in range(int(fault.param("count"))):
            engine.send_raw(b'{"method":"x/invalidUtf8","params":{"text":"\xff\xfe\xfd"}}\n')
    elif kind == "stderr_flood":
        remaining = int(fault.param("bytes"))
        chunk = _STDERR_LINE * 64
        while remaining > 0:
            piece = chunk[:remaining]
            engine.stderr_raw(piece)
            remaining -= len(piece)
    elif kind == "unknown_notification":
        for _ in range(int(fault.param("count"))):
            engine.notify(str(fault.param("method")), {"threadId": run.thread_id if run else None})
    elif kind == "unknown_server_request":
        engine.server_request(str(fault.param("method")), {"threadId": run.thread_id if run else None})
    elif kind == "late_events":
        if run is not None:
            item_id = run.last_message_id or "msg-late"
            for i in range(int(fault.param("count"))):
                engine.notify(
                    "item/agentMessage/delta",
                    {"threadId": run.thread_id, "turnId": run.turn_id, "itemId": item_id, "delta": f" late{i}"},
                )
    elif kind == "duplicate_response_id":
        if engine.last_response_frame is not None:
            engine.send_frame(engine.last_response_frame)
    elif kind == "overload":
        engine.overload_left += int(fault.param("count"))
    elif kind in ("duplicate_usage", "replay_usage") and run is not None and run.usage_frames:
        for _ in range(int(fault.param("count"))):
            engine.send_frame(run.usage_frames[-1])
