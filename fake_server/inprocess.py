"""The fake app-server in process: the engine on a trio task, talking over memory channels.

:class:`InProcessServer` is a :class:`contracts.transport.Transport`: its ``stream`` is the client's end of
the connection, its ``process`` the simulated process (itself), so the client code is the same as against a
child process. The connection is a pair of bounded memory channels, newline-framed like stdio
(:class:`LinePipe`: byte chunks both ways). Process faults map onto it:

- a crash closes the server's stdout after what the fault flushes (half a frame for mid-line) and
  reports the fault's exit code; ``kill()`` does the same with -9;
- stderr goes to a bounded captured tail (``stderr_tail()``);
- ``stdout_closed`` closes only the server's send side: the server still reads, and exits 0 on EOF;
- ``grandchild_holds_stdout`` is simulated: after the server exits, its stdout stays open for
  ``hold_ms`` (as if a grandchild inherited it) unless ``kill()`` ends the whole "process group".

Deterministic under ``trio.testing.MockClock(autojump_threshold=0)``: every wait is on trio's clock.
"""

from __future__ import annotations

import os
from collections import deque
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Protocol

import trio

from contracts.scenario import Scenario
from contracts.transport import LineStream, MessageStream, NoProcess, TransportClosed
from contracts.wire import Incoming
from fake_server import profiles
from fake_server.effects import FaultStruck, TraceEvent, TransportFault
from fake_server.engine import Engine
from fake_server.runtime import default_clock_ms, run_engine
from fake_server.server_trace import ServerTrace

STDERR_TAIL_BYTES = 64 * 1024
CHANNEL_CHUNKS = 256  # bounded like a pipe: a client that never reads stalls the server


class Pipe(Protocol):
    """An in-memory connection: the client's end, the server's end, and what the process does to it."""

    output_closed: bool

    # Read-only: an implementation keeps its own kind of stream there (a LineStream, a MessageEnd...).
    @property
    def client(self) -> MessageStream: ...

    @property
    def server(self) -> MessageStream:
        """The engine's end: sending after its output closed drops the messages."""
        ...

    def close_server_input(self) -> None:
        """The process is gone: what the client sends from now on fails (TransportClosed)."""

    def close_server_output(self) -> None:
        """The server's output closes (stdout closed, the process group dead): the client reads its end."""


class LinePipe:
    """stdin and stdout as bounded memory channels of byte chunks, newline-framed at both ends (as stdio).

    ``send`` / ``receive`` / ``close_input`` are the client's byte pipe under ``client``."""

    def __init__(self, chunks: int = CHANNEL_CHUNKS) -> None:
        self._in_send, self._in_recv = trio.open_memory_channel[bytes](chunks)
        self._out_send, self._out_recv = trio.open_memory_channel[bytes](chunks)
        # The chunk being handed out and how far: a view, so a 40 MiB line read in 64 KiB pieces is
        # copied once per piece, not re-sliced whole on every call (quadratic).
        self._chunk = b""
        self._view = memoryview(b"")
        self._pos = 0
        self._input_closed = False
        self.output_closed = False
        self.client = LineStream(self.send, self.receive, self.close_input, abort=self._drop, report_overflow=True)
        self.server = LineStream(self._write, self._read, self._close_output)

    # --- the client's bytes -------------------------------------------------------------------

    async def send(self, data: bytes) -> None:
        if self._input_closed:
            raise TransportClosed("the fake app-server's stdin is closed")
        try:
            await self._in_send.send(bytes(data))
        except (trio.ClosedResourceError, trio.BrokenResourceError):
            raise TransportClosed("the fake app-server's stdin is closed") from None

    async def receive(self, max_bytes: int = 65536) -> bytes:
        """At most ``max_bytes`` (at least one) of what the server wrote; ``b""`` once its stdout is closed."""
        if self._pos >= len(self._chunk):
            try:
                chunk = await self._out_recv.receive()
            except (trio.EndOfChannel, trio.ClosedResourceError):
                return b""
            self._chunk, self._view, self._pos = chunk, memoryview(chunk), 0
        size = max(1, max_bytes)
        if self._pos == 0 and len(self._chunk) <= size:
            self._pos = len(self._chunk)
            return self._chunk  # the whole chunk: no copy
        piece = bytes(self._view[self._pos : self._pos + size])
        self._pos += len(piece)
        return piece

    async def close_input(self) -> None:
        if not self._input_closed:
            self._input_closed = True
            await self._in_send.aclose()

    def _drop(self) -> None:
        self._input_closed = True
        self._in_send.close()
        self._out_recv.close()

    # --- the server's bytes -------------------------------------------------------------------

    async def _read(self, max_bytes: int) -> bytes:
        try:
            return await self._in_recv.receive()
        except (trio.EndOfChannel, trio.ClosedResourceError):
            return b""

    async def _write(self, data: bytes) -> None:
        if self.output_closed:
            return
        try:
            await self._out_send.send(data)
        except (trio.ClosedResourceError, trio.BrokenResourceError):
            self.output_closed = True

    async def _close_output(self) -> None:
        self.close_server_output()

    # --- the process --------------------------------------------------------------------------

    def close_server_input(self) -> None:
        self._input_closed = True
        self._in_recv.close()

    def close_server_output(self) -> None:
        if not self.output_closed:
            self.output_closed = True
            self._out_send.close()


class InProcessServer(NoProcess):
    """One in-process fake app-server session (a :class:`~contracts.transport.Transport`)."""

    def __init__(
        self,
        scenario: Scenario,
        *,
        trace_root: Path | None = None,
        cwd: str = "/RUN/workdir",
        release: str | profiles.Profile | None = None,
        pipe: Pipe | None = None,
    ) -> None:
        """``release``: the profile to play, as ``fake-codex --release`` (then ``$FAKE_CODEX_RELEASE``, then the
        scenario's ``release``); an unknown one raises :class:`fake_server.profiles.UnknownRelease`.
        ``pipe``: the connection (default: a :class:`LinePipe`, newline-framed like stdio)."""
        self.scenario = scenario
        if isinstance(release, profiles.Profile):  # a profile not (yet) in a store: `release learn` trying one
            self.profile = release
        else:
            self.profile = profiles.select(release, os.environ.get(profiles.RELEASE_ENV), scenario.release)
        self.engine = Engine(scenario, cwd=cwd, profile=self.profile)
        self.pipe: Pipe = pipe if pipe is not None else LinePipe()
        self._stderr: deque[str] = deque()
        self._stderr_size = 0
        self._exit_code: int | None = None
        self._exited = trio.Event()
        self._grandchild_hold_ms: int | None = None
        self._cancel: trio.CancelScope | None = None
        self._trace = ServerTrace.for_profile(trace_root, self.profile) if trace_root is not None else None
        self.crashed = False
        self.grandchild_released = trio.Event()
        self.faults_struck: list[FaultStruck] = []

    # --- Transport ----------------------------------------------------------------------------

    @property
    def stream(self) -> MessageStream:
        return self.pipe.client

    @property
    def process(self) -> InProcessServer:
        return self

    # The client's byte pipe of a newline-framed connection (tests drive the wire as bytes).

    async def send(self, data: bytes) -> None:
        if self._exit_code is not None:
            raise TransportClosed("the fake app-server's stdin is closed")
        await self._line_pipe().send(data)

    async def receive(self, max_bytes: int = 65536) -> bytes:
        return await self._line_pipe().receive(max_bytes)

    async def close_input(self) -> None:
        await self._line_pipe().close_input()

    def _line_pipe(self) -> LinePipe:
        if not isinstance(self.pipe, LinePipe):
            raise TypeError("this in-process fake is not newline-framed: use its stream")
        return self.pipe

    # --- the process handle -------------------------------------------------------------------

    async def wait_exit(self) -> int:
        await self._exited.wait()
        assert self._exit_code is not None
        return self._exit_code

    def kill(self) -> None:
        if self._exit_code is None:
            self._finish(-9, crash=True)
        # SIGKILL to the process group takes a grandchild holding stdout down too.
        self.pipe.close_server_output()
        if self._cancel is not None:
            self._cancel.cancel()

    @property
    def exit_code(self) -> int | None:
        return self._exit_code

    def stderr_tail(self) -> str:
        return "".join(self._stderr)


    # --- the engine's side ------------------------------------------------------------------------

    async def read(self) -> list[Incoming]:
        return await self.pipe.server.receive()

    async def write(self, messages: list[bytes], torn: bytes = b"") -> None:
        await self.pipe.server.send(messages, torn)

    async def close_stdout(self) -> None:
        self.pipe.close_server_output()

    async def transport_fault(self, effect: TransportFault) -> None:
        carry_out = getattr(self.pipe, "transport_fault", None)
        if carry_out is None:
            self.write_stderr(f"fake-codex: fault {effect.kind} acts on a websocket, not on this connection\n")
        else:
            await carry_out(effect)

    def write_stderr(self, text: str) -> None:
        self._stderr.append(text)
        self._stderr_size += len(text)
        while self._stderr_size > STDERR_TAIL_BYTES and len(self._stderr) > 1:
            self._stderr_size -= len(self._stderr.popleft())
        if self._stderr_size > STDERR_TAIL_BYTES:
            only = self._stderr.pop()[-STDERR_TAIL_BYTES:]
            self._stderr.append(only)
            self._stderr_size = len(only)

    async def spawn_grandchild(self, hold_ms: int) -> None:
        self._grandchild_hold_ms = hold_ms

    def trace(self, event: TraceEvent) -> None:
        if self._trace is not None:
            self._trace.on_event(event)

    def fault_struck(self, effect: FaultStruck) -> None:
        self.faults_struck.append(effect)

    def _finish(self, code: int, *, crash: bool) -> None:
        if self._exit_code is not None:
            return
        self._exit_code = code
        self.crashed = crash
        if self._trace is not None:
            self._trace.finish(graceful=not crash)
        self.pipe.close_server_input()
        self._exited.set()

    async def _serve(self, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        with trio.CancelScope() as scope:
            self._cancel = scope
            task_status.started()
            outcome = await run_engine(self.engine, self, default_clock_ms())
            self._finish(outcome.code, crash=outcome.crash)
            if self._grandchild_hold_ms is not None and not self.pipe.output_closed:
                with trio.move_on_after(self._grandchild_hold_ms / 1000):
                    await trio.sleep_forever()
            self.pipe.close_server_output()
            self.grandchild_released.set()
        if self._exit_code is None:
            self._finish(-9, crash=True)
        self.pipe.close_server_output()


@asynccontextmanager
async def serve_in_process(
    scenario: Scenario,
    *,
    trace_root: Path | None = None,
    cwd: str = "/RUN/workdir",
    release: str | profiles.Profile | None = None,
    pipe: Pipe | None = None,
) -> AsyncIterator[InProcessServer]:
    """Run an in-process fake for the duration of the block; leaving the block kills what is left."""
    server = InProcessServer(scenario, trace_root=trace_root, cwd=cwd, release=release, pipe=pipe)
    async with trio.open_nursery() as nursery:
        await nursery.start(server._serve)
        try:
            yield server
        finally:
            server.kill()
