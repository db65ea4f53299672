"""One client request to a handler: the request, its params, the connection's world, the notifications around it.

A handler of the turn core (:mod:`.core`) answers through the world's outbox itself, at the moment the real
server does. A handler beyond it returns the result (or raises :class:`~fake_server.surface.errors.RequestError`)
and says which notifications the real server writes before the answer (``thread/status/changed`` when archiving
unloads a thread: :meth:`Call.before`), after it (``thread/archived``: :meth:`Call.after`) or some time later
(:meth:`Call.later`); :mod:`.router` writes them in that order.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from contracts.messages import Request
from fake_server.state import SurfaceState
from fake_server.world import World


@dataclass(slots=True)
class Call:
    world: World
    request: Request
    params: dict[str, Any]
    notes_before: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    notes_after: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    notes_later: list[tuple[int, str, dict[str, Any]]] = field(default_factory=list)
    result: Any = None
    error: Any = None  # the RequestError it was refused with

    @property
    def method(self) -> str:
        return self.request.method

    @property
    def state(self) -> SurfaceState:
        return self.world.surface

    @property
    def cwd(self) -> str:
        return self.world.host.cwd

    @property
    def codex_home(self) -> str:
        return self.world.host.codex_home

    def before(self, method: str, params: dict[str, Any]) -> None:
        self.notes_before.append((method, params))

    def after(self, method: str, params: dict[str, Any]) -> None:
        self.notes_after.append((method, params))

    def later(self, delay_ms: int, method: str, params: dict[str, Any]) -> None:
        """A notification some time after the answer (work the real binary finishes in the background)."""
        self.notes_later.append((delay_ms, method, params))

    def now_s(self) -> int:
        return self.world.now_ms // 1000
