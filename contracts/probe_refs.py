"""Placeholders in probe steps and the files a probe scenario puts in the work directory (pure, no I/O).

A probe step's ``params`` (every string, at any depth) and ``raw`` line may name values known only when
the session runs: ``${thread}`` (the session's thread), ``${cwd}`` (the session's working directory on
the target) and ``${answer.<step>.<path>}`` (a value in the ``result`` of an earlier step's answer:
``<step>`` is the step's ``id`` or its 0-based index, ``<path>`` dot-separated keys and list indexes).
A string that is exactly one placeholder becomes the value (any JSON type); a placeholder inside a
longer string is replaced by the value's text. Any other ``${...}`` is refused at load, so a typo
never reaches the server verbatim.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any

#: ``${name}`` or ``${answer.step.path}``: what a placeholder looks like (names checked by :func:`parse`).
PLACEHOLDER_RE = re.compile(r"\$\{([^{}]*)\}")
STEP_ID_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_-]{0,63}$")
_PATH_PART_RE = re.compile(r"^[A-Za-z0-9_/$-]{1,128}$")
MAX_REF_DEPTH = 16
MAX_PLACEHOLDERS = 64  # per step
MAX_PARAMS_BYTES = 64 * 1024
MAX_FILES = 32
MAX_FILE_BYTES = 64 * 1024
MAX_FILE_PATH = 255
MAX_FILE_DEPTH = 8


class RefError(ValueError):
    """A placeholder that cannot be resolved (at load: malformed; at send time: not in the answers)."""


@dataclass(frozen=True, slots=True)
class AnswerRef:
    step: str  # the step's id, or its index as digits
    path: tuple[str | int, ...]


def parse(text: str) -> str | AnswerRef:
    """The placeholder inside ``${...}``: ``"thread"``, ``"cwd"`` or an :class:`AnswerRef`."""
    if text in ("thread", "cwd"):
        return text
    parts = text.split(".")
    if parts[0] != "answer" or len(parts) < 3:
        raise RefError(f"unknown placeholder ${{{text}}} (known: ${{thread}}, ${{cwd}}, ${{answer.<step>.<path>}})")
    step, path = parts[1], parts[2:]
    if not (step.isdigit() or STEP_ID_RE.match(step)):
        raise RefError(f"${{{text}}}: the step is a probe id or a 0-based index, got {step!r}")
    if len(path) > MAX_REF_DEPTH:
        raise RefError(f"${{{text}}}: at most {MAX_REF_DEPTH} path parts")
    for part in path:
        if not _PATH_PART_RE.match(part):
            raise RefError(f"${{{text}}}: path part {part!r} is not a key or an index")
    return AnswerRef(step, tuple(int(p) if p.isdigit() else p for p in path))


def placeholders(value: Any) -> list[str | AnswerRef]:
    """Every placeholder in ``value`` (strings at any depth); :class:`RefError` on a malformed one."""
    found: list[str | AnswerRef] = []
    if isinstance(value, str):
        found.extend(parse(m.group(1)) for m in PLACEHOLDER_RE.finditer(value))
        if "${" in PLACEHOLDER_RE.sub("", value):
            raise RefError(f"an unclosed ${{ in {value[:80]!r}")
    elif isinstance(value, dict):
        for v in value.values():
            found.extend(placeholders(v))
    elif isinstance(value, list):
        for v in value:
            found.extend(placeholders(v))
    return found


def lookup(answer: Any, ref: AnswerRef) -> Any:
    """The value at ``ref.path`` in ``answer`` (a step's result); :class:`RefError` naming where it stopped."""
    value = answer
    for depth, part in enumerate(ref.path):
        where = ".".join(str(p) for p in ref.path[: depth + 1])
        if isinstance(value, dict) and isinstance(part, str) and part in value:
            value = value[part]
        elif isinstance(value, dict) and isinstance(part, int) and str(part) in value:
            value = value[str(part)]
        elif isinstance(value, list) and isinstance(part, int) and part < len(value):
            value = value[part]
        else:
            raise RefError(f"the answer of step {ref.step} has no {where}")
    return value


def substitute(value: Any, resolve: Any) -> Any:
    """``value`` with every placeholder replaced by ``resolve(placeholder)`` (which may raise RefError)."""
    if isinstance(value, str):
        whole = PLACEHOLDER_RE.fullmatch(value)
        if whole:
            return resolve(parse(whole.group(1)))
        return PLACEHOLDER_RE.sub(lambda m: as_text(resolve(parse(m.group(1)))), value)
    if isinstance(value, dict):
        return {k: substitute(v, resolve) for k, v in value.items()}
    if isinstance(value, list):
        return [substitute(v, resolve) for v in value]
    return value


def as_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, bool) or value is None:
        return {True: "true", False: "false", None: "null"}[value]
    if isinstance(value, int | float):
        return str(value)
    raise RefError(f"a {type(value).__name__} cannot be put inside a string")


def check_file_path(path: str) -> str | None:
    """Why ``path`` cannot name a file in the work directory, or None when it can."""
    if not path or len(path) > MAX_FILE_PATH:
        return f"a relative path of 1 to {MAX_FILE_PATH} characters"
    if "\\" in path or "\x00" in path or any(ord(c) < 32 for c in path):
        return "a path without backslashes or control characters"
    pure = PurePosixPath(path)
    if pure.is_absolute():
        return "a relative path (inside the work directory)"
    parts = path.split("/")
    if any(p in ("", ".", "..") for p in parts):
        return "a path whose parts are names (no '', '.', '..': it cannot leave the work directory)"
    if len(parts) > MAX_FILE_DEPTH:
        return f"a path at most {MAX_FILE_DEPTH} folders deep"
    return None
