"""Reading decoded JSON that any peer may have sent: a value is used as an object only when it is one."""

from __future__ import annotations

from typing import Any


def as_object(value: object) -> dict[str, Any]:
    """``value`` when it is a JSON object (a dict), else an empty one: a field that is missing, null or of another
    type reads as an object with no members, so a frame's shape never raises in the code that looks into it."""
    return value if isinstance(value, dict) else {}
