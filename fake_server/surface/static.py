"""Answers 0.171.0 gives the same way to every offline session (model list, config, skills...).

``data/answers.json`` holds them as recorded from the real binary (tests/data/real/0.171.0/probes),
with the run's paths as ``${cwd}`` / ``${codex_home}`` / ``${base_url}``; they are filled in per
session. Loaded on first use.
"""

from __future__ import annotations

import copy
import functools
import json
from importlib import resources
from typing import Any


@functools.cache
def _answers() -> dict[str, Any]:
    text = resources.files("fake_server.surface").joinpath("data/answers.json").read_text(encoding="utf-8")
    return json.loads(text)


def _fill(value: Any, tokens: dict[str, str]) -> Any:
    if isinstance(value, str):
        for token, replacement in tokens.items():
            if token in value:
                value = value.replace(token, replacement)
        return value
    if isinstance(value, list):
        return [_fill(v, tokens) for v in value]
    if isinstance(value, dict):
        return {k: _fill(v, tokens) for k, v in value.items()}
    return value


def answer(key: str, *, cwd: str, codex_home: str, base_url: str = "http://127.0.0.1:0/v1") -> Any:
    """The recorded answer ``key`` with this session's paths (a fresh copy each time)."""
    recorded = copy.deepcopy(_answers()[key])
    return _fill(recorded, {"${cwd}": cwd, "${codex_home}": codex_home, "${base_url}": base_url})


def keys() -> frozenset[str]:
    return frozenset(_answers())
