"""The turn supervisor: hard deadline, semantic inactivity and cancellation of one turn, and the interrupt
procedure (``turn/interrupt`` and ``turn/completed`` within ONE budget, else the group is killed).
"""

from __future__ import annotations

import logging
import math
from typing import TYPE_CHECKING

import trio

from contracts.jsonrpc import RpcError
from harness.client.errors import ClientError
from harness.client.events import InterruptSent
from harness.client.server_requests import approval_pending
from harness.client.tracemarks import interrupt_answered

if TYPE_CHECKING:
    from harness.client.session import Session
    from harness.client.turn import Turn


async def supervise(session: Session, turn: Turn) -> None:
    """Deadline, inactivity and cancellation of one turn; runs the interrupt procedure."""
    opts = session.options
    hard = turn.started_at + turn.timeout if turn.timeout is not None else math.inf
    try:
        while turn.result is None:
            if turn.cancel_request is not None:
                await interrupt(session, turn)
                return
            now = session.now()
            if now >= hard:
                turn.request_cancel("timeout", f"timed out after {turn.timeout:g}s")
                continue
            idle = math.inf
            if opts.inactivity_timeout is not None and not approval_pending(session, turn):
                idle = turn.last_activity + opts.inactivity_timeout
                if now >= idle:
                    turn.request_cancel(
                        "timeout",
                        f"semantic inactivity timeout after {opts.inactivity_timeout:g}s "
                        f"(thread {session.thread_id}, turn {turn.state.turn_id}){session._stderr_suffix()}",
                    )
                    continue
            turn.wake = trio.Event()
            with trio.move_on_at(min(hard, idle)):
                await turn.wake.wait()
    except Exception as exc:  # a client bug must still end the turn
        session.client_errors.append(f"turn supervisor: {exc!r}")
        session._kill_for(turn, f"client error: {exc!r}")


async def interrupt(session: Session, turn: Turn) -> None:
    """Send turn/interrupt and wait for turn/completed within ONE budget; kill the group on failure."""
    state = turn.state
    if turn.result is not None:
        return
    if state.completed:
        session._finish_turn(turn)
        return
    if not session.alive:
        session._finish_turn(turn, failure=f"server gone: {session.failure or session.kill_reason}")
        return
    if state.turn_id is None or session.thread_id is None:
        session._kill_for(turn, "cancelled before the turn had an id")
        return
    budget = session.options.interrupt_budget
    status = state.fixed[0] if state.fixed else "aborted"
    request = session._endpoint.request("turn/interrupt", {"threadId": session.thread_id, "turnId": state.turn_id})
    sent_at = session.now()
    answered = False
    outcome = "timeout"
    turn.interrupt_request_id = request.id
    # shielded while the turn is open (a cancelled caller must still get its Result); _finish_turn lifts it
    turn.interrupt_scope = trio.CancelScope(shield=True)
    with turn.interrupt_scope, trio.move_on_after(budget) as budget_scope:
        turn.set_timing(interrupt_sent_at=sent_at)
        turn.emit(InterruptSent(sent_at, status))
        session.trace.other("interrupt.sent", {"request_id": request.id, "reason": status}, turn_id=state.turn_id)
        try:
            await session._call(request, budget)
            answered = True
            outcome = "ok"
        except RpcError as exc:
            outcome = "error"
            interrupt_answered(session, turn, request.id, outcome, exc.message)
            session._log(
                logging.WARNING,
                "turn interrupt failed",
                thread_id=session.thread_id,
                turn_id=state.turn_id,
                error=exc.message,
            )
            if turn.result is None:
                session._kill_for(turn, f"turn interrupt failed: {exc.message}")
            return
        except ClientError as exc:  # timeout, exit, kill, lost frame: the session's typed failure
            outcome = "no answer"
            interrupt_answered(session, turn, request.id, outcome, str(exc))
            if turn.result is None:
                session._kill_for(turn, f"turn interrupt: {exc}")
            return
        if answered:
            interrupt_answered(session, turn, request.id, outcome, None)
        await turn.finished.wait()
    if turn.result is None or not turn.completed_by_server:
        if not answered:
            interrupt_answered(session, turn, request.id, outcome, "no answer within the budget")
        if turn.result is None:
            session._log(
                logging.WARNING,
                "turn interrupt completion timed out",
                thread_id=session.thread_id,
                turn_id=state.turn_id,
                timeout=budget,
            )
            session._kill_for(turn, f"turn interrupt completion timed out after {budget:g}s")
        return
    if not answered and budget_scope.cancelled_caught:
        interrupt_answered(session, turn, request.id, "no answer", "turn/completed came, the answer did not")
