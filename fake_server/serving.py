"""The sessions ``fake-codex app-server`` serves: one on stdio (:func:`serve_stdio`), or one per connection of a
``ws://`` / ``unix://`` listener (:func:`run_socket`); the engine (:mod:`fake_server.engine`) on trio.

Apart from :mod:`fake_server.cli` so that ``fake-codex --version``, its usage errors and its help import none of
this (the engine, trio, the scenario model): they answer within a fraction of a second (``bench/fake_start.py``).
Process faults are real here; see :mod:`fake_server.cli`.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
from pathlib import Path
from typing import Any

import trio

from contracts.scenario import Scenario
from contracts.transport import LineStream
from contracts.wire import Incoming
from fake_server import ledger, profiles
from fake_server.effects import FaultStruck, TraceEvent
from fake_server.engine import Engine
from fake_server.recording import Recorder, RecordingIo, open_recorder
from fake_server.runtime import default_clock_ms, run_engine
from fake_server.say import say
from fake_server.server_trace import ServerTrace

TRACE_ENV = "CODEX_ROLLOUT_TRACE_ROOT"
READ_CHUNK = 65536
#: How long a graceful shutdown on SIGTERM may take before the server ends anyway (see ``serve_stdio``).
SIGTERM_GRACE_S = 1.0


class _StdioIo:
    """The engine's I/O on the process's own stdin, stdout and stderr; the wire is newline-delimited JSON
    (:class:`~contracts.transport.LineStream` over the two descriptors)."""

    def __init__(self, trace: ServerTrace | None) -> None:
        self.stdin = trio.lowlevel.FdStream(os.dup(0))
        self.stdout = trio.lowlevel.FdStream(os.dup(1))
        self.stdout_closed = False
        self.trace_writer = trace
        self.grandchildren: list[subprocess.Popen[bytes]] = []
        self.wire = LineStream(self._write_bytes, self._read_bytes, self.close_stdout, read_chunk=READ_CHUNK)

    async def read(self) -> list[Incoming]:
        return await self.wire.receive()

    async def write(self, messages: list[bytes], torn: bytes = b"") -> None:
        await self.wire.send(messages, torn)

    async def _read_bytes(self, max_bytes: int) -> bytes:
        try:
            return await self.stdin.receive_some(max_bytes)
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
            return b""

    async def _write_bytes(self, data: bytes) -> None:
        if self.stdout_closed:
            return
        try:
            await self.stdout.send_all(data)
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
            self.stdout_closed = True  # the reader is gone; carry on like a server with EPIPE

    async def close_stdout(self) -> None:
        if not self.stdout_closed:
            self.stdout_closed = True
            await self.stdout.aclose()
            # Our own fd 1 is the last other holder; close it so the reader sees EOF.
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, 1)
            os.close(devnull)

    def write_stderr(self, text: str) -> None:
        data = text.encode("utf-8", "replace")
        try:
            while data:
                written = os.write(2, data)
                data = data[written:]
        except OSError:
            pass

    async def spawn_grandchild(self, hold_ms: int) -> None:
        seconds = f"{max(0, hold_ms) / 1000:.3f}"
        # Inherits fd 1 (our stdout) and stays in our process group.
        self.grandchildren.append(
            subprocess.Popen(["sleep", seconds], stdin=subprocess.DEVNULL, stderr=subprocess.DEVNULL, close_fds=True)
        )

    def trace(self, event: TraceEvent) -> None:
        if self.trace_writer is not None:
            self.trace_writer.on_event(event)

    def fault_struck(self, effect: FaultStruck) -> None:
        path = os.environ.get(ledger.FAULT_LEDGER_ENV)
        if path:
            ledger.append(path, effect)
        # The person debugging a client sees which fault struck where, as it strikes (--quiet: not).
        say(f"fault {effect.kind} struck at {effect.at} {effect.n} of turn {effect.turn + 1}")


async def serve_stdio(
    scenario: Scenario, recorder: Recorder | None = None, profile: profiles.Profile | None = None
) -> tuple[int, bool]:
    """Serve one session on stdio until the engine exits; returns (exit code, crashed)."""
    profile = profile or profiles.select(scenario=scenario.release)
    # A recording keeps the server's trace bundle with its wire (fake_server.recording).
    root = str(recorder.trace_root) if recorder is not None else os.environ.get(TRACE_ENV)
    trace = ServerTrace.for_profile(Path(root), profile) if root else None
    engine = Engine(
        scenario,
        profile=profile,
        cwd=os.getcwd(),
        codex_home=os.environ.get("CODEX_HOME") or str(Path.home() / ".codex"),
        hostname=socket.gethostname(),
        store=open_store(),
        setup=open_setup(),
    )
    io: Any = _StdioIo(trace) if recorder is None else RecordingIo(_StdioIo(trace), recorder)
    outcome_box: list[tuple[int, bool]] = []
    with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        async with trio.open_nursery() as nursery:

            async def on_sigterm() -> None:
                async for signum in signals:
                    if recorder is not None:
                        recorder.on_signal(signal.Signals(signum).name)
                    # Graceful like stdin EOF: the engine's input loop sees EOF and shuts down.
                    await io.stdin.aclose()
                    if engine.hung:
                        nursery.cancel_scope.cancel()  # a silent server still dies on SIGTERM
                        return
                    # A server blocked writing a line its client no longer reads never ends gracefully. The real
                    # binary (its reader stalled in a 16 MiB delta) exits 0 within 1-2.5 s of SIGTERM,
                    # its group empty (docs/real-binary.md): give the graceful path as long, then end.
                    await trio.sleep(SIGTERM_GRACE_S)
                    nursery.cancel_scope.cancel()
                    return

            nursery.start_soon(on_sigterm)
            outcome = await run_engine(engine, io)
            outcome_box.append((outcome.code, outcome.crash))
            nursery.cancel_scope.cancel()
    code, crashed = outcome_box[0] if outcome_box else (0, False)
    if trace is not None and not crashed:
        trace.finish(graceful=True)
    return code, crashed


def codex_home() -> str:
    return os.environ.get("CODEX_HOME") or str(Path.home() / ".codex")


#: the -c overrides fake-codex was started with (its own and app-server's), for every session's setup
CONFIG_OVERRIDES: list[str] = []


def open_setup() -> Any:
    """What the sessions answer config/read, modelProvider/list and a thread's model from: an explicit
    ``CODEX_HOME``'s config.toml and the -c overrides (fake_server.home_config), or None (the recorded answers)."""
    from fake_server.home_config import ConfigError, Setup, read_setup

    home = os.environ.get("CODEX_HOME")
    if not home:
        return None
    try:
        return read_setup(home, CONFIG_OVERRIDES)
    except ConfigError as exc:
        os.write(2, f"WARN fake-codex: {exc}; answering as from an empty home\n".encode("utf-8", "replace"))
        return Setup()


def refused_setting(profile: profiles.Profile) -> tuple[str, int] | None:
    """What the release says, and its exit status, when the home's config.toml or ``-c`` sets an approval policy it
    refuses to start with (``refused_at_start`` of its ``policy.json``: exit 1 on ``untrusted``, as observed)."""
    setup = open_setup() if os.environ.get("CODEX_HOME") else None
    table = profile.policy()
    if setup is None or not isinstance(table, dict) or not isinstance(table.get("refused_at_start"), dict):
        return None
    value = setup.effective.get("approval_policy")
    refusal = table["refused_at_start"].get(value) if isinstance(value, str) else None
    if not isinstance(refusal, dict) or not isinstance(refusal.get("said"), str):
        return None
    code = refusal.get("exit")
    return refusal["said"], code if isinstance(code, int) and not isinstance(code, bool) and 0 < code < 256 else 1


def open_store() -> Any:
    """The thread store of an explicit ``CODEX_HOME`` (fake_server.home_store), or None: never ``~/.codex``, and a
    home that cannot hold it leaves the session a one-process one (said on stderr)."""
    from fake_server.home_store import HomeStore, StoreError

    home = os.environ.get("CODEX_HOME")
    if not home:
        return None
    try:
        return HomeStore.open(home)
    except StoreError as exc:
        os.write(2, f"WARN fake-codex: {exc}\n".encode("utf-8", "replace"))
        return None


async def serve_socket(
    listen: Any,
    policy: Any,
    scenario: Scenario,
    spec: str | None,
    profile: profiles.Profile,
    sources: dict[str, str],
    record_root: str | None,
) -> tuple[int, bool]:
    """Serve ``ws://`` or ``unix://`` until SIGTERM (exit 0, every connection dropped, as the real binary does)
    or a crash fault (its exit code). Each connection is one session: its own engine, trace and recording."""
    from fake_server.ws_serve import ConnectionIo, announce, refusal_of, serve_listener, write_stderr

    trace_env = os.environ.get(TRACE_ENV)
    clock = default_clock_ms()
    loaded: set[str] = set()  # threads an earlier connection left loaded: this server still holds them

    async def session(ws: Any, n: int) -> tuple[int, bool] | None:
        recorder = open_recorder(record_root, scenario, spec, profile.release, sources)
        root = str(recorder.trace_root) if recorder is not None else trace_env
        trace = ServerTrace.for_profile(Path(root), profile) if root else None
        engine = Engine(
            scenario,
            profile=profile,
            cwd=os.getcwd(),
            codex_home=codex_home(),
            hostname=socket.gethostname(),
            store=ServerStore.around(open_store(), loaded),
            setup=open_setup(),
        )
        io: Any = ConnectionIo(ws, write_stderr, trace.on_event if trace else (lambda _e: None), _ledger_append)
        if recorder is not None:
            recorder.note(f"connection {n} over {listen.scheme}")
            io = RecordingIo(io, recorder)
        outcome = None
        try:
            # A closed connection leaves its turns going (observed: tests/ws_lifetime_observe.py).
            outcome = await run_engine(engine, io, clock, detach_on_eof=True)
        finally:
            # Closed when the connection's turns ended, and on SIGTERM (observed: the real closes its traces then).
            if trace is not None and (outcome is None or not outcome.crash):
                trace.finish(graceful=True)
            if engine.world.store is not None:
                engine.world.store.close()  # one per connection: a long-lived listener keeps no descriptors of it
            loaded.update(ServerStore.still_loaded(engine.world))
        if recorder is not None:
            recorder.finish(outcome.code, outcome.crash)
        return (outcome.code, True) if outcome.crash else None

    result: list[tuple[int, bool]] = []
    with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        async with trio.open_nursery() as nursery:
            refuse = refusal_of(scenario)
            if refuse is not None and refuse.struck is not None:  # struck as soon as the server serves
                _ledger_append(refuse.struck)

            def refused(n: int) -> None:
                """A refused upgrade is recorded too: an outside client's judge sees the server it started refuse it."""
                recorder = open_recorder(record_root, scenario, spec, profile.release, sources)
                if recorder is not None and refuse is not None:
                    recorder.note(f"websocket upgrade {n} refused: HTTP {refuse.refuse_status}")
                    recorder.finish(0, False)

            async def serve(task_status: trio.TaskStatus[int] = trio.TASK_STATUS_IGNORED) -> None:
                outcome = await serve_listener(
                    listen, policy, session, clock, refuse=refuse, on_refused=refused, task_status=task_status
                )
                result.append(outcome)
                nursery.cancel_scope.cancel()

            async def on_signal() -> None:
                async for _signum in signals:
                    nursery.cancel_scope.cancel()  # every connection drops, no close frame; exit 0
                    return

            port = await nursery.start(serve)
            announce(listen, port)
            nursery.start_soon(on_signal)
    return result[0] if result else (0, False)


class ServerStore:
    """A connection's view of the home's thread store (:class:`fake_server.home_store.HomeStore`) in a server that
    serves many: a thread an earlier connection left loaded is found loaded (the real server keeps it in memory
    when its connection closes, observed: ``tests/ws_lifetime_observe.py``); the rest is the store's."""

    def __init__(self, store: Any, loaded: set[str]) -> None:
        self._store = store
        self._loaded = loaded
        self._marked: set[str] = set()  # marked once: what the client does to them afterwards is its own

    @classmethod
    def around(cls, store: Any, loaded: set[str]) -> Any:
        return None if store is None else cls(store, loaded)

    @staticmethod
    def still_loaded(world: Any) -> set[str]:
        out = set()
        for thread_id in world.threads:
            extra = world.surface.threads.get(thread_id)
            if extra is None or (extra.loaded and not extra.archived and not extra.deleted):
                out.add(thread_id)
        return out

    def fill(self, world: Any) -> None:
        self._store.fill(world)
        for thread_id in self._loaded - self._marked:
            extra = world.surface.threads.get(thread_id)
            if thread_id in world.threads and extra is not None and extra.from_store and not extra.archived:
                extra.loaded = True
                self._marked.add(thread_id)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)


def _ledger_append(effect: FaultStruck) -> None:
    path = os.environ.get(ledger.FAULT_LEDGER_ENV)
    if path:
        ledger.append(path, effect)


def run_socket(
    listen: Any,
    policy: Any,
    scenario: Scenario,
    spec: str | None,
    profile: profiles.Profile,
    sources: dict[str, str],
    record_root: str | None,
) -> int:
    import sys

    from contracts.unix_socket import SocketPathError

    try:
        try:
            code, crashed = trio.run(serve_socket, listen, policy, scenario, spec, profile, sources, record_root)
        except BaseExceptionGroup as group:  # raised inside the server's nursery: the one cause
            leaves = group.exceptions
            while len(leaves) == 1 and isinstance(leaves[0], BaseExceptionGroup):
                leaves = leaves[0].exceptions
            if len(leaves) != 1:
                raise
            raise leaves[0] from None
    except SocketPathError as exc:
        print(f"Error: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:  # the address is taken, not ours, not here
        print(f"Error: {exc.strerror or exc} (os error {exc.errno})", file=sys.stderr)
        return 1
    if crashed:
        os._exit(code & 0xFF)
    return code


def get_blocking(fd: int) -> bool | None:
    try:
        return os.get_blocking(fd)
    except OSError:
        return None


def set_blocking(fd: int, blocking: bool | None) -> None:
    if blocking is None:
        return
    try:
        os.set_blocking(fd, blocking)
    except OSError:
        pass


def run_stdio(scenario: Scenario, recorder: Recorder | None, profile: profiles.Profile) -> tuple[int, bool]:
    """One session on stdio (:func:`serve_stdio`) under ``trio.run``; returns (exit code, crashed)."""
    return trio.run(serve_stdio, scenario, recorder, profile)
