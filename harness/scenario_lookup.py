"""Finding scenarios: built-in names (the fake's catalogue), scenario files, and directories of them."""

from __future__ import annotations

from pathlib import Path

from contracts.exitcodes import UsageError
from contracts.scenario import Scenario
from contracts.scenario_file import ScenarioError, load
from fake_server.catalogue import CATALOGUE_DIR, builtin_names, load_builtin

BUILTIN_DIR = CATALOGUE_DIR


def resolve(spec: str) -> Scenario:
    """A built-in name or a path to a scenario file. Unknown names and unreadable files are usage errors;
    a file that is not a valid scenario raises :class:`ScenarioError` (naming file, key and expectation)."""
    path = Path(spec)
    if spec.endswith(".toml") or path.is_file() or "/" in spec:
        if not path.is_file():
            raise UsageError(f"scenario file {spec} does not exist")
        return load(path)
    names = builtin_names()
    if spec not in names:
        raise UsageError(f"unknown scenario {spec!r} (built-in: {', '.join(names) or 'none'})")
    return load_builtin(spec)


def scenario_files(directory: str | Path) -> list[Path]:
    d = Path(directory)
    if not d.is_dir():
        raise UsageError(f"scenario directory {d} does not exist")
    return sorted(d.glob("*.toml"))


__all__ = ["BUILTIN_DIR", "ScenarioError", "builtin_names", "load_builtin", "resolve", "scenario_files"]
