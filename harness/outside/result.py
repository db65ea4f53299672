"""The result file an adapter may write (``CODEX_HARNESS_RESULT``), validated against the shipped schema.

``result.schema.json`` (package data next to this module) is the contract: per turn the status the client
reported (``completed|aborted|failed|timeout|unsupported``), its usage in the buckets of
docs/scenarios.md, the final text and the error. A status ``unsupported`` says the client cannot do what the
plan asks (a decision it has no way to send): that turn's status and plan are not judged. Usage is judged
only where the client reported it: ``null`` (or no ``usage``) says the client reports none, ``"unsupported"``
that it has no way to; either is not judged, with that reason, never taken as zeros. ``usage_style`` says how
the client counts (docs/client-rules.md §4.4); a bucket ``null`` (``cache_read``, ``cache_write``,
``reasoning``) is one the client does not expose, not judged. A turn's ``unsupported`` list names one part of
its plan the client cannot do (``{"action": N}``, ``{"approval": N}``): that part is not judged, the rest of the
turn is.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

import orjson

from contracts import bounded_parse, safe_read
from contracts.record import TurnResult
from contracts.usage import UsageBuckets

#: A turn's final text may be as large as a legal agent message (a 16 MiB one is a built-in scenario).
MAX_RESULT_BYTES = 64 * 1024 * 1024
SCHEMA_NAME = "result.schema.json"


@cache
def result_schema() -> dict[str, Any]:
    text = resources.files("harness.outside").joinpath(SCHEMA_NAME).read_bytes()
    return orjson.loads(text)


@cache
def _validator() -> Any:
    """The schema's validator, with ``integer`` meaning a JSON integer: JSON Schema calls 1.0 an integer (and
    Python calls True one); the contracts index turns by it, so every other value is refused."""
    import jsonschema

    checker = jsonschema.Draft202012Validator.TYPE_CHECKER.redefine("integer", lambda _checker, v: type(v) is int)
    strict = jsonschema.validators.extend(jsonschema.Draft202012Validator, type_checker=checker)
    return strict(result_schema())


@dataclass(slots=True)
class ReadResult:
    """``state``: ``absent`` (no file), ``invalid`` (problems say why) or ``valid``."""

    state: str
    problems: list[str] = field(default_factory=list)
    turns: list[dict[str, Any]] = field(default_factory=list)
    client: str | None = None
    usage_style: dict[str, str] = field(default_factory=dict)


def read_result(path: Path, *, parent_fd: int | None = None) -> ReadResult:
    """Read and validate the result file; never raises for a bad file (a bad file is a finding).

    Read with the bounded reader: a link (``/dev/zero``), a FIFO or a file over :data:`MAX_RESULT_BYTES` is
    an invalid result naming what it is, never followed, waited on or read whole. ``parent_fd``: the held
    directory the file is in (its name is opened there)."""
    try:
        if parent_fd is None:
            data_bytes = safe_read.read_bounded(path, MAX_RESULT_BYTES)
        else:
            data_bytes = safe_read.read_bounded(path.name, MAX_RESULT_BYTES, dir_fd=parent_fd, shown=path)
    except FileNotFoundError:
        return ReadResult("absent")
    except OSError as exc:
        return ReadResult("invalid", [safe_read.explain(path.name, exc)])
    try:
        data = bounded_parse.loads_json(data_bytes)
    except orjson.JSONDecodeError as exc:
        return ReadResult("invalid", [f"{path.name} is not JSON: {exc}"])
    problems = [
        f"{'/'.join(str(p) for p in e.absolute_path) or '(root)'}: {e.message[:200]}"
        for e in sorted(_validator().iter_errors(data), key=lambda e: list(e.absolute_path))[:5]
    ]
    if problems:
        return ReadResult("invalid", problems)
    turns = data["turns"]
    seen = [t["turn"] for t in turns]
    if len(seen) != len(set(seen)):
        return ReadResult("invalid", [f"a turn is reported twice: {seen}"])
    return ReadResult("valid", [], list(turns), data.get("client"), dict(data.get("usage_style") or {}))


def turn_results(read: ReadResult) -> list[TurnResult]:
    """The reported turns as Results for the terminal-status and usage contracts.

    A turn reported ``unsupported`` keeps that status (its status checks are not judged) and its usage when
    it reported some; a usage the client did not report is marked not judged with the reason."""
    out = []
    for t in read.turns:
        usage = t.get("usage")
        exposed = {k: v for k, v in usage.items() if v is not None} if isinstance(usage, dict) else None
        buckets = {"reported": UsageBuckets.from_dict(exposed)} if exposed is not None else {}
        out.append(
            TurnResult(
                index=t["turn"] - 1,
                status=t["status"],
                error=t.get("error"),
                turn_id=t.get("turn_id"),
                final_text=t.get("final_text") or "",
                usage={k: v for k, v in buckets.items() if not v.is_zero()},
                usage_unjudged=None if isinstance(usage, dict) else _why_no_usage(t),
                usage_style=dict(read.usage_style),
                usage_unexposed=sorted(k for k, v in usage.items() if v is None) if isinstance(usage, dict) else [],
                unsupported=unsupported_parts(t),
                # What the client read is its own: the server having sent turn/completed says nothing of it.
                completed_consumed=None,
            )
        )
    return out


def unsupported_parts(turn: dict[str, Any]) -> list[str]:
    """A reported turn's ``unsupported`` parts as ``action N`` / ``approval N``, with the client's reason."""
    out = []
    for part in turn.get("unsupported") or ():
        if not isinstance(part, dict):
            continue
        kind = "action" if "action" in part else "approval"
        why = f": {part['why']}" if isinstance(part.get("why"), str) and part["why"] else ""
        out.append(f"{kind} {part.get(kind)}{why}")
    return out


def _why_no_usage(turn: dict[str, Any]) -> str:
    if turn["status"] == "unsupported":
        return f"reported unsupported: {turn.get('error') or 'the client cannot do what the plan asks'}"
    if turn.get("usage") == "unsupported":
        return "the client reported its usage unsupported (it has no way to report usage)"
    if "usage" in turn:
        return "the client reports no usage for this turn (usage null)"
    return "the client reports no usage for this turn (no usage in the result file)"
