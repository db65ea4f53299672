"""``fake-codex``: a drop-in for ``codex`` that serves one scripted app-server session on stdio.

``fake-codex --version`` answers like the real binary of the release played: ``--release X`` (or
``FAKE_CODEX_RELEASE``, else the scenario's ``release``, else the default release) picks one of
:func:`fake_server.profiles.names`; an unknown release exits 3 and lists them.
``fake-codex app-server [--scenario NAME|PATH]`` plays a built-in scenario or a scenario file
(``FAKE_CODEX_SCENARIO`` when no flag, ``plain`` when neither), so a client that spawns ``codex app-server``
with fixed arguments can point its codex path here. Real-binary flags (``-c key=value``) are accepted.
``--listen ws://IP:PORT`` / ``unix://[PATH]`` serve as ``codex app-server`` does (its banner, ``/readyz`` and
``/healthz``, ``--ws-auth``, one session per connection until SIGTERM: :mod:`fake_server.ws_serve`,
``docs/transports.md``). ``--record DIR`` records the session
(:mod:`fake_server.recording`); ``FAKE_CODEX_RECORD`` wins over the flag.

Process faults are real here: a crash flushes what the fault says (half a frame for mid-line) and
leaves with ``os._exit(K)`` (no cleanup, the trace stays unclosed); ``grandchild_holds_stdout``
starts a ``sleep`` that inherits stdout and outlives the server by up to ``hold_ms``, in the server's
process group so a group kill takes it down. stdin EOF and SIGTERM shut down gracefully.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import trio

from contracts import paths, releases
from contracts.argparsing import ArgumentParser
from contracts.exitcodes import INVALID_INPUT, USAGE, UsageError, exit_code
from contracts.pipes import quiet_after_broken_pipe
from contracts.scenario import Scenario
from contracts.scenario_file import ScenarioError, with_faults
from contracts.text import escape, escaped_output
from contracts.transport import LineStream
from contracts.wire import Incoming
from fake_server import ledger, profiles
from fake_server.catalogue import builtin_names, resolve
from fake_server.effects import FaultStruck, TraceEvent
from fake_server.engine import Engine
from fake_server.recording import RECORD_ENV, Recorder, RecordingIo, open_recorder
from fake_server.runtime import default_clock_ms, run_engine
from fake_server.server_trace import ServerTrace

SCENARIO_ENV = "FAKE_CODEX_SCENARIO"
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


QUIET_ENV = "FAKE_CODEX_QUIET"
_QUIET = [False]


def say(text: str) -> None:
    """One line on stderr for the person debugging a client (the scenario played, a fault as it strikes, where
    the recording went); none under ``--quiet`` or ``$FAKE_CODEX_QUIET``. Written whole with one write."""
    if _QUIET[0]:
        return
    data = escape(f"fake-codex: {text}").encode("utf-8", "replace") + b"\n"
    try:
        os.write(2, data)
    except OSError:
        pass


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


def _seconds(value: str) -> int:
    """A number of seconds, 0 or more (the real binary's u64)."""
    if not value.isdigit():
        raise argparse.ArgumentTypeError(f"invalid digit found in string: {value!r}")
    return int(value)


def _codex_home() -> str:
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


def _auth_flags(args: argparse.Namespace) -> Any:
    from fake_server.ws_auth import AuthFlags

    return AuthFlags(
        mode=args.ws_auth,
        token_file=args.ws_token_file,
        token_sha256=args.ws_token_sha256,
        shared_secret_file=args.ws_shared_secret_file,
        issuer=args.ws_issuer,
        audience=args.ws_audience,
        max_clock_skew_seconds=args.ws_max_clock_skew_seconds,
    )


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
            codex_home=_codex_home(),
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
            if refuse is not None:  # struck as soon as the server serves: every upgrade is refused
                index = next(i for i, f in enumerate(scenario.turns[0].faults) if f.kind == "ws_refuse_upgrade")
                _ledger_append(FaultStruck(0, index, "ws_refuse_upgrade", "initialize", 1))

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


def _serve_socket(
    listen: Any,
    policy: Any,
    scenario: Scenario,
    spec: str | None,
    profile: profiles.Profile,
    sources: dict[str, str],
    record_root: str | None,
) -> int:
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


def _get_blocking(fd: int) -> bool | None:
    try:
        return os.get_blocking(fd)
    except OSError:
        return None


def _set_blocking(fd: int, blocking: bool | None) -> None:
    if blocking is None:
        return
    try:
        os.set_blocking(fd, blocking)
    except OSError:
        pass


#: The real binary's options (``codex --help`` / ``codex app-server --help``, 0.171.0) that change nothing the fake
#: plays: accepted and ignored, each with whether it takes a value. Any other option is refused as the real binary
#: refuses it (exit 2), so a client passing a flag the release does not know fails here as it would there.
TOP_LEVEL_FLAGS = {
    ("-i", "--image"): True,
    ("-m", "--model"): True,  # observed: top-level -m / -s / -a do not reach app-server's threads
    ("-p", "--profile"): True,
    ("-s", "--sandbox"): True,
    ("-C", "--cd"): True,
    ("-a", "--ask-for-approval"): True,
}
APP_SERVER_FLAGS = {
    ("--startup-sign-out",): False,
    ("--print-startup-config",): False,
    ("--startup-client-info",): True,
    ("--cloud-skills-snapshot",): True,
    ("--code-mode-host",): True,
    ("--strict-config",): False,
    ("--analytics-default-enabled",): False,
}
#: clap's exit code for a command line it cannot parse
BAD_ARGUMENTS = 2


def _accept(parser: ArgumentParser, flags: dict[tuple[str, ...], bool]) -> None:
    for names, takes_value in flags.items():
        if takes_value:
            parser.add_argument(*names, action="append", metavar="VALUE", help="accepted, ignored")
        else:
            parser.add_argument(*names, action="store_true", help="accepted, ignored")


def _refused(unknown: list[str], command: str | None) -> int:
    """What the real binary says of an argument it does not know (clap), and its exit code."""
    first = unknown[0]
    usage = "codex app-server [OPTIONS] [COMMAND]" if command == "app-server" else "codex [OPTIONS] <COMMAND>"
    what = f"unexpected argument '{first}' found" if first.startswith("-") else f"unrecognized subcommand '{first}'"
    print(f"error: {what}\n\nUsage: {usage}\n\nFor more information, try '--help'.", file=sys.stderr)
    return BAD_ARGUMENTS


def _parser() -> ArgumentParser:
    parser = ArgumentParser(
        prog="fake-codex",
        allow_abbrev=False,  # clap takes no abbreviation: --scen is refused there, so here
        description=f"Scriptable fake of `codex app-server` {', '.join(profiles.names())} "
        f"(default {releases.default_version()}).",
    )
    parser.add_argument("--version", "-V", action="store_true", help="print the version like the real binary")
    parser.add_argument(
        "--harness", action="store_true", help="with --version: the version of codex-harness that ships this fake"
    )
    parser.add_argument(
        "--release",
        metavar="X",
        help=f"the release to play: {', '.join(profiles.names())} (default: ${profiles.RELEASE_ENV}, "
        f"else the scenario's release, else {releases.default_version()})",
    )
    parser.add_argument("-c", "--config", action="append", default=[], metavar="KEY=VALUE", help="accepted, ignored")
    parser.add_argument("--record", dest="record_top", metavar="DIR", help="as app-server --record")
    _accept(parser, TOP_LEVEL_FLAGS)
    sub = parser.add_subparsers(dest="command")
    app = sub.add_parser(
        "app-server", allow_abbrev=False, help="serve app-server sessions on stdio, a websocket or a unix socket"
    )
    app.add_argument("--scenario", help=f"built-in scenario name or scenario file (default: ${SCENARIO_ENV} or plain)")
    app.add_argument(
        "--listen",
        default="stdio://",
        help="stdio:// (default), unix://, unix://PATH or ws://IP:PORT (one connection, one session; see "
        "docs/transports.md)",
    )
    app.add_argument(
        "--ws-auth", choices=("capability-token", "signed-bearer-token"), help="auth of websocket upgrades"
    )
    app.add_argument("--ws-token-file", metavar="PATH")
    app.add_argument("--ws-token-sha256", metavar="HEX")
    app.add_argument("--ws-shared-secret-file", metavar="PATH")
    app.add_argument("--ws-issuer", metavar="ISSUER")
    app.add_argument("--ws-audience", metavar="AUDIENCE")
    app.add_argument("--ws-max-clock-skew-seconds", metavar="SECONDS", type=_seconds)
    app.add_argument("--record", metavar="DIR", help=f"record the session into DIR/<n>-<pid>/ (or ${RECORD_ENV})")
    app.add_argument("-c", "--config", dest="app_config", action="append", default=[], metavar="KEY=VALUE")
    app.add_argument("--release", dest="app_release", metavar="X", help="as fake-codex --release")
    app.add_argument("--enable", action="append", default=[], metavar="FEATURE", help="as -c features.FEATURE=true")
    app.add_argument("--disable", action="append", default=[], metavar="FEATURE", help="as -c features.FEATURE=false")
    app.add_argument("--stdio", action="store_true", help="as --listen stdio://")
    _accept(app, APP_SERVER_FLAGS)
    app.add_argument(
        "--fault",
        action="append",
        default=[],
        metavar="KIND[:param=value,...][@POINT[:N]][#TURN]",
        help="add a fault to the scenario played, e.g. crash:exit_code=101@delta:2 (repeatable; validated as a "
        "scenario file's [[turns.faults]], docs/scenarios.md)",
    )
    app.add_argument(
        "--quiet",
        action="store_true",
        help=f"say nothing on stderr of the scenario, the faults that strike, the recording (or ${QUIET_ENV}=1)",
    )
    return parser


def _require_readable(spec: str | None) -> None:
    """A spec that names a path (or something here that is not a built-in) must be a readable regular file:
    a FIFO, a directory or a device is named as what it is, never opened."""
    if not spec:
        return
    path = Path(spec)
    looks_like_path = path.suffix == ".toml" or "/" in spec or "\\" in spec
    if looks_like_path or (os.path.lexists(spec) and spec not in builtin_names()):
        paths.require_file(path, "scenario file")


def _source(*given: tuple[str, object]) -> str:
    """The name of the first input that is set (the precedence of ``_main``), else ``default``."""
    return next((name for name, value in given if value), "default")


def _play_sources(
    args: argparse.Namespace, flag: str | None, env_release: str | None, own: str | None
) -> dict[str, str]:
    """Where each input of :func:`fake_server.recording.play_identity` came from."""
    return {
        "scenario": _source(("--scenario", args.scenario), (f"${SCENARIO_ENV}", os.environ.get(SCENARIO_ENV))),
        "release": _source(("--release", flag), (f"${profiles.RELEASE_ENV}", env_release), ("the scenario", own)),
    }


def main(argv: Sequence[str] | None = None) -> int:
    try:
        with escaped_output(stdout=False):  # stdout is the wire; what we say on stderr is escaped (contracts.text)
            code = _main(argv)
        sys.stdout.flush()  # a closed pipe shows here, where it is handled, not at interpreter exit
        return code
    except BrokenPipeError:  # `fake-codex --help | head -1`: no traceback
        return quiet_after_broken_pipe()


def _main(argv: Sequence[str] | None) -> int:
    parser = _parser()
    args, unknown = parser.parse_known_args(argv)
    if unknown:
        return _refused(unknown, args.command)
    env_release = os.environ.get(profiles.RELEASE_ENV)
    try:  # flag and environment are checked before anything else, --version included
        flag = getattr(args, "app_release", None) or args.release
        profile = profiles.select(flag, env_release)
    except UsageError as exc:  # an unknown release, or a release folder that cannot be read
        print(f"fake-codex: {exc}", file=sys.stderr)
        return exit_code(exc)
    if args.version:
        if args.harness:
            from contracts.version import version_line  # importlib.metadata: only when asked (start-up time)

            print(version_line())
        else:
            print(profile.version_line)
        return 0
    if args.command != "app-server":
        parser.print_help()
        return USAGE
    features = [f"features.{name}=true" for name in args.enable] + [f"features.{name}=false" for name in args.disable]
    CONFIG_OVERRIDES[:] = [*args.config, *args.app_config, *features]
    if args.stdio:
        args.listen = "stdio://"
    listen = policy = None
    auth = _auth_flags(args)
    if args.listen != "stdio://" or any(v is not None for v in dataclasses.astuple(auth)):
        # Imported only for a listener (wsproto and h11 are a tenth of a second on a loaded machine: stdio starts
        # within its clients' handshake timeouts without them).
        from fake_server import ws_auth, ws_http

        try:
            listen = ws_http.parse_listen(args.listen, _codex_home())
            policy = ws_auth.policy_from_flags(auth, read_secrets=listen.scheme != "stdio")
            ws_http.check_listener(listen, policy)
        except ws_http.ListenUsageError as exc:  # the real binary's argument parser: exit 2
            print(exc, file=sys.stderr)
            return INVALID_INPUT
        except (ws_http.ListenRefused, ws_auth.AuthConfigError) as exc:  # refused at start: exit 1
            print(f"Error: {exc}", file=sys.stderr)
            return 1
    spec = args.scenario or os.environ.get(SCENARIO_ENV) or None
    try:
        _require_readable(spec)
        scenario = resolve(spec)
        if args.fault:
            scenario = with_faults(scenario, args.fault)
        profile = profiles.select(flag, env_release, scenario.release)
        profile.verify()  # a release folder that cannot be used: 3, naming the file
        sources = _play_sources(args, flag, env_release, scenario.release)
    except (UsageError, ScenarioError) as exc:  # an unreadable path, an unusable release folder: 3; a scenario: 2
        print(f"fake-codex: {exc}", file=sys.stderr)
        return exit_code(exc)
    refusal = refused_setting(profile)
    if refusal is not None:  # as the release refuses a setting it no longer takes (its policy.json)
        said, code = refusal
        print(f"Error: {said}", file=sys.stderr)
        return code
    # The variable wins over the flag: a wrapper that records every server (the --client-cmd shim) must not lose
    # one to a client that passes --record.
    record_root = os.environ.get(RECORD_ENV) or args.record or args.record_top
    if listen is not None and listen.scheme != "stdio":
        return _serve_socket(listen, policy, scenario, spec, profile, sources, record_root)
    _QUIET[0] = args.quiet or os.environ.get(QUIET_ENV, "") not in ("", "0")
    faults = ", ".join(sorted({f.kind for f in scenario.faults})) or "no fault"
    say(f"playing scenario {scenario.name} as codex-cli {profile.release} ({faults}); --quiet says nothing")
    recorder = open_recorder(record_root, scenario, spec, profile.release, sources)
    if recorder is not None:
        recorder.keep_signals()
    # trio makes the shared stdin/stdout descriptions non-blocking; give a terminal back as it was.
    blocking = {fd: _get_blocking(fd) for fd in (0, 1)}
    try:
        code, crashed = trio.run(serve_stdio, scenario, recorder, profile)
    finally:
        for fd, was in blocking.items():
            _set_blocking(fd, was)
    if recorder is not None:
        recorder.finish(code, crashed)
        say(f"recorded into {recorder.folder}; see it with: codex-harness show {recorder.folder}")
    if crashed:
        os._exit(code & 0xFF)  # like a dying process: no flushing of Python buffers, no atexit
    return code


if __name__ == "__main__":
    sys.exit(main())
