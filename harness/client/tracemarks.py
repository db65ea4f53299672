"""Bookkeeping of the client's trace bundle: tool spans, interrupt answers, the statuses the trace speaks,
and what is still open when the session closes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from contracts.messages import JsonId
from harness.client.errors import ServerExited
from harness.client.events import InterruptAnswered

if TYPE_CHECKING:
    from harness.client.session import Session
    from harness.client.turn import Turn


def turn_status(status: str, killed: bool) -> str:
    if status == "completed":
        return "completed"
    if status == "failed":
        return "failed"
    # an interrupted turn ends `cancelled`; one whose server was killed stopped with its runtime
    return "aborted" if killed else "cancelled"


def tool_status(status: str | None) -> str:
    if status == "completed":
        return "completed"
    if status in ("failed", "declined"):
        return "failed"
    return "aborted"


def interrupt_answered(session: Session, turn: Turn, request_id: JsonId, outcome: str, error: str | None) -> None:
    if turn.interrupt_answer_recorded:
        return
    turn.interrupt_answer_recorded = True
    t = session.now()
    if outcome in ("ok", "error"):
        turn.set_timing(interrupt_answered_at=t)
    turn.emit(InterruptAnswered(t, error))
    meta: dict[str, Any] = {"request_id": request_id, "outcome": outcome}
    if error:
        meta["error"] = error
    session.trace.other("interrupt.answered", meta, turn_id=turn.state.turn_id)


def trace_tool_started(session: Session, turn: Turn, item_id: str, item_type: str, item: dict[str, Any]) -> None:
    if item_id in turn.traced_tools:
        return
    turn.traced_tools.add(item_id)
    session.trace.tool_started(item_id, item_type, item, session.thread_id or "", turn.state.turn_id or "")


def trace_tool_ended(session: Session, turn: Turn, item_id: str, status: str | None, item: dict[str, Any]) -> None:
    if item_id not in turn.traced_tools or item_id in turn.ended_tools:
        return
    turn.ended_tools.add(item_id)
    session.trace.tool_ended(item_id, tool_status(status), item)


def close_trace(session: Session) -> None:
    for turn in session._turns:
        if turn.interrupt_request_id is not None and not turn.interrupt_answer_recorded:
            interrupt_answered(session, turn, turn.interrupt_request_id, "no answer", "session closed first")
    for request_id, pending in session._approvals.items():
        if not pending.resolved:
            pending.resolved = True
            session.trace.other(
                "approval.resolved",
                {"request_id": request_id, "local": True, "outcome": "session closed"},
                turn_id=pending.request.turn_id,
            )
    failed = session.killed or (session.failure is not None and not isinstance(session.failure, ServerExited))
    try:
        session.trace.close("failed" if failed else "completed")
    except Exception as exc:
        session.client_errors.append(f"trace close: {exc!r}")
    session.client_errors.extend(session.trace.errors)
