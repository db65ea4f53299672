"""Targets a scenario runs against: ``fake`` (in-process, virtual time), ``fake-process`` (``fake-codex
app-server`` over stdio) and ``real`` (``codex app-server`` + the mock Responses API).

A target is an async context manager that yields a :class:`TargetRun`: the transport the client talks
to, whether its clock is virtual, where the server writes its trace, and the release to validate
against. :func:`open_target` picks one by name.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from contracts.scenario import Scenario
from harness.targets.base import TARGET_NAMES, TargetRun, TargetUnavailable

if TYPE_CHECKING:
    from fake_server.profiles import Profile

__all__ = ["TARGET_NAMES", "TargetRun", "TargetUnavailable", "open_target"]


@asynccontextmanager
async def open_target(
    name: str,
    scenario: Scenario,
    *,
    work_dir: Path,
    codex: Path | None = None,
    scenario_file: Path | None = None,
    release: str | Profile | None = None,
    transport: str = "stdio",
) -> AsyncIterator[TargetRun]:
    """``release``: the profile a fake plays (fake_server.profiles) before its other sources; None: theirs.
    ``transport``: how the client reaches the server: ``stdio``, ``ws`` or ``unix`` (the server is started with
    ``--listen ws://127.0.0.1:0`` or ``--listen unix://PATH`` and our client connects); the in-process fake also
    serves ``messages``."""
    if name == "fake":
        from harness.targets.fake import in_process

        async with in_process(scenario, work_dir=work_dir, release=release, transport=transport) as run:
            yield run
    elif name == "fake-process":
        from harness.targets.fake import fake_process

        if release is not None and not isinstance(release, str):  # a profile object lives in this process only
            raise TargetUnavailable("fake-process plays a release by its name, not a profile object")
        async with fake_process(
            scenario, work_dir=work_dir, scenario_file=scenario_file, release=release, transport=transport
        ) as run:
            yield run
    elif name == "real":
        from harness.targets.real_adapter import real

        async with real(scenario, work_dir=work_dir, codex=codex, transport=transport) as run:
            yield run
    else:
        raise TargetUnavailable(f"unknown target {name!r} (known: {', '.join(TARGET_NAMES)})")
