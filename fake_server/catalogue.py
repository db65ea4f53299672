"""The built-in scenario catalogue (``fake_server/scenarios/*.toml``, package data) and name-or-path resolution."""

from __future__ import annotations

from pathlib import Path

from contracts import scenario_file
from contracts.scenario import Scenario
from contracts.scenario_file import ScenarioError
from fake_server.profiles import playable

CATALOGUE_DIR = Path(__file__).resolve().parent / "scenarios"
DEFAULT_SCENARIO = "plain"


def builtin_names() -> list[str]:
    """Names of the built-in scenarios, sorted."""
    if not CATALOGUE_DIR.is_dir():
        return []
    return sorted(p.stem for p in CATALOGUE_DIR.glob("*.toml"))


def load_builtin(name: str) -> Scenario:
    path = CATALOGUE_DIR / f"{name}.toml"
    if "/" in name or "\\" in name or not path.is_file():
        known = ", ".join(builtin_names()) or "none"
        raise ScenarioError(name, "(name)", f"a built-in scenario ({known})")
    return playable(scenario_file.load(path))


def model_level() -> list[Scenario]:
    """The built-in scenarios both the fake and the real binary can play (no fake-only fault), by name."""
    scenarios = (load_builtin(name) for name in builtin_names())
    return [s for s in scenarios if s.supports("real")[0] and s.supports("fake")[0]]


def resolve(name_or_path: str | Path | None) -> Scenario:
    """A catalogue name (``plain``), or a path to a scenario file; None gives ``plain``."""
    if name_or_path is None or name_or_path == "":
        return load_builtin(DEFAULT_SCENARIO)
    text = str(name_or_path)
    path = Path(text)
    looks_like_path = path.suffix == ".toml" or "/" in text or "\\" in text
    if not looks_like_path and (CATALOGUE_DIR / f"{text}.toml").is_file():
        return load_builtin(text)
    if path.is_file():
        return playable(scenario_file.load(path))
    if looks_like_path:
        raise ScenarioError(text, "(file)", "a readable scenario file")
    known = ", ".join(builtin_names()) or "none"
    raise ScenarioError(text, "(name)", f"a built-in scenario name ({known}) or a path to a .toml file")
