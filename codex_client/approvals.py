"""Approval policies: who answers the server's requests, and how a decision becomes a wire answer.

A policy is a callable taking an :class:`ApprovalRequest` and returning a decision, directly or as
an awaitable. A decision is ``"accept"``, ``"acceptForSession"``, ``"decline"``, ``"cancel"``, a
decision object (``{"acceptWithExecpolicyAmendment": ...}``) passed through, or ``"error"`` to answer
with a JSON-RPC error. The session bounds every policy by a deadline (past it: ``cancel``) and
answers a policy that raises with a JSON-RPC error. Requests the client does not support are
answered ``-32601 unsupported app-server request: <method>`` without asking the policy.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, TypeAlias

from contracts.messages import JsonId

Decision: TypeAlias = str | dict[str, Any]
Policy: TypeAlias = Callable[["ApprovalRequest"], Decision | Awaitable[Decision]]

ERROR_DECISION: Final = "error"
DECISIONS: Final = ("accept", "acceptForSession", "decline", "cancel", ERROR_DECISION)

#: server request method -> kind; everything else is unsupported
APPROVAL_METHODS: Final[dict[str, str]] = {
    "item/commandExecution/requestApproval": "command",
    "item/fileChange/requestApproval": "file_change",
    "item/permissions/requestApproval": "permissions",
    "mcpServer/elicitation/request": "elicitation",
    "execCommandApproval": "legacy_exec",
    "applyPatchApproval": "legacy_patch",
}

# v1 ReviewDecision names of the deprecated approval requests
_LEGACY: Final = {
    "accept": "approved",
    "acceptForSession": "approved_for_session",
    "decline": "denied",
    "cancel": "abort",
}
_ELICITATION: Final = {"accept": "accept", "acceptForSession": "accept", "decline": "decline", "cancel": "cancel"}


@dataclass(frozen=True, slots=True)
class ApprovalRequest:
    request_id: JsonId
    method: str
    kind: str  # see APPROVAL_METHODS
    params: dict[str, Any]
    index: int  # 0-based ordinal among the session's approval requests
    thread_id: str | None = None
    turn_id: str | None = None
    item_id: str | None = None
    #: the session's 0-based index of the turn it belongs to, None outside a turn
    turn_index: int | None = None
    #: 1-based ordinal among the approval requests of that turn (0 outside a turn)
    n: int = 0
    extra: dict[str, Any] = field(default_factory=dict)


def accept_all(request: ApprovalRequest) -> Decision:
    return "accept"


def decline_all(request: ApprovalRequest) -> Decision:
    return "decline"


def cancel_all(request: ApprovalRequest) -> Decision:
    return "cancel"


def in_order(decisions: Sequence[Decision], default: Decision = "accept") -> Policy:
    """The ``index``-th request of the session gets ``decisions[index]``, later ones ``default``."""
    fixed = tuple(decisions)

    def policy(request: ApprovalRequest) -> Decision:
        return fixed[request.index] if request.index < len(fixed) else default

    return policy


def _echo_permissions(params: Mapping[str, Any]) -> dict[str, Any]:
    requested = params.get("permissions")
    if not isinstance(requested, Mapping):
        return {}
    return {key: requested[key] for key in ("network", "fileSystem") if key in requested}


def answer_for(request: ApprovalRequest, decision: Decision) -> dict[str, Any]:
    """The result object answering ``request`` with ``decision`` (not for ``"error"``)."""
    if request.kind in ("legacy_exec", "legacy_patch"):
        return {"decision": _LEGACY.get(decision, decision) if isinstance(decision, str) else decision}
    if request.kind == "elicitation":
        action = _ELICITATION.get(decision, "decline") if isinstance(decision, str) else "decline"
        return {"action": action, "content": None, "_meta": None}
    if request.kind == "permissions":
        granted = _echo_permissions(request.params) if decision in ("accept", "acceptForSession") else {}
        return {"permissions": granted, "scope": "session" if decision == "acceptForSession" else "turn"}
    return {"decision": decision}
