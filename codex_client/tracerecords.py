"""The client trace as the core's effects: records the driver writes, never a writer the core holds.

The core (:class:`~codex_client.connection.ClientConnection` and its approvals table) says what the trace bundle
should record through a :class:`TraceQueue`, which queues a :class:`TraceRecord` among the core's other events
(one way out: ``take_events``); the session hands each to its writer (:class:`~codex_client.trace.ClientTrace`,
or :class:`~codex_client.trace.NullTrace` without a bundle) in order, and closes it at :class:`TraceClosed`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, TypeAlias

TraceKind: TypeAlias = Literal["thread_started", "turn_started", "turn_ended", "tool_started", "tool_ended", "other"]


class TraceSink(Protocol):
    """What writes the records (:class:`~codex_client.trace.ClientTrace`)."""

    def thread_started(
        self, thread_id: str, *, resumed: bool = False, metadata: dict[str, Any] | None = None
    ) -> None: ...

    def turn_started(self, turn_id: str, thread_id: str) -> None: ...

    def turn_ended(self, turn_id: str, status: str) -> None: ...

    def tool_started(
        self, item_id: str, item_type: str, item: dict[str, Any], thread_id: str, turn_id: str
    ) -> None: ...

    def tool_ended(self, item_id: str, status: str, item: dict[str, Any] | None = None) -> None: ...

    def other(self, kind: str, metadata: dict[str, Any], *, turn_id: str | None = None) -> None: ...


@dataclass(frozen=True, slots=True)
class TraceRecord:
    """Record this in the client trace: ``kind`` is the writer's method, called with ``args`` and ``kwargs``."""

    kind: TraceKind
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = field(default_factory=dict)

    def write_to(self, sink: TraceSink) -> None:
        match self.kind:
            case "thread_started":
                sink.thread_started(*self.args, **self.kwargs)
            case "turn_started":
                sink.turn_started(*self.args, **self.kwargs)
            case "turn_ended":
                sink.turn_ended(*self.args, **self.kwargs)
            case "tool_started":
                sink.tool_started(*self.args, **self.kwargs)
            case "tool_ended":
                sink.tool_ended(*self.args, **self.kwargs)
            case "other":
                sink.other(*self.args, **self.kwargs)


@dataclass(frozen=True, slots=True)
class TraceClosed:
    """The session is over: close the client trace with ``status`` (``completed`` or ``failed``)."""

    status: str


class TraceQueue:
    """The core's side of the trace: the writer's interface, each call queued as a :class:`TraceRecord`."""

    __slots__ = ("_put",)

    def __init__(self, put: Callable[[TraceRecord], None]) -> None:
        self._put = put

    def thread_started(self, thread_id: str, *, resumed: bool = False, metadata: dict[str, Any] | None = None) -> None:
        self._put(TraceRecord("thread_started", (thread_id,), {"resumed": resumed, "metadata": metadata}))

    def turn_started(self, turn_id: str, thread_id: str) -> None:
        self._put(TraceRecord("turn_started", (turn_id, thread_id)))

    def turn_ended(self, turn_id: str, status: str) -> None:
        self._put(TraceRecord("turn_ended", (turn_id, status)))

    def tool_started(self, item_id: str, item_type: str, item: dict[str, Any], thread_id: str, turn_id: str) -> None:
        self._put(TraceRecord("tool_started", (item_id, item_type, item, thread_id, turn_id)))

    def tool_ended(self, item_id: str, status: str, item: dict[str, Any] | None = None) -> None:
        self._put(TraceRecord("tool_ended", (item_id, status, item)))

    def other(self, kind: str, metadata: dict[str, Any], *, turn_id: str | None = None) -> None:
        self._put(TraceRecord("other", (kind, metadata), {"turn_id": turn_id}))
