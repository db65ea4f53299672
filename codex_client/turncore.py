"""One turn inside the client core (sans-IO): its state, its timings, its Result and its event buffer.

:class:`TurnCore` is what :class:`~codex_client.connection.ClientConnection` keeps per turn; the trio
side (:class:`codex_client.turn.Turn`) wraps one and adds only the waiting (events to park on, the
consumer's parking lot). :class:`EventBuffer` is the turn's bounded event queue, plain data: the core
appends, the consumer takes, nothing here blocks.
"""

from __future__ import annotations

from collections import deque
from typing import Any, TypeAlias

from codex_client.events import MessageDelta, MessageDeltas, TurnEvent
from codex_client.turnphase import Phase, Step, advance
from codex_client.turnstate import TurnState
from codex_client.usage import TurnUsage
from contracts.record import TurnResult

UserInput: TypeAlias = list[dict[str, Any]]
Queued: TypeAlias = TurnEvent | MessageDeltas


class EventBuffer:
    """Never blocks the producer: past ``limit`` events are dropped and counted (the Result does not depend on them).

    A :class:`MessageDeltas` batch counts as one event per delta. At most ``limit`` events are held (plus the
    forced last one). ``take`` hands out one event at a time (a batch unrolled into its deltas),
    ``take_all`` everything queued, batches as they are.
    """

    __slots__ = ("_cursor", "closed", "count", "dropped", "items", "limit")

    def __init__(self, limit: int) -> None:
        self.limit = max(1, limit)
        self.dropped = 0
        self.count = 0  # events held (a batch counts its deltas)
        self.items: deque[Queued] = deque()
        self.closed = False
        self._cursor = 0  # deltas of the head batch already taken

    def put(self, event: TurnEvent, *, force: bool = False) -> None:
        if self.closed:
            return
        if self.count >= self.limit and not force:
            self.dropped += 1
            return
        self.items.append(event)
        self.count += 1

    def put_deltas(self, batch: MessageDeltas) -> None:
        """One read's deltas: kept whole, cut at the limit (the rest counted as dropped), or dropped."""
        size = len(batch.deltas)
        room = self.limit - self.count
        if self.closed or size == 0:
            return
        if room <= 0:
            self.dropped += size
            return
        if size > room:
            self.dropped += size - room
            batch = MessageDeltas(batch.t, batch.item_ids[:room], batch.deltas[:room], batch.first_n)
            size = room
        self.items.append(batch)
        self.count += size

    def __bool__(self) -> bool:
        return bool(self.items)

    def take(self) -> TurnEvent:
        """The next event (raises IndexError when empty); a batch is unrolled one delta at a time."""
        head = self.items[0]
        if not isinstance(head, MessageDeltas):
            self.items.popleft()
            self.count -= 1
            return head
        i = self._cursor
        event = MessageDelta(head.t, head.item_ids[i], head.deltas[i], head.first_n + i)
        i += 1
        if i == len(head.deltas):
            self.items.popleft()
            i = 0
        self._cursor = i
        self.count -= 1
        return event

    def take_all(self) -> list[Queued]:
        """Everything queued, in order (a partly taken batch comes back as its rest)."""
        out = list(self.items)
        if self._cursor and out:
            head = out[0]
            assert isinstance(head, MessageDeltas)
            c = self._cursor
            out[0] = MessageDeltas(head.t, head.item_ids[c:], head.deltas[c:], head.first_n + c)
        self.items.clear()
        self._cursor = 0
        self.count = 0
        return out


class TurnCore:
    """One turn as the core sees it: what was asked, its phase (:mod:`~codex_client.turnphase`, the one
    lifecycle), the gate's state, timings, kill, trace bookkeeping, Result."""

    def __init__(
        self,
        index: int,
        input: UserInput,
        params: dict[str, Any],
        timeout: float | None,
        model: str | None,
        thread_id: str | None,
        event_buffer: int,
    ) -> None:
        self.index = index
        self.input = input
        self.params = params
        self.timeout = timeout
        self.model = model
        self.state = TurnState(index, thread_id)
        self.events = EventBuffer(event_buffer)
        self.phase = Phase.NEW
        self.result: TurnResult | None = None  # set when the phase becomes ENDED
        self.usage: TurnUsage | None = None
        self.started_at = 0.0
        self.last_activity = 0.0
        self.cancel_at: float | None = None
        self.interrupt_sent_at: float | None = None
        self.interrupt_answered_at: float | None = None
        self.completed_at: float | None = None
        self.interrupt_answer_recorded = False
        self.interrupt_request_id: Any = None
        self.killed = False
        self.kill_reason: str | None = None
        self.trace_open = False
        self.traced_tools: set[str] = set()
        self.ended_tools: set[str] = set()

    @property
    def turn_id(self) -> str | None:
        return self.state.turn_id

    @property
    def running(self) -> bool:
        return self.result is None

    def step(self, step: Step) -> None:
        """Take one step of the lifecycle (:class:`~codex_client.turnphase.IllegalTurnTransition` if the
        phase does not allow it)."""
        self.phase = advance(self.phase, step)

    @property
    def sent(self) -> bool:
        """Entered: turn/start sent, or the turn ended at its start (the session was gone)."""
        return self.phase is not Phase.NEW

    @property
    def cancel_request(self) -> tuple[str, str] | None:
        """(status, error) the first cancellation or deadline fixed, None while none did."""
        return self.state.fixed

    @property
    def completed_by_server(self) -> bool:
        """The turn ended by its ``turn/completed``."""
        return self.state.completed

    def emit(self, event: TurnEvent, *, force: bool = False) -> None:
        self.events.put(event, force=force)

    def set_timing(self, **fields: float) -> None:
        """Set timing fields here and, once delivered, on the Result too."""
        for name, value in fields.items():
            setattr(self, name, value)
            if self.result is not None:
                setattr(self.result, name, value)
