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

This is the trio side of a turn: the waiting. What the turn is (state, timings, events, Result) is the
core's :class:`~codex_client.turncore.TurnCore`, reached as :attr:`Turn.core`.
"""

from __future__ import annotations

import weakref
from collections.abc import AsyncIterator
from types import TracebackType
from typing import Any, Final

import trio

from codex_client.driver import Driver
from codex_client.errors import ClientError, SessionClosed, is_interrupt
from codex_client.events import Steered, TurnEvent
from codex_client.turncore import Queued, TurnCore, UserInput
from codex_client.turnstate import TurnState
from contracts.record import TurnResult

__all__ = ["BACKSTOP_SLACK", "Turn", "UserInput"]

#: how long after the interrupt budget a cancelled caller's backstop waits before killing (scheduling only)
BACKSTOP_SLACK: Final = 0.25


class Turn:
    """One turn of a session. Create it with :meth:`Session.turn`."""

    def __init__(self, session: Driver, core: TurnCore) -> None:
        # Weak: the session keeps its turns (``Session.turns``), and a turn that kept its session too made the
        # pair a reference cycle, so a closed session and its whole wire record outlived the last reference
        # until CPython's next full collection (rare once the record keeps no tracked object per frame).
        self._session = weakref.ref(session)
        self.core = core
        self.id_known = trio.Event()
        self.finished = trio.Event()
        self.wake = trio.Event()  # the supervisor looks again
        self.lot = trio.lowlevel.ParkingLot()  # the consumer parks here while no event is queued
        self._interrupt_scope: trio.CancelScope | None = None

    @property
    def session(self) -> Driver:
        """The session of the turn; SessionClosed once nothing else holds it (it was closed before that)."""
        session = self._session()
        if session is None:
            raise SessionClosed("the session of this turn is closed")
        return session

    # --- context manager --------------------------------------------------------------------------

    async def __aenter__(self) -> Turn:
        await self.session.start_turn(self.core)
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self.result is not None:
            return
        if is_interrupt(exc):  # the run is being ended: nobody waits for an interrupt's answer any more
            self.session.kill_turn(self.core, "the run was interrupted (SIGINT / SIGTERM)")
            return
        if exc_type is None:
            try:
                await self.wait()
                return
            except trio.Cancelled:
                self.request_cancel("aborted", "execution cancelled")
                await self.wait_after_cancel()
                raise
        self.request_cancel("aborted", "execution cancelled")
        await self.wait_after_cancel()

    async def wait_after_cancel(self) -> None:
        """Shielded: the supervisor ends the turn within the interrupt budget; this is only its backstop.

        The backstop counts from the cancellation, with the same budget plus a little slack for scheduling:
        cancel -> Result stays within the budget on every path.
        """
        budget = self.session.options.interrupt_budget
        start = self.core.cancel_at if self.core.cancel_at is not None else self.session.now()
        with trio.CancelScope(shield=True):
            with trio.move_on_at(start + budget + BACKSTOP_SLACK):
                await self.finished.wait()
            if self.result is None:
                self.session.kill_turn(self.core, "turn did not end after cancellation")

    # --- iteration --------------------------------------------------------------------------------

    def __aiter__(self) -> Turn:
        return self

    async def __anext__(self) -> TurnEvent:
        events = self.core.events
        if events and self.core.sent:
            # an event already queued: take it without a wait (a checkpoint-free step, like a channel's)
            return events.take()
        self._check_entered()
        while not events:
            if events.closed:
                raise StopAsyncIteration
            await self.lot.park()
        return events.take()

    async def batches(self) -> AsyncIterator[list[Queued]]:
        """The turn's events a read at a time: each list holds what is queued, the running turn's agent message
        deltas of one read as one :class:`~codex_client.events.MessageDeltas`; ends after ``TurnEnded``.

        For consumers that keep up with a flood: no Python call per delta.
        """
        self._check_entered()
        events = self.core.events
        while True:
            while not events:
                if events.closed:
                    return
                await self.lot.park()
            yield events.take_all()

    # --- actions ----------------------------------------------------------------------------------

    def cancel(self, reason: str = "execution cancelled") -> None:
        """Interrupt the turn (as cancelling the caller's scope does); the Result says ``aborted``.

        A turn not entered yet has nothing to interrupt: :class:`~codex_client.turnphase.IllegalTurnTransition`
        (a :class:`ClientError`), as :meth:`wait` raises for it."""
        self.request_cancel("aborted", reason)

    def request_cancel(self, status: str, error: str) -> None:
        """Fix the Result's status (``aborted``, ``timeout``) and hand the turn to its supervisor."""
        if self.result is not None and self._session() is None:
            return  # an ended turn of a session gone: nothing to cancel, as its connection would say
        if self.session.connection.request_cancel(self.core, status, error, self.session.now()):
            self.wake.set()

    async def steer(self, input: str | UserInput) -> str:
        """``turn/steer`` with ``expectedTurnId``; returns the turn id the server answers. RpcError on rejection."""
        opts = self.session.options
        with trio.move_on_after(opts.request_timeout):
            await self.id_known.wait()
        if self.id is None:
            raise ClientError("turn/steer: the turn has no id yet")
        parts = [{"type": "text", "text": input}] if isinstance(input, str) else list(input)
        result = await self.session.request(
            "turn/steer",
            {"threadId": self.session.connection.thread_id, "input": parts, "expectedTurnId": self.id},
        )
        turn_id = result.get("turnId") if isinstance(result, dict) else None
        self.emit(Steered(self.session.now(), turn_id or self.id))
        return turn_id or self.id

    async def wait(self) -> TurnResult:
        """Wait for the Result (bounded by the turn deadline, the inactivity watchdog and the budget)."""
        self._check_entered()
        await self.finished.wait()
        assert self.result is not None
        return self.result

    def _check_entered(self) -> None:
        # a turn never entered would never end: waiting on it must not hang
        if self.result is None and not self.core.sent:
            raise ClientError("the turn was not started: use `async with turn` first")

    def interrupt_shield(self) -> trio.CancelScope:
        """The scope the interrupt runs in: shielded while the turn is open (a cancelled caller must still get its
        Result), lifted when the turn ends (so the teardown can stop a wait for an answer that no longer matters).
        """
        self._interrupt_scope = trio.CancelScope(shield=self.result is None)
        return self._interrupt_scope

    def ended(self) -> None:
        """The core delivered the Result: wake whoever waits (caller, supervisor, consumer), lift the shield."""
        self.finished.set()
        self.wake.set()
        self.wake_consumer()
        if self._interrupt_scope is not None:
            self._interrupt_scope.shield = False

    def emit(self, event: TurnEvent) -> None:
        """Queue an event the driver made (steered, interrupt sent) and wake the consumer."""
        self.core.emit(event)
        self.wake_consumer()

    def wake_consumer(self) -> None:
        if self.lot and (self.core.events or self.core.events.closed):
            self.lot.unpark_all()

    # --- what the turn is (the core's) -----------------------------------------------------------

    @property
    def index(self) -> int:
        return self.core.index

    @property
    def result(self) -> TurnResult | None:
        return self.core.result

    @property
    def state(self) -> TurnState:
        return self.core.state

    @property
    def id(self) -> str | None:
        return self.core.turn_id

    @property
    def dropped_events(self) -> int:
        return self.core.events.dropped

    @property
    def partial_text(self) -> str:
        return self.core.state.partial_text

    @property
    def model(self) -> str | None:
        return self.core.model

    def __getattr__(self, name: str) -> Any:
        # timings and flags (started_at, cancel_at, killed, ...) read through to the core
        if name in _CORE_FIELDS:
            return getattr(self.core, name)
        raise AttributeError(name)


_CORE_FIELDS: Final = frozenset(
    {
        "input",
        "params",
        "timeout",
        "usage",
        "sent",
        "phase",
        "started_at",
        "last_activity",
        "cancel_request",
        "cancel_at",
        "interrupt_sent_at",
        "interrupt_answered_at",
        "completed_at",
        "completed_by_server",
        "killed",
        "kill_reason",
    }
)
