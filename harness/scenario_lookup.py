"""Finding scenarios: built-in names (the fake's catalogue), scenario files, and directories of them."""

from __future__ import annotations

from pathlib import Path

from fake_server.scenario import Scenario
from fake_server.scenario_file import ScenarioError, load
from harness.exitcodes import UsageError

BUILTIN_DIR = Path(__file__).resolve().parent.parent / "conformance" / "scenarios"


def builtin_names() -> list[str]:
    try:
        from fake_server.catalogue import builtin_names as catalogue_names
    except ImportError:  # the catalogue module is optional: the files are the catalogue
        return sorted(p.stem for p in BUILTIN_DIR.glob("*.toml"))
    return list(catalogue_names())


def load_builtin(name: str) -> Scenario:
    try:
        from fake_server.catalogue import load_builtin as catalogue_load
    except ImportError:
        return load(BUILTIN_DIR / f"{name}.toml")
    return catalogue_load(name)


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
