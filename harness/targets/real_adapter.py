"""The ``real`` target for the runner: :func:`harness.targets.real.real_target` + the process transport."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path

from contracts.scenario import Scenario
from harness.codex_bin import CodexNotFound, find_codex
from harness.targets.base import TargetRun, TargetUnavailable


def select_codex(codex: Path | None) -> Path:
    try:
        path = find_codex(codex, use_path=False)
    except CodexNotFound as exc:
        raise TargetUnavailable(str(exc)) from exc
    if path is None:
        raise TargetUnavailable("no real codex selected (use --codex PATH or CODEX_BIN)")
    return path


@asynccontextmanager
async def real(scenario: Scenario, *, work_dir: Path, codex: Path | None) -> AsyncIterator[TargetRun]:
    try:
        from harness.targets.real import RealTargetError, real_target
    except ImportError as exc:
        raise TargetUnavailable(f"the real target is not available: {exc}") from exc
    from harness.client.process import spawn_process

    binary = select_codex(codex)
    trace_root = work_dir / "server-trace-root"
    trace_root.mkdir(parents=True, exist_ok=True)
    async with AsyncExitStack() as stack:
        try:
            target = await stack.enter_async_context(
                real_target(scenario, binary, trace_root=trace_root, base_dir=work_dir)
            )
        except RealTargetError as exc:
            raise TargetUnavailable(str(exc)) from exc
        transport = await stack.enter_async_context(spawn_process(target.argv, cwd=target.cwd, env=target.env))
        yield TargetRun(
            "real",
            transport,
            virtual_time=False,
            trace_root=trace_root,
            schema_release=target.schema_release or target.version,
            server_version=target.version,
            meta={"codex": str(binary)},
        )
