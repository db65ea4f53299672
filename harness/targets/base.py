"""What every target yields, and how a target says it cannot run (shared by the target modules)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from contracts.exitcodes import InternalError
from contracts.releases import default_version

TARGET_NAMES: tuple[str, ...] = ("fake", "fake-process", "real")


class TargetUnavailable(InternalError):
    """The target cannot run here (no binary, not built yet); ``str()`` says why."""


@dataclass(slots=True)
class TargetRun:
    name: str
    transport: Any  # contracts.transport.Transport: its stream, and its process (None: a socket, no process)
    virtual_time: bool
    trace_root: Path | None
    schema_release: str = field(default_factory=default_version)  # default: the default release
    server_version: str | None = None
    #: the switches of the release profile played (a fake knows its own); None: read from the release's folder
    switches: dict[str, Any] | None = None
    meta: dict[str, Any] = field(default_factory=dict)
    #: the mock Responses API's traffic timeline (real target), live: the runner copies it into the record
    model_traffic: list[dict[str, Any]] | None = None
    #: (turn index, fault index, lines the server had written, lines it had read) of the scripted faults that
    #: struck, read once the server is gone (fakes only; None: the target cannot tell, and the
    #: ``fault_not_struck`` check is not made)
    faults_struck: Callable[[], list[tuple[int, ...]]] | None = None
    #: the session's working directory on the target (``${cwd}`` of probe steps; ``[[client.files]]`` are in it)
    workdir: Path | None = None


def write_files(workdir: Path, files: Any) -> Path:
    """Put the scenario's ``[[client.files]]`` (validated at load: relative, inside, bounded) in ``workdir``."""
    workdir.mkdir(parents=True, exist_ok=True)
    for file in files:
        target = workdir / file.path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(file.text)
    return workdir
