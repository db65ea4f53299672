"""Requests from the server to the client (approvals): attribution to a turn, the policy, the answer.

Each approval runs its policy in its own background task, bounded by ``approval_timeout``; a turn that ends
while one is pending closes it locally (:func:`close_approval_locally`).
"""

from __future__ import annotations

import contextlib
import inspect
import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import trio

from contracts.jsonrpc import ProtocolViolation
from contracts.messages import INTERNAL_ERROR, METHOD_NOT_FOUND, JsonId, Message, Request
from contracts.transport import TransportClosed
from harness.client.approvals import APPROVAL_METHODS, DECISIONS, ERROR_DECISION, ApprovalRequest, answer_for
from harness.client.errors import ClientError
from harness.client.events import ApprovalAnswered, ApprovalRequested, ApprovalResolved

if TYPE_CHECKING:
    from harness.client.session import Session
    from harness.client.turn import Turn


@dataclass(slots=True)
class PendingApproval:
    request: ApprovalRequest
    turn: Turn | None
    scope: trio.CancelScope = field(default_factory=trio.CancelScope)
    answered: bool = False
    closed: bool = False  # closed locally (turn ended while pending)
    resolved: bool = False  # serverRequest/resolved seen, or closed locally


def approval_pending(session: Session, turn: Turn) -> bool:
    return any(p.turn is turn and not p.answered and not p.closed for p in session._approvals.values())


def on_resolved(session: Session, params: dict[str, Any], t: float) -> None:
    request_id = params.get("requestId")
    pending = session._approvals.get(request_id) if isinstance(request_id, int | str) else None
    if pending is None or pending.resolved:
        return
    pending.resolved = True
    if pending.turn is not None and pending.turn.result is None:
        pending.turn.emit(ApprovalResolved(t, request_id))  # type: ignore[arg-type]
    session.trace.other(
        "approval.resolved", {"request_id": request_id, "local": False}, turn_id=pending.request.turn_id
    )


def on_server_request(session: Session, request: Request, t: float) -> None:
    params = request.params if isinstance(request.params, dict) else {}
    turn = session._active
    turn_id = params.get("turnId") if isinstance(params.get("turnId"), str) else None
    if turn is not None and (
        turn.result is not None
        or (turn_id is not None and turn.state.turn_id not in (None, turn_id))
        or turn_id in session._ended_turn_ids
    ):
        turn = None  # another (earlier, sub-agent) turn's request: answered, not attributed
    kind = APPROVAL_METHODS.get(request.method)
    if kind is None:
        reason = f"unsupported app-server request: {request.method}"
        if turn is not None:
            turn.state.record_error(reason)
            turn.emit(ApprovalAnswered(t, request.id, request.method, error=reason, reason=reason))
        session._log(logging.WARNING, reason, request_id=request.id)
        session._spawn(answer_error, session, request.id, METHOD_NOT_FOUND, reason)
        return
    if turn is not None:
        turn.state.approvals += 1
    approval = ApprovalRequest(
        request_id=request.id,
        method=request.method,
        kind=kind,
        params=params,
        index=session._approval_count,
        thread_id=params.get("threadId") if isinstance(params.get("threadId"), str) else None,
        turn_id=turn_id,
        item_id=params.get("itemId") if isinstance(params.get("itemId"), str) else None,
        turn_index=turn.index if turn is not None else None,
        n=turn.state.approvals if turn is not None else 0,
    )
    session._approval_count += 1
    pending = PendingApproval(approval, turn)
    session._approvals[request.id] = pending
    session.trace.other(
        "approval.opened",
        {"request_id": request.id, "method": request.method, "item_id": approval.item_id},
        turn_id=turn_id,
    )
    if turn is not None:
        turn.emit(
            ApprovalRequested(
                t, request.id, request.method, approval.item_id, params, turn.state.approvals, approval.index
            )
        )
        turn.wake.set()  # the inactivity window pauses while an approval is pending
    session._spawn(run_policy, session, pending)


async def run_policy(session: Session, pending: PendingApproval) -> None:
    request = pending.request
    decision: Any = None
    reason: str | None = None
    with pending.scope:
        try:
            with trio.move_on_after(session.options.approval_timeout) as deadline:
                decision = session.policy(request)
                if inspect.isawaitable(decision):
                    decision = await decision
            if deadline.cancelled_caught:
                decision, reason = "cancel", "approval policy past its deadline"
            elif not (isinstance(decision, dict) or decision in DECISIONS):
                decision, reason = ERROR_DECISION, f"approval policy returned an invalid decision: {decision!r}"
        except Exception as exc:
            decision, reason = ERROR_DECISION, f"approval policy failed: {exc!r}"
    if pending.closed or pending.scope.cancelled_caught or not session.alive:
        return
    pending.answered = True
    t = session.now()
    turn = pending.turn
    if turn is not None:
        turn.last_activity = t
        turn.wake.set()
    try:
        if decision == ERROR_DECISION:
            message = reason or "approval refused by the client"
            session._log(logging.INFO, "approval answered with an error", request_id=request.request_id, reason=message)
            if turn is not None and turn.result is None:
                turn.emit(ApprovalAnswered(t, request.request_id, request.method, error=message, reason=reason))
            session.trace.other(
                "approval.answered", {"request_id": request.request_id, "error": message}, turn_id=request.turn_id
            )
            await answer_error(session, request.request_id, INTERNAL_ERROR, message)
        else:
            result = answer_for(request, decision)
            if turn is not None and turn.result is None:
                turn.emit(ApprovalAnswered(t, request.request_id, request.method, decision=decision, reason=reason))
            session.trace.other(
                "approval.answered",
                {"request_id": request.request_id, "decision": decision},
                turn_id=request.turn_id,
            )
            await send_answer(session, session._endpoint.respond(request.request_id, result))
    except ProtocolViolation:
        pass  # closed locally meanwhile


async def answer_error(session: Session, request_id: JsonId, code: int, message: str) -> None:
    try:
        answer = session._endpoint.respond_error(request_id, code, message)
    except ProtocolViolation:
        return
    await send_answer(session, answer)


async def send_answer(session: Session, answer: Message) -> None:
    if not session.alive:
        return
    # an answer that cannot be written is moot: the session's failure is reported where it is awaited
    with contextlib.suppress(TransportClosed, ClientError), trio.move_on_after(session.options.request_timeout):
        await session._send_message(answer)


def close_approval_locally(session: Session, request_id: JsonId, pending: PendingApproval, t: float) -> None:
    pending.closed = True
    pending.scope.cancel()
    session._endpoint.incoming.pop(request_id, None)
    if pending.turn is not None:
        pending.turn.emit(ApprovalResolved(t, request_id, local=True))
    if not pending.resolved:
        pending.resolved = True
        session.trace.other(
            "approval.resolved",
            {"request_id": request_id, "local": True, "outcome": "cancelled"},
            turn_id=pending.request.turn_id,
        )
