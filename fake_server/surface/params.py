"""Params of a surface method checked against the pinned schema before its handler runs.

The real server deserializes params with serde and refuses a wrong type with ``-32600 Invalid request:
invalid type: <what came>, expected <what it wanted>``. The fake checks the request against the
pinned (experimental) schema of the release played on first use of each method and words the first violation that way
(the ``expected`` part is the schema's wording, not serde's); the handlers then only see
well-typed params. Loaded lazily, so ``fake-codex`` starts without the schema bundle.
"""

from __future__ import annotations

import json
from typing import Any

from fake_server.serde_words import json_type


def _validator(release: str) -> Any:
    from contracts.validator import Validator

    return Validator.for_release(release, experimental=True)


def _at(frame: Any, pointer: str) -> Any:
    value = frame
    for part in pointer.split("/")[1:]:
        if isinstance(value, dict):
            value = value.get(part)
        elif isinstance(value, list) and part.isdigit() and int(part) < len(value):
            value = value[int(part)]
        else:
            return None
    return value


def problem(release: str, frame: dict[str, Any]) -> str | None:
    """The ``Invalid request: ...`` message for a request ``release``'s schema rejects, or None."""
    try:
        violations = _validator(release).validate(frame, "c2s")
    except Exception:  # no pinned schema: the fake is only less strict
        return None
    if not violations:
        return None
    first = violations[0]
    value = _at(frame, first.path)
    if first.kind == "type" and first.path == "/params" and first.expected == "null":
        # A variant without params is serde's unit: it takes an empty map as well as null, and words any other
        # value as not a unit (observed on the releases recorded).
        if value == {}:
            return None
        return f"Invalid request: invalid type: {json_type(value)}, expected unit"
    if first.kind == "required":
        return f"Invalid request: missing field `{first.path.rsplit('/', 1)[-1]}`"
    if first.kind == "enum" and isinstance(value, str):
        try:
            listed = ", ".join(f"`{v}`" for v in json.loads(first.expected.removeprefix("one of ")))
        except ValueError:
            listed = first.expected
        return f"Invalid request: unknown variant `{value}`, expected one of {listed}"
    if first.kind == "type":
        expected = _SERDE_EXPECTED.get(first.expected, first.expected)
        return f"Invalid request: invalid type: {json_type(value)}, expected {expected}"
    return f"Invalid request: {first.message}"


#: serde's words for what it wanted, by the schema's type name.
_SERDE_EXPECTED = {"string": "a string", "boolean": "a boolean", "array": "a sequence", "object": "a map"}
