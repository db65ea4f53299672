"""A baseline a person can review: the known failures as TOML, one id a line, each with its detail as a comment.

``codex-harness baseline OUT/`` writes it from a run's ``checks.json``; ``--baseline FILE`` reads it (and the
older JSON form, a list of objects or a whole ``checks.json``). An id is ``scenario [target] / contract / check``
(the check's name may itself hold `` / ``: it is everything after the second separator); a line
``scenario [target] / contract`` (no check) lists every check of that contract. The file is small (one line per
failure) where a ``checks.json`` holds every check of the run.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Iterable

from contracts import bounded_parse
from contracts.checks.base import Check
from contracts.exitcodes import UsageError
from contracts.text import one_line

HEADER = """\
# Known failures: a run with --baseline THIS_FILE does not fail on them, and fails on any other
# (and on an entry that no longer fails: remove it). One id a line: "scenario [target] / contract / check".
# Regenerate from a run's report folder: codex-harness baseline REPORT_DIR > {name}
"""
_ID = re.compile(r"^(?P<scenario>[^\[\]]+?) \[(?P<target>[^\[\]]+)\] / (?P<contract>[^/]+?)(?: / (?P<name>.+))?$")
MAX_NESTING = 4  # a baseline is a table of one list of strings: anything deeper is not one


def check_id(check: Check) -> str:
    name = f" / {check.name}" if check.name else ""
    return f"{check.scenario} [{check.target}] / {check.contract}{name}"


def baseline_toml(checks: Iterable[Check], *, name: str = "known-failures.toml") -> str:
    """The failing checks as a TOML baseline, sorted, each id under a comment with its level and detail."""
    failing = sorted((c for c in checks if c.status == "fail"), key=lambda c: (c.scenario, c.target, check_id(c)))
    lines = [HEADER.format(name=name), "failures = ["]
    for c in failing:
        lines.append(f"    # {c.level}: {one_line(c.detail, 300)}")
        lines.append(f"    {_toml_string(check_id(c))},")
    lines.append("]")
    return "\n".join(lines) + "\n"


def parse_baseline_toml(text: str, source: str) -> list[tuple[str, str, str, str | None]]:
    """``(scenario, target, contract, name or None)`` per id; a malformed file is a usage error naming it."""
    if _nesting(text) > MAX_NESTING:  # tomllib recurses per nested array: refuse depth before parsing
        raise UsageError(f"baseline {source}: nested deeper than a baseline is")
    try:
        data = bounded_parse.loads_toml(text, MAX_NESTING)
    except bounded_parse.TooDeep:
        raise UsageError(f"baseline {source}: nested deeper than a baseline is") from None
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"baseline {source} is neither JSON nor TOML: {exc}") from None
    ids = data.get("failures")
    if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
        raise UsageError(f"baseline {source}: expected failures = [\"scenario [target] / contract / check\", ...]")
    out = []
    for i, text_id in enumerate(ids):
        m = _ID.match(text_id)
        if m is None:
            raise UsageError(
                f"baseline {source}: failures[{i}] {one_line(text_id, 200)!r} is not \"scenario [target] / contract"
                " / check\""
            )
        out.append((m["scenario"], m["target"], m["contract"], m["name"]))
    return out


def _nesting(text: str) -> int:
    """How deep ``[`` and ``{`` nest outside strings and comments (an over-estimate is safe: it only refuses)."""
    depth = deepest = 0
    quote = ""
    comment = False
    for ch in text:
        if comment:
            comment = ch != "\n"
        elif quote:
            if ch == quote:
                quote = ""
        elif ch in "\"'":
            quote = ch
        elif ch == "#":
            comment = True
        elif ch in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif ch in "]}":
            depth = max(0, depth - 1)
        elif ch == "\n" and depth == 0:
            pass
    return deepest


def _toml_string(text: str) -> str:
    """A TOML basic string: backslash, quote and every control character escaped."""
    out = []
    for ch in text:
        if ch in '"\\':
            out.append("\\" + ch)
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'
