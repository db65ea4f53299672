"""The two fake targets: the engine in process (under the caller's clock) and ``fake-codex app-server``."""

from __future__ import annotations

import shutil
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from fake_server.scenario import Scenario
from fake_server.scenario_file import dump
from harness.targets import TargetRun, TargetUnavailable

TRACE_ROOT_ENV = "CODEX_ROLLOUT_TRACE_ROOT"


class _WholeChunkReader:
    """The in-process server's transport, read a whole chunk at a time and handed out by offset.

    The server's ``receive(max_bytes)`` re-slices its leftover on every call, which is quadratic for a
    40 MiB line (``oversized_line``: ~25 s instead of milliseconds). Reading each chunk whole and
    slicing a memoryview here gives the client the same bytes in the same ``max_bytes`` pieces.
    """

    _WHOLE = 1 << 40

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self._chunk = memoryview(b"")
        self._pos = 0

    async def receive(self, max_bytes: int = 65536) -> bytes:
        if self._pos >= len(self._chunk):
            data = await self._inner.receive(self._WHOLE)
            if not data:
                return b""
            self._chunk, self._pos = memoryview(data), 0
        piece = bytes(self._chunk[self._pos : self._pos + max_bytes])
        self._pos += len(piece)
        return piece

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


@asynccontextmanager
async def in_process(scenario: Scenario, *, work_dir: Path) -> AsyncIterator[TargetRun]:
    try:
        from fake_server.inprocess import serve_in_process
    except ImportError as exc:
        raise TargetUnavailable(f"the in-process fake is not available: {exc}") from exc
    trace_root = work_dir / "server-trace-root"
    trace_root.mkdir(parents=True, exist_ok=True)
    async with serve_in_process(scenario, trace_root=trace_root) as server:
        yield TargetRun(
            "fake", _WholeChunkReader(server), virtual_time=True, trace_root=trace_root, server_version="0.171.0"
        )


def fake_codex_argv() -> list[str]:
    """``fake-codex`` next to this interpreter (the venv's script), else ``python -m fake_server.cli``."""
    script = Path(sys.executable).parent / "fake-codex"
    if script.exists():
        return [str(script)]
    found = shutil.which("fake-codex")
    return [found] if found else [sys.executable, "-m", "fake_server.cli"]


@asynccontextmanager
async def fake_process(
    scenario: Scenario, *, work_dir: Path, scenario_file: Path | None = None
) -> AsyncIterator[TargetRun]:
    from harness.client.process import child_environment, spawn_process

    if scenario_file is None:
        scenario_file = Path(scenario.source) if scenario.source and Path(scenario.source).is_file() else None
    if scenario_file is None:  # a scenario built in Python: the process reads it from a file
        scenario_file = dump(scenario, work_dir / f"{scenario.name}.toml")
    trace_root = work_dir / "server-trace-root"
    trace_root.mkdir(parents=True, exist_ok=True)
    env = child_environment(None)
    env[TRACE_ROOT_ENV] = str(trace_root)
    argv = [*fake_codex_argv(), "app-server", "--scenario", str(scenario_file)]
    async with spawn_process(argv, cwd=work_dir, env=env) as transport:
        yield TargetRun(
            "fake-process",
            transport,
            virtual_time=False,
            trace_root=trace_root,
            server_version="0.171.0",
            meta={"argv": argv},
        )
