"""The approvals table of the client core (sans-IO): server requests in, answers out.

Each approval request the server sends gets a :class:`PendingApproval`: attributed to the running turn (or to
none), announced to the turn's events and the client trace, answered once with the policy's decision, or closed
locally when its turn ends first (never answered late). Who runs the policy, and when, is the driver's business
(:mod:`codex_client.server_requests`); this table only says what the answer is.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from codex_client.approvals import APPROVAL_METHODS, ERROR_DECISION, ApprovalRequest, Decision, answer_for
from codex_client.events import ApprovalAnswered, ApprovalRequested, ApprovalResolved
from codex_client.tracerecords import TraceQueue, TraceSink
from codex_client.turncore import TurnCore
from contracts.jsonrpc import Endpoint, ProtocolViolation
from contracts.messages import INTERNAL_ERROR, METHOD_NOT_FOUND, ErrorResponse, JsonId, Message, Request


@dataclass(slots=True)
class PendingApproval:
    request: ApprovalRequest
    turn: TurnCore | None
    answered: bool = False
    closed: bool = False  # closed locally (turn ended while pending)
    resolved: bool = False  # serverRequest/resolved seen, or closed locally

    @property
    def open(self) -> bool:
        return not self.answered and not self.closed


class ApprovalTable:
    """Pending approvals by request id, the session's approval ordinal, and the answers."""

    def __init__(self, endpoint: Endpoint, trace: TraceSink | None = None) -> None:
        self.endpoint = endpoint
        self.trace: TraceSink = trace if trace is not None else TraceQueue(lambda record: None)
        self.pending: dict[JsonId, PendingApproval] = {}
        self.count = 0

    def open(self, request: Request, turn: TurnCore | None, t: float) -> PendingApproval | ErrorResponse:
        """A server request: a pending approval, or (an unsupported method) the error answer to send now."""
        params = request.params if isinstance(request.params, dict) else {}
        turn_id = _str(params.get("turnId"))
        kind = APPROVAL_METHODS.get(request.method)
        if kind is None:
            reason = f"unsupported app-server request: {request.method}"
            if turn is not None:
                turn.state.record_error(reason)
                turn.emit(ApprovalAnswered(t, request.id, request.method, error=reason, reason=reason))
            return self.endpoint.respond_error(request.id, METHOD_NOT_FOUND, reason)
        if turn is not None:
            turn.state.approvals += 1
        approval = ApprovalRequest(
            request_id=request.id,
            method=request.method,
            kind=kind,
            params=params,
            index=self.count,
            thread_id=_str(params.get("threadId")),
            turn_id=turn_id,
            item_id=_str(params.get("itemId")),
            turn_index=turn.index if turn is not None else None,
            n=turn.state.approvals if turn is not None else 0,
        )
        self.count += 1
        pending = self.pending[request.id] = PendingApproval(approval, turn)
        self.trace.other(
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
        return pending

    def resolved(self, params: dict[str, Any], t: float) -> None:
        """``serverRequest/resolved``: the server cleared the request (answered or not)."""
        request_id = params.get("requestId")
        if not isinstance(request_id, int | str):
            return
        pending = self.pending.get(request_id)
        if pending is None or pending.resolved:
            return
        pending.resolved = True
        if pending.turn is not None and pending.turn.running:
            pending.turn.emit(ApprovalResolved(t, request_id))
        self.trace.other(
            "approval.resolved", {"request_id": request_id, "local": False}, turn_id=pending.request.turn_id
        )

    def answer(self, pending: PendingApproval, decision: Decision, reason: str | None, t: float) -> Message | None:
        """The answer to send for the policy's decision; None when the request was closed meanwhile."""
        if not pending.open:
            return None
        pending.answered = True
        request, turn = pending.request, pending.turn
        if turn is not None:
            turn.last_activity = t
        live = turn is not None and turn.running
        try:
            if decision == ERROR_DECISION:
                message = reason or "approval refused by the client"
                answer: Message = self.endpoint.respond_error(request.request_id, INTERNAL_ERROR, message)
                if live and turn is not None:
                    turn.emit(ApprovalAnswered(t, request.request_id, request.method, error=message, reason=reason))
                meta: dict[str, Any] = {"request_id": request.request_id, "error": message}
            else:
                answer = self.endpoint.respond(request.request_id, answer_for(request, decision))
                if live and turn is not None:
                    turn.emit(
                        ApprovalAnswered(t, request.request_id, request.method, decision=decision, reason=reason)
                    )
                meta = {"request_id": request.request_id, "decision": decision}
        except ProtocolViolation:
            return None  # closed locally meanwhile
        self.trace.other("approval.answered", meta, turn_id=request.turn_id)
        return answer

    def waiting_on(self, turn: TurnCore) -> bool:
        """Whether an approval of ``turn`` still waits for the policy (the inactivity window pauses)."""
        return any(p.turn is turn and p.open for p in self.pending.values())

    def close_for_turn(self, turn: TurnCore, t: float) -> list[JsonId]:
        """The turn ended: close its approvals still waiting, locally (the server cleared them)."""
        closed = [rid for rid, p in self.pending.items() if p.turn is turn and p.open]
        for request_id in closed:
            self.close_locally(request_id, t)
        return closed

    def close_locally(self, request_id: JsonId, t: float) -> None:
        pending = self.pending[request_id]
        pending.closed = True
        self.endpoint.incoming.pop(request_id, None)
        if pending.turn is not None:
            pending.turn.emit(ApprovalResolved(t, request_id, local=True))
        if not pending.resolved:
            pending.resolved = True
            self.trace.other(
                "approval.resolved",
                {"request_id": request_id, "local": True, "outcome": "cancelled"},
                turn_id=pending.request.turn_id,
            )

    def close_at_session_end(self) -> None:
        """The trace's last word on requests never resolved."""
        for request_id, pending in self.pending.items():
            if not pending.resolved:
                pending.resolved = True
                self.trace.other(
                    "approval.resolved",
                    {"request_id": request_id, "local": True, "outcome": "session closed"},
                    turn_id=pending.request.turn_id,
                )


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None
