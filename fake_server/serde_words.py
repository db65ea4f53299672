"""How the real server words an unexpected JSON value (serde's ``invalid type: ...`` messages)."""

from __future__ import annotations

from typing import Any


def json_type(value: Any) -> str:
    """serde's wording for an unexpected value: ``integer `5```, ``string "x"``, ``null``, ``sequence``..."""
    if isinstance(value, bool):
        return f"boolean `{'true' if value else 'false'}`"
    if isinstance(value, int):
        return f"integer `{value}`"
    if isinstance(value, float):
        return f"floating point `{value}`"
    if isinstance(value, str):
        return f'string "{value}"'
    if value is None:
        return "null"
    return "sequence" if isinstance(value, list) else "map"
