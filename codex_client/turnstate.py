"""The state of one turn as the client sees it (sans-IO: notifications and times in, events out).

Which notifications belong to the turn (the turn gate), which items are open, the turn error,
the final text, and the terminal status of ``docs/client-rules.md`` §3. Only
``turn/completed`` ends a turn; ``error``, idle status and a ``final_answer`` message do not.
Usage is accounted by :mod:`codex_client.usage`; server requests by the session.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from codex_client.events import (
    ErrorNotified,
    ItemCompleted,
    ItemStarted,
    MessageDelta,
    TurnEvent,
    TurnStarted,
)

ABORTED_STATUSES: Final = frozenset({"interrupted", "cancelled", "canceled", "aborted", "turn_aborted"})
TOOL_ITEM_TYPES: Final = frozenset({"commandExecution", "fileChange", "mcpToolCall"})


@dataclass(slots=True)
class OpenItem:
    item_id: str
    item_type: str
    item: dict[str, Any]
    started_at: float


def _as_dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def notification_turn_id(method: str, params: Mapping[str, Any]) -> str | None:
    """The turn id a notification names (``turnId`` or ``turn.id``), None when it names none."""
    turn_id = params.get("turnId")
    if isinstance(turn_id, str):
        return turn_id
    turn = params.get("turn")
    if isinstance(turn, Mapping) and isinstance(turn.get("id"), str):
        return turn["id"]
    return None


def is_turn_scoped(method: str) -> bool:
    return method.startswith(("item/", "turn/")) or method == "error"


class TurnState:
    """One turn: its gate, its items, its messages and how it ended."""

    def __init__(self, index: int, thread_id: str | None) -> None:
        self.index = index
        self.thread_id = thread_id
        self.turn_id: str | None = None
        self.started_seen = False  # turn/started consumed
        self.deltas = 0
        self.items_started = 0
        self.approvals = 0
        self.open_items: dict[str, OpenItem] = {}
        self.tool_items: dict[str, OpenItem] = {}  # every tool item of the turn, by id
        self.partial: dict[str, list[str]] = {}  # agent message deltas per item
        self.final_answer: str | None = None
        self.last_message: str | None = None
        self.turn_error: str | None = None  # first willRetry:false error or unsupported request
        self.fixed: tuple[str, str] | None = None  # (status, error) fixed by cancellation / deadline
        self.completed = False  # turn/completed consumed
        self.completed_consumed = 0
        self.server_status: str | None = None
        self.server_error: str | None = None
        self.completion_usage: Any = None
        self.ignored = 0  # gate drops

    # --- the gate ---------------------------------------------------------------------------------

    def set_turn_id(self, turn_id: str) -> bool:
        """Learn the turn id (from the turn/start response or turn/started); False if it contradicts."""
        if self.turn_id is None:
            self.turn_id = turn_id
            return True
        return self.turn_id == turn_id

    def accepts(self, method: str, params: Mapping[str, Any]) -> bool:
        """Whether a turn-scoped notification of our thread belongs to this turn."""
        if self.completed:
            return False  # a duplicate or replayed turn/completed cannot reopen the turn
        named = notification_turn_id(method, params)
        if named is None:
            # id-less turn events are ours only while we do not know our id yet
            return self.turn_id is None or method not in ("turn/started", "turn/completed")
        return self.turn_id is None or named == self.turn_id

    # --- notifications ----------------------------------------------------------------------------

    def on_notification(self, method: str, params: Mapping[str, Any], t: float) -> list[TurnEvent]:
        if method == "turn/started":
            turn_id = notification_turn_id(method, params)
            if turn_id is not None:
                self.set_turn_id(turn_id)
            if self.started_seen:
                return []
            self.started_seen = True
            return [TurnStarted(t, self.turn_id or "")]
        if method == "item/agentMessage/delta":
            item_id = str(params.get("itemId", ""))
            delta = params.get("delta")
            if not isinstance(delta, str):
                return []
            self.deltas += 1
            self.partial.setdefault(item_id, []).append(delta)
            return [MessageDelta(t, item_id, delta, self.deltas)]
        if method == "item/started":
            item = _as_dict(params.get("item"))
            item_id = str(item.get("id", ""))
            item_type = str(item.get("type", ""))
            self.items_started += 1
            entry = OpenItem(item_id, item_type, item, t)
            self.open_items[item_id] = entry
            if item_type in TOOL_ITEM_TYPES:
                self.tool_items.setdefault(item_id, entry)
            return [ItemStarted(t, item_id, item_type, item, self.items_started)]
        if method == "item/completed":
            item = _as_dict(params.get("item"))
            item_id = str(item.get("id", ""))
            item_type = str(item.get("type", ""))
            self.open_items.pop(item_id, None)
            if item_type == "agentMessage" and isinstance(item.get("text"), str):
                self.last_message = item["text"]
                if item.get("phase") == "final_answer":
                    self.final_answer = item["text"]
            status = item.get("status")
            return [ItemCompleted(t, item_id, item_type, status if isinstance(status, str) else None, item)]
        if method == "error":
            error = _as_dict(params.get("error"))
            message = str(error.get("message") or params.get("message") or "error")
            will_retry = bool(params.get("willRetry"))
            if not will_retry:
                self.record_error(message)
            return [ErrorNotified(t, message, will_retry)]
        if method == "turn/completed":
            return self._on_completed(params)
        return []

    def _on_completed(self, params: Mapping[str, Any]) -> list[TurnEvent]:
        turn = _as_dict(params.get("turn"))
        if isinstance(turn.get("id"), str):
            self.set_turn_id(turn["id"])
        self.completed = True
        self.completed_consumed += 1
        status = turn.get("status")
        self.server_status = status if isinstance(status, str) else None
        error = turn.get("error")
        if isinstance(error, Mapping) and isinstance(error.get("message"), str):
            self.server_error = error["message"]
        if self.last_message is None:
            # The real server carries the turn's agent messages on completion: a fallback when item/completed
            # was opted out
            for item in turn.get("items") or ():
                if not isinstance(item, Mapping) or item.get("type") != "agentMessage":
                    continue
                if isinstance(item.get("text"), str):
                    self.last_message = item["text"]
                    if item.get("phase") == "final_answer":
                        self.final_answer = item["text"]
        self.completion_usage = turn.get("usage")
        return []

    # --- outcome ----------------------------------------------------------------------------------

    def record_error(self, message: str) -> None:
        """The turn error: the first one wins."""
        if self.turn_error is None:
            self.turn_error = message

    def fix(self, status: str, error: str) -> bool:
        """Fix the Result's status at cancellation (aborted) or deadline (timeout); the first fix wins."""
        if self.fixed is None:
            self.fixed = (status, error)
            return True
        return False

    def outcome(self) -> tuple[str, str | None] | None:
        """The Result status and error per section 7, or None while nothing decided it."""
        if self.fixed is not None:
            return self.fixed
        if not self.completed:
            return None
        status = self.server_status
        if status == "completed":
            return ("failed", self.turn_error) if self.turn_error else ("completed", None)
        if status == "failed":
            return "failed", self.server_error or self.turn_error or "turn failed"
        if status in ABORTED_STATUSES:
            return "aborted", self.server_error or self.turn_error or "turn was aborted"
        return "failed", f"turn/completed with unexpected status {status!r}"

    @property
    def final_text(self) -> str:
        """The ``final_answer`` message, else the last completed agent message (never all joined)."""
        if self.final_answer is not None:
            return self.final_answer
        return self.last_message or ""

    @property
    def partial_text(self) -> str:
        """Everything streamed as agent message deltas, in order (survives a cancel)."""
        return "".join("".join(parts) for parts in self.partial.values())

    def close_open_items(self, t: float) -> list[ItemCompleted]:
        """Close what the server left open as ``aborted`` (it never completes interrupted items)."""
        closed = [
            ItemCompleted(t, entry.item_id, entry.item_type, "aborted", entry.item, local=True)
            for entry in self.open_items.values()
        ]
        self.open_items.clear()
        return closed


def nested_id(obj: Any, key: str) -> str | None:
    if isinstance(obj, Mapping):
        inner = obj.get(key)
        if isinstance(inner, Mapping) and isinstance(inner.get("id"), str) and inner["id"]:
            return inner["id"]
    return None
