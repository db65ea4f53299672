"""The lifecycle of one turn, as one transition table (as h11's ``_state.py`` does for a connection).

A turn is made (``NEW``), started by its ``turn/start`` (``RUNNING``), maybe cancelled (``CANCELLING``: a
cancellation, a deadline or the inactivity watchdog fixed its status; its supervisor is to interrupt it), then
interrupted (``INTERRUPTING``: ``turn/interrupt`` sent, ``turn/completed`` awaited within ONE budget), and ends
with its one Result (``ENDED``), from any phase: ``turn/completed``, a kill, a lost connection, a session gone
before the turn could start. Everything else is an :class:`IllegalTurnTransition`, a bug of ours, never a
silent flag mix.

What is not the lifecycle stays data on the turn: its id (learnt whenever it comes), whether ``turn/completed``
was consumed (the gate's, :class:`~codex_client.turnstate.TurnState`), how it ended (the Result), and the
interrupt answer, which may come after the Result or never (:meth:`ClientConnection.interrupt_answered`).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import Final

from codex_client.errors import ClientError


class Phase(enum.Enum):
    NEW = "new"  # made; turn/start not sent
    RUNNING = "running"  # turn/start sent
    CANCELLING = "cancelling"  # the Result's status fixed (aborted, timeout); the supervisor is to interrupt
    INTERRUPTING = "interrupting"  # turn/interrupt sent; turn/completed awaited within the budget
    ENDED = "ended"  # the Result delivered (terminal)


class Step(enum.Enum):
    START = "start"  # turn/start is being sent
    CANCEL = "cancel"  # a cancellation, the deadline or the inactivity watchdog
    INTERRUPT = "interrupt"  # turn/interrupt is being sent
    END = "end"  # the Result is delivered


TRANSITIONS: Final[Mapping[Phase, Mapping[Step, Phase]]] = {
    Phase.NEW: {Step.START: Phase.RUNNING, Step.END: Phase.ENDED},
    Phase.RUNNING: {Step.CANCEL: Phase.CANCELLING, Step.END: Phase.ENDED},
    Phase.CANCELLING: {Step.INTERRUPT: Phase.INTERRUPTING, Step.END: Phase.ENDED},
    Phase.INTERRUPTING: {Step.END: Phase.ENDED},
    Phase.ENDED: {},
}

#: phases in which a cancellation is moot: one already fixed the status (the first wins), or the turn ended
CANCELLED_OR_ENDED: Final = frozenset({Phase.CANCELLING, Phase.INTERRUPTING, Phase.ENDED})


class IllegalTurnTransition(ClientError):
    """A step the turn's phase does not allow (cancelling a turn never started, interrupting one not cancelled,
    ending one twice): raised before anything changes."""

    def __init__(self, phase: Phase, step: Step) -> None:
        allowed = ", ".join(s.value for s in TRANSITIONS[phase]) or "nothing (it ended)"
        super().__init__(f"a turn {phase.value} cannot {step.value}: it allows {allowed}")
        self.phase = phase
        self.step = step


def advance(phase: Phase, step: Step) -> Phase:
    """The phase after ``step``; :class:`IllegalTurnTransition` when the table has no such transition."""
    try:
        return TRANSITIONS[phase][step]
    except KeyError:
        raise IllegalTurnTransition(phase, step) from None
