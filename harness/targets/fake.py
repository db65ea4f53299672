"""The two fake targets: the engine in process (under the caller's clock) and ``fake-codex app-server``."""

from __future__ import annotations

import shutil
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from contracts import schema_store
from contracts import transport as transports
from contracts.scenario import Scenario
from contracts.scenario_file import dump
from fake_server import ledger, profiles
from harness.targets.base import TargetRun, TargetUnavailable, write_files

TRACE_ROOT_ENV = "CODEX_ROLLOUT_TRACE_ROOT"


#: The in-process fake's connections: newline-delimited as stdio, one payload per message (no newline), or a
#: websocket (wsproto over a bounded in-memory stream) upgraded as a ``ws://`` or a ``unix://`` listener.
IN_PROCESS_TRANSPORTS: tuple[str, ...] = transports.ALL
#: What ``fake-codex`` serves as a process (``--listen``).
PROCESS_TRANSPORTS: tuple[str, ...] = transports.WIRE


@asynccontextmanager
async def in_process(
    scenario: Scenario, *, work_dir: Path, release: str | profiles.Profile | None = None, transport: str = "stdio"
) -> AsyncIterator[TargetRun]:
    try:
        from fake_server.inprocess import LinePipe, serve_in_process
        from fake_server.message_pipe import MessagePipe
        from fake_server.ws_pipe import WsPipe
    except ImportError as exc:
        raise TargetUnavailable(f"the in-process fake is not available: {exc}") from exc
    if transport not in IN_PROCESS_TRANSPORTS:
        raise TargetUnavailable(f"the in-process fake serves {', '.join(IN_PROCESS_TRANSPORTS)}, not {transport}")
    pipe: Any = LinePipe()
    if transport == "messages":
        pipe = MessagePipe()
    elif transport in ("ws", "unix"):
        from fake_server.ws_serve import refusal_of

        pipe = WsPipe(unix=transport == "unix", refuse=refusal_of(scenario))
    trace_root = work_dir / "server-trace-root"
    trace_root.mkdir(parents=True, exist_ok=True)
    # The engine's cwd is virtual unless the scenario puts files in it: then a real folder of the run's.
    cwd = write_files(work_dir / "workdir", scenario.client.files) if scenario.client.files else None
    async with serve_in_process(
        scenario, trace_root=trace_root, release=release, pipe=pipe, **({"cwd": str(cwd)} if cwd else {})
    ) as server:
        connection: Any = server
        failure = None
        if isinstance(pipe, WsPipe):
            failure = await _connect_in_process(pipe, server)
            if failure is not None:
                from codex_client.sockets import NoConnection, SocketTransport

                connection = SocketTransport(NoConnection(failure), server, failure=failure)
        # The release profile played ($FAKE_CODEX_RELEASE, else the scenario's): its schema judges the frames.
        release = server.profile.release
        run = TargetRun(
            "fake",
            connection,
            virtual_time=True,
            trace_root=trace_root,
            schema_release=release,
            server_version=release,
            meta={"transport": transport, **({"connect_failure": failure} if failure else {})},
            switches={name: getattr(server.profile, name) for name in profiles.SWITCHES},
        )
        run.workdir = cwd or Path(server.engine.cwd)
        run.faults_struck = lambda: [(f.turn, f.index, f.sent, f.received) for f in server.faults_struck]
        yield run


async def _connect_in_process(pipe: Any, server: Any) -> str | None:
    """Our client's upgrade; what went wrong when it did not open (a refusal is the scenario's fault: struck)."""
    from codex_client.sockets import keepalive
    from contracts.websocket import HandshakeFailed, UpgradeRefused

    try:
        keepalive(await pipe.connect())
    except (UpgradeRefused, HandshakeFailed) as exc:
        if pipe.refuse is not None and pipe.refuse.struck is not None:
            server.faults_struck.append(pipe.refuse.struck)
        return str(exc)
    return None


def fake_codex_argv() -> list[str]:
    """``fake-codex`` next to this interpreter (the venv's script), else ``python -m fake_server.cli``."""
    script = Path(sys.executable).parent / "fake-codex"
    if script.exists():
        return [str(script)]
    found = shutil.which("fake-codex")
    return [found] if found else [sys.executable, "-m", "fake_server.cli"]


@asynccontextmanager
async def fake_process(
    scenario: Scenario,
    *,
    work_dir: Path,
    scenario_file: Path | None = None,
    release: str | None = None,
    transport: str = "stdio",
) -> AsyncIterator[TargetRun]:
    from codex_client.process import child_environment, spawn_process
    from codex_client.sockets import listen_arg, open_socket_transport
    from codex_sandbox import proctree

    if transport not in PROCESS_TRANSPORTS:
        raise TargetUnavailable(f"fake-codex serves {', '.join(PROCESS_TRANSPORTS)}, not {transport}")

    if scenario_file is None:
        scenario_file = Path(scenario.source) if scenario.source and Path(scenario.source).is_file() else None
    if scenario_file is None:  # a scenario built in Python: the process reads it from a file
        scenario_file = dump(scenario, work_dir / f"{scenario.name}.toml")
    # The process runs in work_dir: a path relative to our cwd would name another (missing) file there.
    scenario_file = scenario_file.absolute()
    trace_root = work_dir / "server-trace-root"
    trace_root.mkdir(parents=True, exist_ok=True)
    env = child_environment(None)
    env[TRACE_ROOT_ENV] = str(trace_root)
    fault_ledger = work_dir / "faults-struck.jsonl"
    env[ledger.FAULT_LEDGER_ENV] = str(fault_ledger)
    # The store this run reads (--store included), so the process finds the releases it does.
    env[schema_store.STORE_ENV] = str(schema_store.user_store())
    # The release profile as the process will pick it; a scenario file of our own may lack the scenario's key.
    release = profiles.select(release, env.get(profiles.RELEASE_ENV), scenario.release).release
    argv = [*fake_codex_argv(), "app-server", "--scenario", str(scenario_file), "--release", release]
    if transport != "stdio":
        argv += ["--listen", listen_arg(transport, work_dir)]
    # fake-codex's cwd is its sessions' working directory: a folder of its own when the scenario puts files there.
    cwd = write_files(work_dir / "workdir", scenario.client.files) if scenario.client.files else work_dir
    # In a process tree of its own: what it leaves behind (a scenario's grandchild) dies with the run, even a
    # run killed by SIGKILL (codex_sandbox.proctree).
    async with spawn_process(argv, cwd=cwd, env=env, confine=proctree.confinement()) as process:
        connection: Any = process
        meta = {"argv": argv, "transport": transport}
        if transport != "stdio":
            connection = await open_socket_transport(transport, process, work_dir)
            if connection.failure:
                meta["connect_failure"] = connection.failure
        yield TargetRun(
            "fake-process",
            connection,
            virtual_time=False,
            trace_root=trace_root,
            schema_release=release,
            server_version=release,
            meta=meta,
            faults_struck=lambda: ledger.read(fault_ledger),
            workdir=cwd,
        )

