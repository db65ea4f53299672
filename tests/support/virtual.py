"""Drive the engine on a virtual clock without trio: for tests, transcript replay and fidelity checks.

:class:`VirtualServer` feeds client frames (or raw bytes of a newline-framed wire, through its own
:class:`~contracts.wire.LineFraming`) to an :class:`~fake_server.engine.Engine`,
fires its wake-ups in time order on a clock it advances itself, and keeps everything the server
wrote. ``run_until`` advances time until a predicate holds over the frames sent so far (bounded
by a virtual deadline), so a test can say "wait for turn/completed" without any real waiting.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import orjson

from contracts.scenario import Scenario
from contracts.wire import LineFraming
from fake_server.effects import (
    CloseStdout,
    Effect,
    Exit,
    FaultStruck,
    PauseInput,
    Send,
    SendBytes,
    SpawnGrandchild,
    TraceEvent,
    Wake,
    WriteStderr,
)
from fake_server.engine import Engine
from fake_server.runtime import VIRTUAL_EPOCH_MS

Frame = dict[str, Any]


@dataclass(slots=True)
class Output:
    """One message the server wrote: a frame, or a raw payload (``frame`` None; ``torn``: cut off by a crash)."""

    t_ms: int
    frame: Frame | None = None
    raw: bytes = b""
    torn: bool = False


@dataclass(slots=True)
class VirtualServer:
    scenario: Scenario
    engine: Engine = field(init=False)
    now_ms: int = VIRTUAL_EPOCH_MS
    out: list[Output] = field(default_factory=list)
    stderr: list[str] = field(default_factory=list)
    traces: list[TraceEvent] = field(default_factory=list)
    faults_struck: list[FaultStruck] = field(default_factory=list)
    exit_code: int | None = None
    crashed: bool = False
    stdout_closed: bool = False
    grandchild_hold_ms: int | None = None
    _timers: dict[int, int] = field(default_factory=dict)
    _lines: LineFraming = field(default_factory=LineFraming)
    #: ``slow_reader``: what the client wrote before then waits, read when the pause ends (as the runtime does)
    _paused_until: int = 0
    _held: list[bytes] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.engine = Engine(self.scenario)
        self._apply(self.engine.start(self.now_ms))

    # --- input ------------------------------------------------------------------------------

    def send(self, frame: Frame) -> None:
        self.send_raw(orjson.dumps(frame) + b"\n")

    def send_raw(self, data: bytes) -> None:
        """Bytes of the client's newline-framed wire: the lines they complete reach the engine."""
        if self.now_ms < self._paused_until:
            self._held.append(data)
            return
        self._apply(self.engine.receive(self._lines.feed(data), self.now_ms))

    def _read_held(self) -> None:
        held, self._held = self._held, []
        for data in held:
            self.send_raw(data)

    def close_input(self) -> None:
        self._apply(self.engine.feed_eof(self.now_ms))

    def terminate(self) -> None:
        self._apply(self.engine.terminate(self.now_ms))

    # --- time -------------------------------------------------------------------------------

    def advance(self, ms: int) -> None:
        """Let ``ms`` of virtual time pass, firing wake-ups on the way."""
        self._run_timers(self.now_ms + ms, None)

    def run_until(
        self, predicate: Callable[[Frame], bool], *, within_ms: int = 600_000, start: int = 0
    ) -> Frame | None:
        """Advance until a frame sent at index >= ``start`` satisfies ``predicate``; None at the deadline."""
        found: list[Frame] = []

        def check() -> bool:
            hit = self._find(predicate, start)
            if hit is not None:
                found.append(hit)
            return hit is not None

        self.run_until_state(check, within_ms=within_ms)
        return found[0] if found else None

    def run_until_state(self, check: Callable[[], bool], *, within_ms: int = 600_000) -> bool:
        """Advance until ``check()`` holds (True) or ``within_ms`` of virtual time passed (False)."""
        if check():
            return True
        return self._run_timers(self.now_ms + within_ms, check)

    def settle(self, within_ms: int = 600_000) -> None:
        """Fire every wake-up due within ``within_ms``."""
        self._run_timers(self.now_ms + within_ms, None)

    # --- results ----------------------------------------------------------------------------

    @property
    def frames(self) -> list[Frame]:
        return [o.frame for o in self.out if o.frame is not None]

    def methods(self) -> list[str]:
        return [f.get("method", "<response>") for f in self.frames]

    # --- internals --------------------------------------------------------------------------

    def _find(self, predicate: Callable[[Frame], bool], start: int) -> Frame | None:
        frames = self.frames
        for frame in frames[start:]:
            if predicate(frame):
                return frame
        return None

    def _run_timers(self, deadline: int, check: Callable[[], bool] | None) -> bool:
        while (self._timers or self._held) and self.exit_code is None:
            if self._held and (not self._timers or self._paused_until <= min(self._timers.values())):
                if self._paused_until > deadline:
                    break
                self.now_ms = max(self.now_ms, self._paused_until)
                self._read_held()
                if check is not None and check():
                    return True
                continue
            token, due = min(self._timers.items(), key=lambda kv: (kv[1], kv[0]))
            if due > deadline:
                break
            del self._timers[token]
            self.now_ms = max(self.now_ms, due)
            self._apply(self.engine.timer(token, self.now_ms))
            if check is not None and check():
                return True
        self.now_ms = max(self.now_ms, deadline)
        return False

    def _apply(self, effects: list[Effect]) -> None:
        for effect in effects:
            if isinstance(effect, Send):
                if not self.stdout_closed and self.exit_code is None:
                    self.out.append(Output(self.now_ms, frame=effect.frame))
            elif isinstance(effect, SendBytes):
                if not self.stdout_closed and self.exit_code is None:
                    self.out.append(Output(self.now_ms, raw=effect.data, torn=effect.torn))
            elif isinstance(effect, Wake):
                self._timers[effect.token] = self.now_ms + effect.after_ms
            elif isinstance(effect, WriteStderr):
                self.stderr.append(effect.text)
            elif isinstance(effect, CloseStdout):
                self.stdout_closed = True
            elif isinstance(effect, PauseInput):
                self._paused_until = max(self._paused_until, self.now_ms + effect.ms)
            elif isinstance(effect, SpawnGrandchild):
                self.grandchild_hold_ms = effect.hold_ms
            elif isinstance(effect, TraceEvent):
                self.traces.append(effect)
            elif isinstance(effect, FaultStruck):
                self.faults_struck.append(effect)
            elif isinstance(effect, Exit):
                self.exit_code = effect.code
                self.crashed = effect.crash
