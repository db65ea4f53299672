"""When a client plan's actions are due: the one interpreter of ``[[client.actions]]`` triggers.

Sans-IO: whoever watches a turn (the fake's own plan player on raw frames, the runner on the client's
events) names each moment it sees (:data:`MOMENTS`) and gets back the actions that moment fires, each
at most once. ``delay`` actions are not tied to a moment: :meth:`ActionSchedule.timed` hands them out
once, for the caller to fire ``delay_ms`` after its turn/start. The fuzz oracle keeps an independent
copy of these rules on purpose (it is the truth the other two are checked against).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final, Literal

from contracts.scenario import ClientAction

Moment = Literal["started", "delta", "item_started", "approval_pending"]
#: The moments a turn's actions can wait for (``at``), counted per turn from 1.
MOMENTS: Final[tuple[Moment, ...]] = ("started", "delta", "item_started", "approval_pending")


class ActionSchedule:
    """One turn's planned actions, handed out as their moments come."""

    __slots__ = ("_counts", "_pending")

    def __init__(self, actions: Iterable[ClientAction]) -> None:
        self._pending = [a for a in actions if a.do != "resume"]
        self._counts: dict[str, int] = dict.fromkeys(MOMENTS, 0)

    def timed(self) -> list[ClientAction]:
        """The ``delay`` actions (due ``delay_ms`` after turn/start), handed out once."""
        due = [a for a in self._pending if a.at == "delay"]
        self._pending = [a for a in self._pending if a.at != "delay"]
        return due

    def waits_for(self, moment: Moment) -> bool:
        """Whether the next ``moment`` fires an action (without counting it)."""
        n = self._counts[moment] + 1
        return any(a.at == moment and a.n == n for a in self._pending)

    def observe(self, moment: Moment, n: int | None = None) -> list[ClientAction]:
        """Count one ``moment`` and return the actions it fires, in plan order; each fires once.

        ``n``: the moment's own count when the watcher keeps one (the client numbers its events), so a
        watcher that coalesces moments still fires on the right one.
        """
        n = self._counts[moment] = self._counts[moment] + 1 if n is None else n
        due = [a for a in self._pending if a.at == moment and a.n == n]
        if due:
            self._pending = [a for a in self._pending if a not in due]
        return due

    @property
    def pending(self) -> tuple[ClientAction, ...]:
        return tuple(self._pending)
