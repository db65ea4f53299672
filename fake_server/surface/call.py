"""One client request to a surface method: its params, the engine, and the notifications around the answer.

The real server writes some notifications before the answer (``thread/status/changed`` when archiving unloads
a thread) and some after it (``thread/archived``); a handler says which with :meth:`Call.before` and
:meth:`Call.after` and returns the result (or raises :class:`~fake_server.surface.errors.SurfaceError`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from fake_server.surface.state import SurfaceState

if TYPE_CHECKING:
    from fake_server.engine import Engine


@dataclass(slots=True)
class Call:
    engine: Engine
    method: str
    params: dict[str, Any]
    notes_before: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    notes_after: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    notes_later: list[tuple[int, str, dict[str, Any]]] = field(default_factory=list)
    result: Any = None
    error: Any = None  # the SurfaceError it was refused with

    @property
    def state(self) -> SurfaceState:
        return self.engine.surface

    @property
    def cwd(self) -> str:
        return self.engine.cwd

    @property
    def codex_home(self) -> str:
        return self.engine.codex_home

    def before(self, method: str, params: dict[str, Any]) -> None:
        self.notes_before.append((method, params))

    def after(self, method: str, params: dict[str, Any]) -> None:
        self.notes_after.append((method, params))

    def later(self, delay_ms: int, method: str, params: dict[str, Any]) -> None:
        """A notification some time after the answer (work the real binary finishes in the background)."""
        self.notes_later.append((delay_ms, method, params))

    def now_s(self) -> int:
        return self.engine.now_ms // 1000
