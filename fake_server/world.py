"""What one connection of the fake knows, shared by the engine and every request handler.

The engine (:mod:`fake_server.engine`) owns the connection's inputs and the dispatch; the handlers
(:mod:`fake_server.surface`) answer one request each. Both work on a :class:`World` and neither calls the
other back: the world sits below both. It holds the scenario and the release played, where the session
runs (:class:`Host`), what the handshake told (:class:`Client`), the threads and what the surface methods
remember of them, and the :class:`~fake_server.outbox.Outbox` (ids, the clock value of the current input,
everything that goes out). Threads live here and nowhere else, so a store that keeps them between
sessions replaces how a world is filled, not the code that reads it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from contracts.scenario import Scenario
from fake_server.ids import IdMaker
from fake_server.outbox import Outbox
from fake_server.profiles import Profile
from fake_server.state import SurfaceState, ThreadState


@dataclass(frozen=True, slots=True)
class Host:
    """Where the session runs, as the client sees it: its paths and the machine it names."""

    cwd: str = "/RUN/workdir"
    codex_home: str = "/RUN/codex_home"
    hostname: str = "fake-host"
    installation_id: str = "00000000-0000-4000-8000-000000000000"


@dataclass(slots=True)
class Client:
    """What the client said in ``initialize`` (``initialized`` once it was answered)."""

    initialized: bool = False
    name: str = "unknown"
    experimental: bool = False  # it asked for the experimental API


@dataclass(slots=True)
class World:
    scenario: Scenario
    profile: Profile  # the release played (fake_server.profiles)
    host: Host
    box: Outbox
    client: Client = field(default_factory=Client)
    threads: dict[str, ThreadState] = field(default_factory=dict)
    surface: SurfaceState = field(default_factory=SurfaceState)  # what the methods beyond the turn core remember
    turns_started: int = 0  # how many scenario turns have begun in this process
    #: what keeps threads and the run's turn count in CODEX_HOME across processes (fake_server.home_store), or None
    store: Any = None
    #: the home's config.toml and -c overrides (fake_server.home_config.Setup); None: the recorded answers (in process)
    setup: Any = None

    def next_turn_index(self) -> int:
        """The scenario turn the next turn/start plays: the run's count when the home keeps one, else this process's."""
        self.turns_started += 1
        if self.store is not None:
            try:
                return int(self.store.next_turn())
            except OSError as exc:
                self.box.stderr(f"WARN fake-codex: the run's turn count is unreadable ({exc}); counting this process's")
                self.store = None
        return self.turns_started - 1

    @property
    def ids(self) -> IdMaker:
        return self.box.ids

    @property
    def now_ms(self) -> int:
        """The time the current input came with (Unix ms): the engine sets it on the outbox for every input."""
        return self.box.now_ms

    @property
    def shapes(self) -> Any:
        """The field sets of the frames the release played writes (:class:`fake_server.shapes.Shapes`)."""
        return self.profile.shapes
