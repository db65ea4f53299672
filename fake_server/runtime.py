"""The trio loop around the sans-IO engine, shared by the in-process and the stdio deployments.

It moves messages in, carries out effects, and keeps the engine's wake-ups as deadlines on trio's
clock (so MockClock makes scripted delays free). Only the wait for input sits inside a cancel
scope; carrying out effects never is, so a wake-up cannot cut a frame in half. Messages are payloads;
the deployment's :class:`Io` frames them (newline-delimited on stdio, see :mod:`contracts.transport`).
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import orjson
import trio

from contracts.wire import Incoming
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
    TransportFault,
    Wake,
    WriteStderr,
)
from fake_server.engine import Engine

#: Unix ms that virtual time 0 maps to under MockClock (the date of the shared real transcripts).
VIRTUAL_EPOCH_MS = 1796022741000


def default_clock_ms() -> Callable[[], int]:
    """Wall-clock ms, or a fixed epoch plus trio time when the clock is a MockClock (deterministic)."""
    testing = sys.modules.get("trio.testing")  # imported only by tests; importing it costs ~0.3 s
    if testing is not None and isinstance(trio.lowlevel.current_clock(), testing.MockClock):
        return lambda: VIRTUAL_EPOCH_MS + int(trio.current_time() * 1000)
    offset = time.time() - trio.current_time()
    return lambda: int((offset + trio.current_time()) * 1000)


class Io(Protocol):
    """What a deployment provides to the loop: the client's connection as messages, and the process around it."""

    async def read(self) -> list[Incoming]:
        """The client's next messages (a framing's error in place of a bad one); ``[]`` at end of input."""

    async def write(self, messages: list[bytes], torn: bytes = b"") -> None:
        """Send ``messages`` in one go, then ``torn`` (the start of a message cut off by a crash)."""

    async def close_stdout(self) -> None: ...

    def write_stderr(self, text: str) -> None: ...

    async def spawn_grandchild(self, hold_ms: int) -> None: ...

    def trace(self, event: TraceEvent) -> None: ...

    def fault_struck(self, effect: FaultStruck) -> None:
        """A scripted fault struck (for the harness's ``fault_not_struck`` check)."""


@dataclass(slots=True)
class Outcome:
    code: int
    crash: bool


#: How long a connection's turns go on after the connection closed (``detach_on_eof``), at most.
DETACHED_MAX_S = 600.0


def _turns_running(engine: Engine) -> bool:
    return any(t.active is not None and not t.active.ended for t in engine.world.threads.values())


async def run_engine(
    engine: Engine,
    io: Io,
    clock_ms: Callable[[], int] | None = None,
    *,
    on_started: Callable[[], None] | None = None,
    detach_on_eof: bool = False,
) -> Outcome:
    """Serve until the engine exits; returns its exit code. Cancel the caller's scope to stop it.

    ``detach_on_eof``: the end of input is a connection closing, not the server's (a websocket): the server
    does not shut down; its turns go on without a reader (what they send is dropped) until they end, at most
    :data:`DETACHED_MAX_S`, and the outcome is then 0 (observed: ``tests/ws_lifetime_observe.py``)."""
    now = clock_ms or default_clock_ms()
    timers: dict[int, float] = {}
    eof = False
    paused_until = -math.inf  # a slow reader: nothing is read before then
    if on_started is not None:
        on_started()

    async def apply(effects: list[Effect]) -> Outcome | None:
        nonlocal paused_until
        # Frames are batched per call: one write per engine step keeps a pipe's syscalls few.
        batch: list[bytes] = []
        for effect in effects:
            if isinstance(effect, Send):
                batch.append(orjson.dumps(effect.frame))
                continue
            if isinstance(effect, SendBytes):
                if effect.torn:
                    await io.write(batch, effect.data)
                    batch = []
                else:
                    batch.append(effect.data)
                continue
            if batch:
                await io.write(batch)
                batch = []
            if isinstance(effect, Wake):
                timers[effect.token] = trio.current_time() + effect.after_ms / 1000
            elif isinstance(effect, WriteStderr):
                io.write_stderr(effect.text)
            elif isinstance(effect, CloseStdout):
                await io.close_stdout()
            elif isinstance(effect, SpawnGrandchild):
                await io.spawn_grandchild(effect.hold_ms)
            elif isinstance(effect, TraceEvent):
                io.trace(effect)
            elif isinstance(effect, FaultStruck):
                io.fault_struck(effect)
            elif isinstance(effect, PauseInput):
                paused_until = max(paused_until, trio.current_time() + effect.ms / 1000)
            elif isinstance(effect, TransportFault):
                carry_out = getattr(io, "transport_fault", None)
                if carry_out is None:  # refused before the run (contracts.faults.transport_problem); said if not
                    io.write_stderr(f"fake-codex: fault {effect.kind} acts on a websocket, not on this connection\n")
                else:
                    await carry_out(effect)
            elif isinstance(effect, Exit):
                return Outcome(effect.code, effect.crash)
        if batch:
            await io.write(batch)
        return None

    outcome = await apply(engine.start(now()))
    detached_until = math.inf
    while outcome is None:
        deadline = min(timers.values()) if timers else math.inf
        messages: list[Incoming] | None = None
        if detached_until != math.inf and (not _turns_running(engine) or trio.current_time() >= detached_until):
            return Outcome(0, False)
        if eof and detach_on_eof:
            await trio.sleep_until(min(deadline, detached_until))
        elif eof:
            await trio.sleep_until(deadline) if deadline != math.inf else await trio.sleep_forever()
        elif paused_until > trio.current_time():
            await trio.sleep_until(min(deadline, paused_until))
        else:
            with trio.move_on_at(deadline):
                messages = await io.read()
        if messages is not None:
            if messages:
                outcome = await apply(engine.receive(messages, now()))
            elif detach_on_eof:
                eof = True
                detached_until = trio.current_time() + DETACHED_MAX_S
            else:
                eof = True
                outcome = await apply(engine.feed_eof(now()))
            if outcome is not None:
                break
        current = trio.current_time()
        for token, when in sorted(timers.items(), key=lambda kv: (kv[1], kv[0])):
            if when > current:
                continue
            timers.pop(token, None)
            outcome = await apply(engine.timer(token, now()))
            if outcome is not None:
                break
    return outcome
