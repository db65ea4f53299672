"""The client core without trio: messages and times in, events and frames out (:class:`ClientConnection`).

The tests write the wire as stdio does (newline-delimited JSON) and hand the core what a
:class:`~contracts.wire.LineFraming` makes of it, a read at a time, as the process transport's stream does."""

from __future__ import annotations

import gc
import weakref
from typing import Any

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from codex_client.connection import (
    ApprovalClosed,
    ApprovalOpened,
    ClientConnection,
    KillServer,
    Logged,
    RequestAnswered,
    RequestsFailed,
    SendFrame,
    TurnFinished,
    TurnIdKnown,
)
from codex_client.errors import LineTooLong
from codex_client.events import ApprovalRequested, MessageDeltas, TurnEnded, UsageUpdated
from codex_client.tracerecords import TraceRecord
from codex_client.turncore import TurnCore
from contracts.messages import ErrorResponse, Response
from contracts.wire import LineFraming

THREAD = "thr-1"
TURN = "turn-1"
MS = 1796022741815


_FRAMINGS: weakref.WeakKeyDictionary[ClientConnection, LineFraming] = weakref.WeakKeyDictionary()


def receive(conn: ClientConnection, data: bytes, t: float) -> list[Any]:
    """One read of a newline-framed stdout, through the connection's own framing (lines span reads)."""
    framing = _FRAMINGS.setdefault(conn, LineFraming(conn.max_line, report_overflow=True))
    return conn.receive_messages(framing.feed(data), t)


def line(frame: dict[str, Any]) -> bytes:
    return orjson.dumps(frame) + b"\n"


def note(method: str, params: dict[str, Any]) -> bytes:
    return line({"method": method, "params": params, "emittedAtMs": MS})


def delta(text: str, *, turn: str = TURN, item: str = "msg-1") -> bytes:
    return note("item/agentMessage/delta", {"threadId": THREAD, "turnId": turn, "itemId": item, "delta": text})


def completed(status: str = "completed", turn: str = TURN) -> bytes:
    body = {"id": turn, "items": [], "status": status, "error": None, "startedAt": 1, "completedAt": 2}
    return note("turn/completed", {"threadId": THREAD, "turn": {**body, "durationMs": 1, "itemsView": "summary"}})


def running(validate: bool = False, buffer: int = 1 << 20) -> tuple[ClientConnection, TurnCore]:
    """A connection with a thread and a running turn whose id is known (the turn/start answer read)."""
    conn = ClientConnection(max_line=1 << 20, event_buffer=buffer, interrupt_budget=2.0, validate_frames=validate)
    conn.thread_id = THREAD
    turn = conn.new_turn([{"type": "text", "text": "hi"}], {}, None, None)
    request = conn.start_turn(turn, 0.0)
    assert request is not None
    assert [e.message for e in conn.take_events() if isinstance(e, Logged)] == ["turn/start sent"]
    conn.sent(0.0, request)
    events = receive(conn, line({"id": request.id, "result": {"turn": {"id": TURN}}}), 0.1)
    assert events == [RequestAnswered(request.id, {"turn": {"id": TURN}})]
    conn.learn_turn_id(turn, TURN)
    # the trace record comes out the same way as everything else: the core holds no writer
    assert conn.take_events() == [TraceRecord("turn_started", (TURN, THREAD)), TurnIdKnown(turn)]
    return conn, turn


def test_a_read_of_deltas_is_one_batch_recorded_in_order() -> None:
    conn, turn = running()
    assert receive(conn, b"".join(delta(f"d{i} ") for i in range(500)), 1.0) == []
    queued = turn.events.take_all()
    assert len(queued) == 1 and isinstance(queued[0], MessageDeltas)
    assert queued[0].first_n == 1 and len(queued[0]) == 500 and queued[0].deltas[-1] == "d499 "
    assert turn.state.partial_text == "".join(f"d{i} " for i in range(500))
    frames = [e.frame for e in conn.wire if e.dir == "s2c"]
    assert [f["params"]["delta"] for f in frames[1:]] == [f"d{i} " for i in range(500)]
    assert turn.last_activity == 1.0


def test_the_record_keeps_no_tracked_object_per_frame_read() -> None:
    """A long turn's record holds the lines it read, not one dict per frame that the garbage collector tracks.

    Known-bad: a record of parsed frames kept 2,500 tracked dicts here, and on a real flood it made CPython run
    a full collection of the whole process (≈ 70 ms) about every quarter-heap of frames a turn kept."""
    conn, turn = running(validate=True)
    plan = note("turn/plan/updated", {"threadId": THREAD, "turnId": TURN, "plan": []})
    reads = [b"".join(delta(f"d{i} ") for i in range(2000)), delta("a") + plan + b"\n" + delta("b")]
    reads += [delta(f"z{i}") for i in range(500)]
    gc.collect()
    before = len(gc.get_objects())
    for t, data in enumerate(reads):
        receive(conn, data, 1.0 + t)
        turn.events.take_all()  # the consumer reads the turn
    gc.collect()
    assert len(gc.get_objects()) - before < 200
    # read back: the same frames, in wire order, with the times they were read at
    wire = [e for e in conn.wire if e.dir == "s2c"][1:]
    expected = [(1.0 + t, orjson.loads(one)) for t, data in enumerate(reads) for one in data.split(b"\n") if one]
    assert [(e.t, e.frame) for e in wire] == expected
    texts = [f"d{i} " for i in range(2000)] + ["a", "b"] + [f"z{i}" for i in range(500)]
    assert turn.state.partial_text == "".join(texts)


def test_one_invalid_delta_among_20000_in_one_read_is_reported_with_its_line() -> None:
    conn, turn = running(validate=True)
    lines = [delta("ok ") for _ in range(20_000)]
    bad = 12_345
    lines[bad] = note("item/agentMessage/delta", {"threadId": THREAD, "turnId": TURN, "itemId": "msg-1", "delta": 7})
    before = conn.schema_violation_count  # the short turn/start answer of `running` is not a full Turn
    receive(conn, b"".join(lines), 1.0)
    assert conn.schema_violation_count == before + 1
    violation = conn.schema_violations[-1]
    # stdout line 1 was the turn/start answer: the read's k-th line (0-based) is line k + 2
    assert violation.line == bad + 2 and violation.dir == "s2c" and violation.frame["params"]["delta"] == 7
    assert any("delta" in str(v) for v in violation.violations)
    assert turn.state.deltas == 19_999  # the invalid one carries no text: it counts for nothing


def test_invalid_frames_outside_the_batch_are_reported_with_their_lines() -> None:
    conn, _ = running(validate=True)
    before = conn.schema_violation_count
    receive(conn, b"\n" + delta("a") + note("turn/plan/updated", {"threadId": THREAD}) + delta("b"), 1.0)
    assert [v.line for v in conn.schema_violations[before:]] == [4]  # the blank line 2 counts as a line


def test_the_gate_keeps_other_turns_and_completed_turns_out() -> None:
    conn, turn = running()
    receive(conn, delta("x", turn="turn-0") + delta("mine"), 1.0)
    assert turn.state.partial_text == "mine" and turn.state.ignored == 1
    events = receive(conn, completed() + delta("late") + completed("failed"), 2.0)
    assert [e for e in events if not isinstance(e, Logged)] == [
        TraceRecord("turn_ended", (TURN, "completed")),
        TurnFinished(turn),
    ]
    assert [e.message for e in events if isinstance(e, Logged)] == ["turn/completed received", "finished"]
    assert turn.result is not None and turn.result.status == "completed" and turn.state.completed_consumed == 1
    assert turn.state.partial_text == "mine"
    assert isinstance(turn.events.take_all()[-1], TurnEnded)


def test_notifications_before_turn_start_belong_to_no_turn() -> None:
    conn = ClientConnection(max_line=1 << 20, event_buffer=100, interrupt_budget=2.0)
    conn.thread_id = THREAD
    assert receive(conn, delta("early") + completed(), 0.5) == []  # not even a log record
    assert conn.results == []


def test_usage_is_counted_once_and_late_usage_updates_the_result() -> None:
    conn, turn = running()
    usage = {"last": {"inputTokens": 10, "outputTokens": 5}, "total": {"inputTokens": 10, "outputTokens": 5}}
    update = note("thread/tokenUsage/updated", {"threadId": THREAD, "turnId": TURN, "tokenUsage": usage})
    receive(conn, update + update, 1.0)  # the duplicate adds nothing
    added = [e for e in turn.events.take_all() if isinstance(e, UsageUpdated)]
    assert [e.added.input for e in added] == [10, 0] and added[-1].turn_total.output == 5
    receive(conn, completed(), 2.0)
    assert turn.result is not None and turn.result.usage["unknown"].input == 10
    later = {"last": {"inputTokens": 1}, "total": {"inputTokens": 11, "outputTokens": 5}}
    receive(conn, note("thread/tokenUsage/updated", {"threadId": THREAD, "turnId": TURN, "tokenUsage": later}), 3.0)
    assert turn.result.usage["unknown"].input == 11


def approval_request(request_id: int, method: str = "item/commandExecution/requestApproval") -> bytes:
    params = {"threadId": THREAD, "turnId": TURN, "itemId": "cmd-1", "command": "ls", "cwd": "/w"}
    return line({"id": request_id, "method": method, "params": params})


def test_an_approval_is_opened_answered_once_and_frames_come_out() -> None:
    conn, turn = running()
    events = receive(conn, approval_request(0), 1.0)
    opened = [e for e in events if isinstance(e, ApprovalOpened)]
    assert len(opened) == 1 and opened[0].pending.request.n == 1 and conn.approvals.waiting_on(turn)
    assert any(isinstance(e, ApprovalRequested) for e in turn.events.take_all())
    conn.answer_approval(opened[0].pending, "decline", None, 1.5)
    (send,) = [e for e in conn.take_events() if isinstance(e, SendFrame)]
    assert isinstance(send.message, Response) and send.message.result == {"decision": "decline"}
    conn.answer_approval(opened[0].pending, "accept", None, 1.6)  # a second decision is not sent
    assert not [e for e in conn.take_events() if isinstance(e, SendFrame)]
    assert not conn.approvals.waiting_on(turn)


def test_unsupported_request_is_answered_at_once_and_fails_the_turn() -> None:
    conn, turn = running()
    events = receive(conn, approval_request(4, "item/tool/requestUserInput"), 1.0)
    (send,) = [e for e in events if isinstance(e, SendFrame)]
    assert isinstance(send.message, ErrorResponse) and send.message.code == -32601
    receive(conn, completed(), 2.0)
    assert turn.result is not None and turn.result.status == "failed"
    assert turn.result.error == "unsupported app-server request: item/tool/requestUserInput"


def test_a_turn_ending_with_an_approval_pending_closes_it_locally() -> None:
    conn, turn = running()
    receive(conn, approval_request(0), 1.0)
    conn.request_cancel(turn, "aborted", "execution cancelled", 1.2)
    events = receive(conn, completed("interrupted"), 1.5)
    assert ApprovalClosed(0) in events and TurnFinished(turn) in events
    assert turn.result is not None and turn.result.status == "aborted" and turn.result.approvals_closed_locally == ["0"]


def test_a_line_over_the_cap_kills_while_it_still_streams() -> None:
    conn = ClientConnection(max_line=1000, event_buffer=100, interrupt_budget=2.0)
    conn.thread_id = THREAD
    turn = conn.new_turn([], {}, None, None)
    request = conn.start_turn(turn, 0.0)
    assert request is not None
    events = receive(conn, b'{"method":"item/agentMessage/delta","params":{"delta":"' + b"x" * 2000, 1.0)
    kinds = [type(e) for e in events]
    assert KillServer in kinds and RequestsFailed in kinds and TurnFinished in kinds
    assert isinstance(conn.failure, LineTooLong) and conn.killed
    assert turn.result is not None and turn.result.status == "failed" and turn.result.killed
    assert (turn.result.error or "").startswith("lost frame:")


def test_the_event_buffer_keeps_at_most_its_limit_and_counts_the_rest() -> None:
    conn, turn = running(buffer=10)
    receive(conn, b"".join(delta("d") for _ in range(25)), 1.0)
    assert turn.events.count == 10 and turn.events.dropped == 15
    assert [turn.events.take().n for _ in range(10)] == list(range(1, 11))  # type: ignore[union-attr]
    assert turn.state.deltas == 25  # the text does not depend on the buffer


def _unrolled(turn: TurnCore) -> list[Any]:
    out: list[Any] = []
    for event in turn.events.take_all():
        out.extend(event.events() if isinstance(event, MessageDeltas) else [event])
    return [
        (type(e).__name__, getattr(e, "n", None), getattr(e, "delta", None), getattr(e, "item_id", None)) for e in out
    ]


_FRAMES = st.sampled_from(
    [
        delta("a"),
        delta("b", item="msg-2"),
        delta("late", turn="turn-0"),
        note("item/agentMessage/delta", {"threadId": THREAD, "turnId": TURN, "itemId": "msg-1", "delta": 5}),
        note("item/started", {"threadId": THREAD, "turnId": TURN, "item": {"id": "msg-2", "type": "agentMessage"}}),
        note("thread/status/changed", {"threadId": THREAD, "status": {"type": "active"}}),
        b"not json\n",
        b"\n",
    ]
)


@settings(max_examples=60, deadline=None)
@given(frames=st.lists(_FRAMES, max_size=40), cuts=st.lists(st.integers(min_value=1, max_value=400), max_size=10))
def test_reads_cut_anywhere_give_what_one_line_at_a_time_gives(frames: list[bytes], cuts: list[int]) -> None:
    data = b"".join(frames) + completed()
    one_by_one, turn_a = running()
    for frame in [*frames, completed()]:
        receive(one_by_one, frame, 1.0)
    cut, turn_b = running()
    start = 0
    for size in [*cuts, len(data)]:
        receive(cut, data[start : start + size], 1.0)
        start += size
    assert turn_b.result is not None and turn_b.result.status == "completed"
    assert turn_b.state.partial_text == turn_a.state.partial_text and turn_b.state.deltas == turn_a.state.deltas
    assert _unrolled(turn_b) == _unrolled(turn_a)
    assert [(e.dir, e.frame, e.error) for e in cut.wire] == [(e.dir, e.frame, e.error) for e in one_by_one.wire]
