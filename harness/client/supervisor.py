"""The turn supervisor (trio driver side): hard deadline, semantic inactivity and cancellation of one turn, and
the interrupt procedure (``turn/interrupt`` and ``turn/completed`` within ONE budget, else the group is killed).

It works through the session's public driver API (``call``, ``finish_turn``, ``kill_turn``, ``connection``).
"""

from __future__ import annotations

import logging
import math
from typing import TYPE_CHECKING

import trio

from contracts.jsonrpc import RpcError
from contracts.messages import JsonId, Request
from harness.client.errors import ClientError
from harness.client.events import InterruptSent

if TYPE_CHECKING:
    from harness.client.session import Session
    from harness.client.turn import Turn


async def supervise(session: Session, turn: Turn) -> None:
    """Deadline, inactivity and cancellation of one turn; runs the interrupt procedure."""
    core = turn.core
    idle_after = session.options.inactivity_timeout
    hard = core.started_at + core.timeout if core.timeout is not None else math.inf
    try:
        while core.result is None:
            if core.cancel_request is not None:
                await interrupt(session, turn)
                return
            now = session.now()
            if now >= hard:
                turn.request_cancel("timeout", f"timed out after {core.timeout:g}s")
                continue
            idle = math.inf
            if idle_after is not None and not session.connection.approvals.waiting_on(core):
                idle = core.last_activity + idle_after
                if now >= idle:
                    turn.request_cancel(
                        "timeout",
                        f"semantic inactivity timeout after {idle_after:g}s "
                        f"(thread {session.thread_id}, turn {core.turn_id}){session.stderr_suffix()}",
                    )
                    continue
            turn.wake = trio.Event()
            with trio.move_on_at(min(hard, idle)):
                await turn.wake.wait()
    except Exception as exc:  # a client bug must still end the turn
        session.client_errors.append(f"turn supervisor: {exc!r}")
        session.kill_turn(turn, f"client error: {exc!r}")


async def interrupt(session: Session, turn: Turn) -> None:
    """Send turn/interrupt and wait for turn/completed within ONE budget; kill the group on failure."""
    core = turn.core
    if core.result is not None:
        return
    if core.state.completed:
        session.finish_turn(turn)
        return
    if not session.alive:
        session.finish_turn(turn, failure=f"server gone: {session.failure or session.kill_reason}")
        return
    if core.turn_id is None or session.thread_id is None:
        session.kill_turn(turn, "cancelled before the turn had an id")
        return
    budget = session.options.interrupt_budget
    request = session.connection.request("turn/interrupt", {"threadId": session.thread_id, "turnId": core.turn_id})
    core.interrupt_request_id = request.id
    answered = False  # stays False when the budget runs out while the answer is awaited
    with turn.interrupt_shield(), trio.move_on_after(budget) as budget_scope:
        if not await _send_interrupt(session, turn, request):
            return  # answered with an error or not at all: the turn is already handled
        answered = True
        await turn.finished.wait()
    if core.result is None or not core.completed_by_server:
        if not answered:
            _answered(session, turn, request.id, "timeout", "no answer within the budget")
        if core.result is None:
            session.write_log(
                logging.WARNING,
                "turn interrupt completion timed out",
                thread_id=session.thread_id,
                turn_id=core.turn_id,
                timeout=budget,
            )
            session.kill_turn(turn, f"turn interrupt completion timed out after {budget:g}s")
        return
    if not answered and budget_scope.cancelled_caught:
        _answered(session, turn, request.id, "no answer", "turn/completed came, the answer did not")


async def _send_interrupt(session: Session, turn: Turn, request: Request) -> bool:
    """Send the interrupt and wait for its answer: True when answered, False when the turn was handled here
    (an error answer, the session's failure); the budget's expiry cancels the wait."""
    core = turn.core
    sent_at = session.now()
    status = core.state.fixed[0] if core.state.fixed else "aborted"
    core.set_timing(interrupt_sent_at=sent_at)
    turn.emit(InterruptSent(sent_at, status))
    session.trace.other("interrupt.sent", {"request_id": request.id, "reason": status}, turn_id=core.turn_id)
    try:
        await session.call(request, session.options.interrupt_budget)
    except RpcError as exc:
        _answered(session, turn, request.id, "error", exc.message)
        session.write_log(
            logging.WARNING,
            "turn interrupt failed",
            thread_id=session.thread_id,
            turn_id=core.turn_id,
            error=exc.message,
        )
        if core.result is None:
            session.kill_turn(turn, f"turn interrupt failed: {exc.message}")
        return False
    except ClientError as exc:  # timeout, exit, kill, lost frame: the session's typed failure
        _answered(session, turn, request.id, "no answer", str(exc))
        if core.result is None:
            session.kill_turn(turn, f"turn interrupt: {exc}")
        return False
    _answered(session, turn, request.id, "ok", None)
    return True


def _answered(session: Session, turn: Turn, request_id: JsonId, outcome: str, error: str | None) -> None:
    session.connection.interrupt_answered(turn.core, request_id, outcome, error, session.now())
    turn.wake_consumer()
