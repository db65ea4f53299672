"""Typed events of a turn, in the order the client observed them (``t`` on the session's monotonic clock).

The iterator of :class:`codex_client.turn.Turn` yields these; the last one is always
:class:`TurnEnded`. Counters (``n``) are 1-based within the turn, so a caller can act "after the
n-th delta" or "when the n-th approval is pending".
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TypeAlias

from contracts.messages import JsonId
from contracts.usage import UsageBuckets


@dataclass(frozen=True, slots=True)
class TurnStarted:
    t: float
    turn_id: str


@dataclass(slots=True)
class MessageDelta:
    """Not frozen, unlike the other events: one is built per streamed delta, and a frozen dataclass pays a
    ``object.__setattr__`` call per field (about twice the cost). Treat it as read-only all the same."""

    t: float
    item_id: str
    delta: str
    n: int  # n-th agent message delta of the turn


@dataclass(frozen=True, slots=True)
class MessageDeltas:
    """The agent message deltas of the running turn that one read brought, as one batch.

    Only :meth:`codex_client.turn.Turn.batches` hands these out; the per-event iterator yields one
    :class:`MessageDelta` per delta instead. ``item_ids[i]`` and ``deltas[i]`` belong together; the i-th
    delta's ``n`` is ``first_n + i``.
    """

    t: float
    item_ids: list[str]
    deltas: list[str]
    first_n: int

    def __len__(self) -> int:
        return len(self.deltas)

    def events(self) -> list[MessageDelta]:
        t, n = self.t, self.first_n
        return [MessageDelta(t, i, d, n + k) for k, (i, d) in enumerate(zip(self.item_ids, self.deltas, strict=True))]


@dataclass(frozen=True, slots=True)
class ItemStarted:
    t: float
    item_id: str
    item_type: str
    item: dict[str, Any]
    n: int  # n-th item/started of the turn


@dataclass(frozen=True, slots=True)
class ItemCompleted:
    """An item ended. ``local`` is True when the client closed it itself (status ``aborted``) at the turn's end."""

    t: float
    item_id: str
    item_type: str
    status: str | None
    item: dict[str, Any]
    local: bool = False


@dataclass(frozen=True, slots=True)
class ApprovalRequested:
    t: float
    request_id: JsonId
    method: str
    item_id: str | None
    params: dict[str, Any]
    n: int  # n-th approval request of the turn
    index: int  # 0-based ordinal among the session's approval requests


@dataclass(frozen=True, slots=True)
class ApprovalAnswered:
    """The client answered a server request: ``decision`` sent as a result, or ``error`` as a JSON-RPC error."""

    t: float
    request_id: JsonId
    method: str
    decision: Any = None
    error: str | None = None
    reason: str | None = None  # why (policy raised, policy past its deadline, unsupported request)


@dataclass(frozen=True, slots=True)
class ApprovalResolved:
    """``serverRequest/resolved`` arrived, or (``local``) the client closed a request still pending at the end."""

    t: float
    request_id: JsonId
    local: bool = False


@dataclass(frozen=True, slots=True)
class UsageUpdated:
    t: float
    added: UsageBuckets  # what this update contributed (zero for a duplicate)
    turn_total: UsageBuckets  # the turn's usage so far


@dataclass(frozen=True, slots=True)
class ErrorNotified:
    t: float
    message: str
    will_retry: bool


@dataclass(frozen=True, slots=True)
class Steered:
    t: float
    turn_id: str


@dataclass(frozen=True, slots=True)
class InterruptSent:
    t: float
    reason: str  # the status the cancellation fixed: aborted | timeout


@dataclass(frozen=True, slots=True)
class InterruptAnswered:
    t: float
    error: str | None = None


@dataclass(frozen=True, slots=True)
class TurnEnded:
    """The last event: the turn's Result is final (``status`` is the Result's status)."""

    t: float
    status: str
    server_status: str | None


TurnEvent: TypeAlias = (
    TurnStarted
    | MessageDelta
    | ItemStarted
    | ItemCompleted
    | ApprovalRequested
    | ApprovalAnswered
    | ApprovalResolved
    | UsageUpdated
    | ErrorNotified
    | Steered
    | InterruptSent
    | InterruptAnswered
    | TurnEnded
)
