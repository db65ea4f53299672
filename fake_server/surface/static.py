"""Answers the release played gives the same way to every offline session (model list, config, skills...).

Its folder's ``answers.json`` (:mod:`contracts.releases`) holds them as recorded from the real binary, with
the run's paths as ``${cwd}`` / ``${codex_home}`` / ``${base_url}``; they are filled in per session
(:func:`fake_server.shapes.fill`). Read on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from contracts.releases import ReleaseError
from fake_server.shapes import fill

if TYPE_CHECKING:
    from fake_server.profiles import Profile


def answer(
    profile: Profile, key: str, *, cwd: str, codex_home: str, base_url: str = "http://127.0.0.1:0/v1"
) -> Any:
    """The recorded answer ``key`` of the release played, with this session's paths (a fresh copy each time)."""
    answers = profile.answers()
    if key not in answers:
        raise ReleaseError(f"release {profile.release}: answers.json has no recorded answer {key!r}")
    return fill(answers[key], {"cwd": cwd, "codex_home": codex_home, "base_url": base_url})


def keys(profile: Profile) -> frozenset[str]:
    return frozenset(profile.answers())
