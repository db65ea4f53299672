"""A turn: started by entering it, consumed as an async iterator of typed events, ended by one Result.

    turn = session.turn("Say hello")
    with trio.move_on_after(5):          # cancelling this scope interrupts the turn
        async with turn:
            async for event in turn:
                if isinstance(event, MessageDelta) and event.n == 3:
                    turn.cancel()       # or steer: await turn.steer("...")
    result = turn.result                # exactly one TurnResult, on every path

Leaving the ``async with`` normally waits for the turn to end (bounded by the turn deadline and the
inactivity watchdog); leaving it with an exception or a cancellation interrupts the turn
(``turn/interrupt`` within ONE budget, else the server's process group is killed), then re-raises.
"""

from __future__ import annotations

from collections import deque
from types import TracebackType
from typing import TYPE_CHECKING, Any, Final, TypeAlias

import trio

from contracts.record import TurnResult
from harness.client.errors import ClientError
from harness.client.events import Steered, TurnEvent
from harness.client.turnstate import TurnState
from harness.client.usage import TurnUsage

if TYPE_CHECKING:
    from harness.client.session import Session

UserInput: TypeAlias = list[dict[str, Any]]
#: how long after the interrupt budget a cancelled caller's backstop waits before killing (scheduling only)
BACKSTOP_SLACK: Final = 0.25


class EventQueue:
    """Never blocks the reader: past ``limit`` events are dropped and counted (the Result does not depend on them).

    At most ``limit`` events are held (plus the forced last one). The consumer is woken only when it is parked,
    so a read that yields hundreds of events wakes it once, not once per event.
    """

    def __init__(self, limit: int) -> None:
        self.limit = max(1, limit)
        self.dropped = 0
        self._items: deque[TurnEvent] = deque()
        self._closed = False
        self._lot = trio.lowlevel.ParkingLot()

    def put(self, event: TurnEvent, *, force: bool = False) -> None:
        if self._closed:
            return
        if len(self._items) >= self.limit and not force:
            self.dropped += 1
            return
        self._items.append(event)
        if self._lot:
            self._lot.unpark_all()

    def wake(self) -> None:
        """Wake a parked consumer (after events were appended to ``_items`` directly, in bulk)."""
        if self._lot and self._items:
            self._lot.unpark_all()

    def close(self) -> None:
        self._closed = True
        self._lot.unpark_all()

    async def get(self) -> TurnEvent | None:
        """The next event, None once the turn ended and every kept event was taken."""
        while not self._items:
            if self._closed:
                return None
            await self._lot.park()
        return self._items.popleft()


class Turn:
    """One turn of a session. Create it with :meth:`Session.turn`."""

    def __init__(
        self,
        session: Session,
        index: int,
        input: UserInput,
        params: dict[str, Any],
        timeout: float | None,
        model: str | None,
    ) -> None:
        self.session = session
        self.index = index
        self.input = input
        self.params = params
        self.timeout = timeout
        self.model = model
        self.state = TurnState(index, session.thread_id)
        self.events = EventQueue(session.options.event_buffer)
        self.result: TurnResult | None = None
        self.usage: TurnUsage | None = None
        self.sent = False
        self.started_at = 0.0
        self.last_activity = 0.0
        self.cancel_request: tuple[str, str] | None = None
        self.cancel_at: float | None = None
        self.interrupt_sent_at: float | None = None
        self.interrupt_answered_at: float | None = None
        self.completed_at: float | None = None
        self.completed_by_server = False
        self.interrupt_answer_recorded = False
        self.interrupt_request_id: Any = None
        self.interrupt_scope: trio.CancelScope | None = None
        self.killed = False
        self.kill_reason: str | None = None
        self.trace_open = False
        self.traced_tools: set[str] = set()
        self.ended_tools: set[str] = set()
        self.id_known = trio.Event()
        self.finished = trio.Event()
        self.wake = trio.Event()

    # --- context manager --------------------------------------------------------------------------

    async def __aenter__(self) -> Turn:
        await self.session._start_turn(self)
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self.result is not None:
            return
        if exc_type is None:
            try:
                await self.wait()
                return
            except trio.Cancelled:
                self.request_cancel("aborted", "execution cancelled")
                await self._wait_after_cancel()
                raise
        self.request_cancel("aborted", "execution cancelled")
        await self._wait_after_cancel()

    async def _wait_after_cancel(self) -> None:
        """Shielded: the supervisor ends the turn within the interrupt budget; this is only its backstop.

        The backstop counts from the cancellation, with the same budget plus a little slack for scheduling:
        cancel -> Result stays within the budget on every path (it used to add ``request_timeout`` here, so a
        supervisor that never ran kept a cancelled caller waiting budget + request timeout).
        """
        budget = self.session.options.interrupt_budget
        start = self.cancel_at if self.cancel_at is not None else self.session.now()
        with trio.CancelScope(shield=True):
            with trio.move_on_at(start + budget + BACKSTOP_SLACK):
                await self.finished.wait()
            if self.result is None:
                self.session._kill_for(self, "turn did not end after cancellation")

    # --- iteration --------------------------------------------------------------------------------

    def __aiter__(self) -> Turn:
        return self

    async def __anext__(self) -> TurnEvent:
        items = self.events._items
        if items and self.sent:
            # an event already queued: take it without a wait (a checkpoint-free step, like a channel's)
            return items.popleft()
        self._check_entered()
        event = await self.events.get()
        if event is None:
            raise StopAsyncIteration
        return event

    # --- actions ----------------------------------------------------------------------------------

    def cancel(self, reason: str = "execution cancelled") -> None:
        """Interrupt the turn (as cancelling the caller's scope does); the Result says ``aborted``."""
        self.request_cancel("aborted", reason)

    def request_cancel(self, status: str, error: str) -> None:
        if self.result is not None or self.cancel_request is not None:
            return
        self.cancel_request = (status, error)
        self.cancel_at = self.session.now()
        self.state.fix(status, error)
        self.session.note(f"cancel: {status}: {error}")
        self.wake.set()

    async def steer(self, input: str | UserInput) -> str:
        """``turn/steer`` with ``expectedTurnId``; returns the turn id the server answers. RpcError on rejection."""
        opts = self.session.options
        with trio.move_on_after(opts.request_timeout):
            await self.id_known.wait()
        if self.state.turn_id is None:
            raise ClientError("turn/steer: the turn has no id yet")
        parts = [{"type": "text", "text": input}] if isinstance(input, str) else list(input)
        result = await self.session.request(
            "turn/steer",
            {"threadId": self.session.thread_id, "input": parts, "expectedTurnId": self.state.turn_id},
        )
        turn_id = result.get("turnId") if isinstance(result, dict) else None
        self.emit(Steered(self.session.now(), turn_id or self.state.turn_id))
        return turn_id or self.state.turn_id

    async def wait(self) -> TurnResult:
        """Wait for the Result (bounded by the turn deadline, the inactivity watchdog and the budget)."""
        self._check_entered()
        await self.finished.wait()
        assert self.result is not None
        return self.result

    def _check_entered(self) -> None:
        # a turn never entered would never end: waiting on it must not hang
        if self.result is None and not self.sent:
            raise ClientError("the turn was not started: use `async with turn` first")

    # --- bookkeeping used by the session ----------------------------------------------------------

    def emit(self, event: TurnEvent, *, force: bool = False) -> None:
        self.events.put(event, force=force)

    def set_timing(self, **fields: float) -> None:
        for name, value in fields.items():
            setattr(self, name, value)
            if self.result is not None:
                setattr(self.result, name, value)

    @property
    def id(self) -> str | None:
        return self.state.turn_id

    @property
    def dropped_events(self) -> int:
        return self.events.dropped

    @property
    def partial_text(self) -> str:
        return self.state.partial_text
