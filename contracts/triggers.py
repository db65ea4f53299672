"""The one interpreter of a scenario's client plan (``[client]``): what happened in, what to do out.

Every player of a plan uses it: the runner (our client's events), the fake's self-check player (raw frames,
tests/support/plan.py) and the careful reference outside client (``conformance/clients/careful.py``, from the
plan file). Each tells a turn's :class:`ActionSchedule` what it saw (the turn began, the n-th moment of
:data:`MOMENTS`, the time) and gets back the actions to do now; actions with a ``delay_ms`` wait in the
schedule, which says when it next needs the time (:meth:`ActionSchedule.next_wake`) and hands them out then
(:meth:`ActionSchedule.wake`). The approval rules are here too: which decision the session's i-th request
gets (:func:`decision`), which request a cancel holds unanswered (:meth:`ActionSchedule.holds_approval`),
and which frame is which moment on the wire (:func:`frame_moment`).

Sans-IO and without a clock: times are the caller's numbers (seconds, or ``per_second`` ticks of its own
clock). Standard library only, and nothing else of this project, so an outside client written in Python can
import it from a clone or an installed package alike.

The fuzz oracle keeps an independent copy of the trigger rules on purpose (``harness.fuzz.walk.trigger_index``:
the truth the runner is checked against; the reason is written there). The ``client / plan followed`` check
reads the recorded wire after the fact (``contracts.checks.client_plan``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Generic, Literal, Protocol, TypeVar

Moment = Literal["started", "delta", "item_started", "approval_pending"]
#: The moments a turn's actions can wait for (``at``), counted per turn from 1.
MOMENTS: Final[tuple[Moment, ...]] = ("started", "delta", "item_started", "approval_pending")
#: The server requests that ask the user for an approval (``approval_pending``).
APPROVAL_METHODS: Final = ("item/commandExecution/requestApproval", "item/fileChange/requestApproval")


class PlannedAction(Protocol):
    """What the interpreter reads of an action (``contracts.scenario.ClientAction``, or :class:`Action`)."""

    @property
    def do(self) -> str: ...
    @property
    def at(self) -> str: ...
    @property
    def n(self) -> int: ...
    @property
    def delay_ms(self) -> int: ...


A = TypeVar("A", bound=PlannedAction)


@dataclass(frozen=True, slots=True)
class Action:
    """An action as the plan file writes it (``turns[].actions[]``, ``harness.outside.plan``)."""

    do: str
    at: str = "started"
    n: int = 1
    delay_ms: int = 0
    text: str = ""

    @classmethod
    def from_json(cls, spec: Mapping[str, Any]) -> Action:
        return cls(
            do=str(spec["do"]),
            at=str(spec.get("at", "started")),
            n=int(spec.get("n", 1)),
            delay_ms=int(spec.get("delay_ms", 0)),
            text=str(spec.get("text", "")),
        )


def resumes(actions: Iterable[PlannedAction]) -> bool:
    """Whether the turn's actions resume the thread before the turn starts."""
    return any(a.do == "resume" for a in actions)


def decision(index: int, in_order: Sequence[str], default: str) -> str:
    """The decision for the session's ``index``-th (0-based) approval request: ``in_order`` first, then ``default``."""
    return in_order[index] if 0 <= index < len(in_order) else default


def held_approvals(actions: Iterable[PlannedAction]) -> frozenset[int]:
    """The turn's approval requests (1-based, counted in the turn) that a ``cancel`` waits for: the user cancels
    while they are pending, so they stay unanswered (an answer first would test nothing)."""
    return frozenset(a.n for a in actions if a.do == "cancel" and a.at == "approval_pending")


def frame_moment(frame: Mapping[str, Any], turn_id: str | None) -> Moment | None:
    """The moment a server frame is for turn ``turn_id`` (None: not a moment, or another turn's)."""
    method = frame.get("method")
    params = frame.get("params")
    if not isinstance(method, str) or not isinstance(params, Mapping):
        return None
    if method == "turn/started":
        turn = params.get("turn")
        return "started" if isinstance(turn, Mapping) and turn.get("id") == turn_id else None
    if params.get("turnId") != turn_id:
        return None
    if method == "item/agentMessage/delta":
        return "delta"
    if method == "item/started":
        return "item_started"
    if method in APPROVAL_METHODS and "id" in frame:
        return "approval_pending"
    return None


class ActionSchedule(Generic[A]):
    """One turn's planned actions, handed out as their moments and times come; each fires at most once.

    ``per_second``: ticks of the caller's clock in a second (1: seconds, 1000: milliseconds), so a
    ``delay_ms`` lands on the caller's clock exactly.
    """

    __slots__ = ("_counts", "_held", "_pending", "_per_second", "_queued", "_timers")

    def __init__(self, actions: Iterable[A], *, per_second: int = 1) -> None:
        self._pending = [a for a in actions if a.do != "resume"]
        self._held = held_approvals(self._pending)
        self._counts: dict[str, int] = dict.fromkeys(MOMENTS, 0)
        self._per_second = per_second
        self._timers: list[tuple[float, int, A]] = []  # (due, order queued, action)
        self._queued = 0

    def _wait(self, action: A, now: float) -> None:
        """``action`` comes due ``delay_ms`` after ``now``."""
        self._timers.append((now + action.delay_ms * self._per_second / 1000, self._queued, action))
        self._queued += 1

    def start(self, now: float) -> list[A]:
        """The turn began at ``now`` (turn/start answered): ``delay`` actions are due ``delay_ms`` later.
        Returns what is due at once (a ``delay`` of 0)."""
        timed = [a for a in self._pending if a.at == "delay"]
        self._pending = [a for a in self._pending if a.at != "delay"]
        for action in timed:
            self._wait(action, now)
        return self.wake(now)

    def observe(self, moment: Moment, *, now: float, n: int | None = None) -> list[A]:
        """Count one ``moment`` at ``now``; returns the actions to do now, in plan order (those with a
        ``delay_ms`` wait for :meth:`wake`).

        ``n``: the moment's own count when the watcher keeps one (our client numbers its events), so a
        watcher that coalesces moments still fires on the right one; a count that skips past an action's
        ``n`` never fires it.
        """
        n = self._counts[moment] = self._counts[moment] + 1 if n is None else n
        due = [a for a in self._pending if a.at == moment and a.n == n]
        if due:
            self._pending = [a for a in self._pending if a not in due]
        for action in due:
            if action.delay_ms:
                self._wait(action, now)
        return [a for a in due if not a.delay_ms]

    @property
    def waits(self) -> bool:
        """Whether any action of the turn waits for a time (``delay``, or a ``delay_ms`` after its moment)."""
        return bool(self._timers) or any(a.at == "delay" or a.delay_ms for a in self._pending)

    def holds_approval(self, n: int) -> bool:
        """Whether the turn's ``n``-th approval request (1-based) stays unanswered: a cancel waits for it."""
        return n in self._held

    def count(self, moment: Moment) -> int:
        """How many ``moment``s were observed in the turn so far."""
        return self._counts[moment]

    def next_wake(self) -> float | None:
        """When a waiting action comes due (the earliest), None when none waits."""
        return min((t for t, _, _ in self._timers), default=None)

    def wake(self, now: float) -> list[A]:
        """The waiting actions due by ``now``, in the order of their times (then of their triggers)."""
        due = sorted(timer for timer in self._timers if timer[0] <= now)
        self._timers = [timer for timer in self._timers if timer[0] > now]
        return [action for _, _, action in due]

    def end(self) -> None:
        """The turn ended: what still waits (for a moment or a time) is moot."""
        self._pending, self._timers = [], []

    @property
    def pending(self) -> tuple[A, ...]:
        """The actions still waiting for their moment or their time."""
        return tuple(self._pending) + tuple(a for _, _, a in sorted(self._timers))
