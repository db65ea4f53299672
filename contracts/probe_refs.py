"""Placeholders in probe steps and the files a probe scenario puts in the work directory (pure, no I/O).

A probe step's ``params`` (every string, at any depth) and ``raw`` line may name values known only when
the session runs: ``${thread}`` (the session's thread), ``${cwd}`` (the session's working directory on
the target) and ``${answer.<step>.<path>}`` (a value in the ``result`` of an earlier step's answer:
``<step>`` is the step's ``id`` or its 0-based index, ``<path>`` dot-separated keys and list indexes).
A string that is exactly one placeholder becomes the value (any JSON type); a placeholder inside a
longer string is replaced by the value's text. Any other ``${...}`` is refused at load, so a typo
never reaches the server verbatim.

Bounds (:data:`BOUNDS`, the table of docs/scenarios.md): what a step says is bounded at load, and what it
becomes once its placeholders are put in is bounded again when it is sent (:class:`TooLarge`). Only the
run can tell the second: an ``${answer...}`` is as large as the server made its answer (up to the
client's frame cap, so 64 of them can name gigabytes), ``${cwd}`` as long as the target's folder. The
values are measured before they are joined, so a step that would grow past the cap costs no more memory
than the cap and the answers already held.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any

import orjson

from contracts.exitcodes import InvalidInput

#: ``${name}`` or ``${answer.step.path}``: what a placeholder looks like (names checked by :func:`parse`).
PLACEHOLDER_RE = re.compile(r"\$\{([^{}]*)\}")
STEP_ID_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_-]{0,63}$")
_PATH_PART_RE = re.compile(r"^[A-Za-z0-9_/$-]{1,128}$")
MAX_REF_DEPTH = 16
MAX_PLACEHOLDERS = 64  # per step
#: A step's ``params`` as JSON, as written and after its placeholders are put in.
MAX_PARAMS_BYTES = 64 * 1024
#: Steps of one scenario.
MAX_PROBES = 200
#: A ``raw`` line, as written and after its placeholders are put in.
MAX_PROBE_LINE_BYTES = 64 * 1024
#: One step's ``wait_ms``, and every step's together: a scenario's probes never sleep longer than this.
MAX_PROBE_WAIT_MS = 60_000
MAX_PROBE_WAITS_MS = 120_000
MAX_FILES = 32
MAX_FILE_BYTES = 64 * 1024
MAX_FILE_PATH = 255
MAX_FILE_DEPTH = 8


#: The bounds of probe steps and files, as docs/scenarios.md lists them (generated: ``python -m contracts.faults``):
#: (what, bound, when it is checked).
BOUNDS: tuple[tuple[str, str, str], ...] = (
    ("`[[client.probe]]` steps", f"at most {MAX_PROBES}", "load"),
    ("a step's `wait_ms`", f"0 to {MAX_PROBE_WAIT_MS:,} ms", "load"),
    (
        "the `wait_ms` of all steps together",
        f"at most {MAX_PROBE_WAITS_MS:,} ms",
        "load (a scenario built in Python: the waits past it are cut, with a note)",
    ),
    ("placeholders in one step", f"at most {MAX_PLACEHOLDERS}", "load"),
    ("parts of an `${answer...}` path", f"at most {MAX_REF_DEPTH}", "load"),
    (
        "a step's `params` as JSON",
        f"at most {MAX_PARAMS_BYTES:,} bytes, as written and once its placeholders are put in",
        "load; when sent: the step is not sent and the session fails, naming the step",
    ),
    (
        "a `raw` line",
        f"one line of at most {MAX_PROBE_LINE_BYTES:,} bytes, as written and once its placeholders are put in",
        "load; when sent: as for `params`",
    ),
    ("`[[client.files]]`", f"at most {MAX_FILES}, each `text` at most {MAX_FILE_BYTES:,} bytes", "load"),
    ("a file's `path`", f"relative, 1 to {MAX_FILE_PATH} characters, at most {MAX_FILE_DEPTH} parts", "load"),
)


def bounds_table() -> str:
    """The probe bounds table of ``docs/scenarios.md`` (a test asserts the docs hold exactly this)."""
    lines = ["| what | bound | checked |", "|---|---|---|"]
    lines += [f"| {what} | {bound} | {when} |" for what, bound, when in BOUNDS]
    return "\n".join(lines) + "\n"


class RefError(InvalidInput, ValueError):
    """A placeholder that cannot be resolved (at load: malformed; at send time: not in the answers)."""


class TooLarge(RefError):
    """A step that grows past its cap once its placeholders are put in (known only when it is sent)."""


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


class _Budget:
    """Bytes a step may grow to: the template's size plus each value put in, counted before it is joined."""

    def __init__(self, limit: int | None, start: int, what: str) -> None:
        self.limit, self.used, self.what = limit, start, what

    def add(self, size: int, placeholder: str) -> None:
        self.used += size
        if self.limit is not None and self.used > self.limit:
            raise TooLarge(
                f"{self.what} grow past {self.limit} bytes when ${{{placeholder}}} is put in "
                f"(at least {self.used} bytes; the cap holds after expansion too)"
            )


def substitute(value: Any, resolve: Any, limit: int | None = None) -> Any:
    """``value`` with every placeholder replaced by ``resolve(placeholder)`` (which may raise RefError).

    ``limit``: the result as JSON is at most that many bytes, else :class:`TooLarge` (raised as soon as the
    values counted so far pass it: nothing larger than the cap is built)."""
    if limit is None:
        return _substitute(value, resolve, None)
    budget = _Budget(limit, len(orjson.dumps(value)), "its params")
    result = _substitute(value, resolve, budget)
    size = len(orjson.dumps(result))  # exact: the count above leaves out JSON escapes
    if size > limit:
        raise TooLarge(f"its params are {size} bytes once the placeholders are put in, more than {limit}")
    return result


def substitute_text(text: str, resolve: Any, limit: int | None = None) -> str:
    """A raw line with each placeholder replaced by its value's text; at most ``limit`` UTF-8 bytes, else
    :class:`TooLarge` (raised before a line past the cap is joined)."""
    budget = _Budget(limit, len(text.encode()), "its line would") if limit is not None else None
    result = _expand(text, resolve, budget)
    if limit is not None and len(result.encode()) > limit:
        raise TooLarge(f"its line is {len(result.encode())} bytes once the placeholders are put in, more than {limit}")
    return result


def _substitute(value: Any, resolve: Any, budget: _Budget | None) -> Any:
    if isinstance(value, str):
        whole = PLACEHOLDER_RE.fullmatch(value)
        if whole:
            found = resolve(parse(whole.group(1)))
            if budget is not None:
                budget.add(len(orjson.dumps(found)) - len(value) - 2, whole.group(1))
            return found
        return _expand(value, resolve, budget)
    if isinstance(value, dict):
        return {k: _substitute(v, resolve, budget) for k, v in value.items()}
    if isinstance(value, list):
        return [_substitute(v, resolve, budget) for v in value]
    return value


def _expand(text: str, resolve: Any, budget: _Budget | None) -> str:
    """``text`` with each placeholder replaced by its value's text, counted against ``budget`` first."""
    parts: list[str] = []
    end = 0
    for match in PLACEHOLDER_RE.finditer(text):
        piece = as_text(resolve(parse(match.group(1))))
        if budget is not None:
            budget.add(len(piece.encode()) - len(match.group(0)), match.group(1))
        parts += [text[end : match.start()], piece]
        end = match.end()
    if not parts:
        return text
    parts.append(text[end:])
    return "".join(parts)


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
