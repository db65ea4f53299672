"""Finding scenarios: built-in names (the fake's catalogue), scenario files, and directories of them."""

from __future__ import annotations

import os
from pathlib import Path

from contracts import paths
from contracts.exitcodes import UsageError
from contracts.faults import transport_problem
from contracts.scenario import Scenario
from contracts.scenario_file import ScenarioError, load
from fake_server import profiles
from fake_server.catalogue import CATALOGUE_DIR, builtin_names, load_builtin

BUILTIN_DIR = CATALOGUE_DIR


def resolve(spec: str) -> Scenario:
    """A built-in name or a path to a scenario file. Unknown names and unreadable paths are usage errors
    (a FIFO, a directory or a device is named as what it is, and never opened); a file that is not a valid
    scenario raises :class:`ScenarioError` (naming file, key and expectation), a ``release`` the fake has no
    profile for included."""
    path = Path(spec)
    if spec.endswith(".toml") or "/" in spec or path.is_file():
        return profiles.playable(load(paths.require_file(path, "scenario file")))
    names = builtin_names()
    if spec in names:
        return load_builtin(spec)
    if os.path.lexists(spec):  # something of that name is here, but not a file: say what it is
        return profiles.playable(load(paths.require_file(path, "scenario file")))
    raise UsageError(f"unknown scenario {spec!r} (built-in: {', '.join(names) or 'none'})")


def scenario_files(directory: str | Path) -> list[Path]:
    """The ``*.toml`` files of ``directory``; none at all is a usage error (never a silent fallback)."""
    d = paths.require_dir(directory, "scenario directory")
    found = sorted(d.glob("*.toml"))
    if not found:
        raise UsageError(f"scenario directory {d} holds no scenario files (*.toml)")
    return found


def playable_over(scenarios: list[Scenario], transport: str) -> list[Scenario]:
    """The catalogue a client reaching the server over ``transport`` plays: a websocket fault (a refused upgrade,
    a close frame) never fires over stdio, so those scenarios are left out there, not judged as passed or
    failed (``run`` says which, once)."""
    return [s for s in scenarios if transport_problem({f.kind for f in s.faults}, transport) is None]


__all__ = [
    "BUILTIN_DIR",
    "ScenarioError",
    "builtin_names",
    "load_builtin",
    "playable_over",
    "resolve",
    "scenario_files",
]
