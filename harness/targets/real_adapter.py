"""The ``real`` target for the runner: :func:`harness.targets.real.real_target` + the process transport."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

from codex_sandbox import confine
from contracts import transport as transports
from contracts.scenario import Scenario
from harness.codex_bin import CodexNotFound, codex_version, find_codex
from harness.targets.base import TargetRun, TargetUnavailable


def select_codex(codex: Path | None) -> Path:
    try:
        path = find_codex(codex, use_path=False)
    except CodexNotFound as exc:
        raise TargetUnavailable(str(exc)) from exc
    if path is None:
        raise TargetUnavailable("no real codex selected (use --codex PATH or CODEX_BIN)")
    return path


def preflight(codex: Path | None, *, require_pinned_schema: bool = True) -> tuple[Path, str]:
    """Can the real target run at all? The binary and its version, else TargetUnavailable saying why.

    Asked once, before any scenario: no way to confine it (:mod:`codex_sandbox.confine`), a missing,
    non-executable or broken binary (``/bin/false``, one that hangs on ``--version``: bounded by
    :func:`harness.codex_bin.version_timeout`), or a release without a pinned schema, would otherwise skip
    every scenario one by one.
    """
    path = select_codex(codex)
    try:  # before the binary runs at all: its --version is confined too
        confine.current()
    except confine.ConfinementUnavailable as exc:
        raise TargetUnavailable(str(exc)) from None
    if not path.is_file():
        raise TargetUnavailable(f"{path} is not a file")
    if not os.access(path, os.X_OK):
        raise TargetUnavailable(f"{path} is not executable")
    try:
        version = codex_version(path)
    except CodexNotFound as exc:
        raise TargetUnavailable(str(exc)) from None
    if require_pinned_schema:
        from harness.targets.real import pinned_schema_for, schema_not_pinned_message

        if pinned_schema_for(version) is None:
            raise TargetUnavailable(schema_not_pinned_message(version))
    return path, version


@asynccontextmanager
async def real(
    scenario: Scenario, *, work_dir: Path, codex: Path | None, transport: str = "stdio"
) -> AsyncIterator[TargetRun]:
    try:
        from harness.targets.real import RealTargetError, real_target
    except ImportError as exc:
        raise TargetUnavailable(f"the real target is not available: {exc}") from exc
    from codex_client.process import spawn_process
    from codex_client.sockets import listen_arg, open_socket_transport

    if transport not in transports.WIRE:
        raise TargetUnavailable(f"the real target is reached over {', '.join(transports.WIRE)}, not {transport}")

    binary = select_codex(codex)
    trace_root = work_dir / "server-trace-root"
    trace_root.mkdir(parents=True, exist_ok=True)
    async with AsyncExitStack() as stack:
        try:
            target = await stack.enter_async_context(
                real_target(
                    scenario,
                    binary,
                    trace_root=trace_root,
                    base_dir=work_dir,
                    listen=listen_arg(transport, Path("{run}")),  # the socket in the run's folder, where it writes
                )
            )
        except RealTargetError as exc:
            raise TargetUnavailable(str(exc)) from exc
        process = await stack.enter_async_context(spawn_process(target.argv, cwd=target.cwd, env=target.env))
        connection: Any = process
        meta = {"codex": str(binary), "confinement": target.confinement, "transport": transport}
        if transport != "stdio":
            connection = await open_socket_transport(
                transport, process, target.codex_home.parent, socket_dir=target.socket_dir
            )
            if connection.failure:
                meta["connect_failure"] = connection.failure
        yield TargetRun(
            "real",
            connection,
            virtual_time=False,
            trace_root=trace_root,
            schema_release=target.schema_release or target.version,
            server_version=target.version,
            meta=meta,
            model_traffic=target.mock.traffic,
            workdir=target.workdir,
        )
