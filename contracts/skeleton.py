"""Skeletons of JSON answers: what two answers to the same request must share to be "structurally equal".

A skeleton keeps the key set of every object, the JSON type of every value, where the nulls are,
and whether each array is empty; the elements of a non-empty array are kept as the set of their
distinct skeletons (a list of 30 models and a list of 3 of the same shape are equal; a list whose
entries lack a key is not). An error answer keeps its code and its message, with the listed ids
and paths normalised. Pure: values in, skeletons and differences out.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any, Final

UUID_RE: Final = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")

Skeleton = Any


def skeleton(value: Any) -> Skeleton:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        if not value:
            return "[]"
        return ("array", tuple(sorted({_key(skeleton(v)) for v in value})))
    if isinstance(value, dict):
        # Maps keyed by ids (thread/list's readStates) keep their shape, not their keys.
        pairs = ((UUID_RE.sub("<id>", str(k)), skeleton(v)) for k, v in value.items())
        return ("object", tuple(sorted(pairs, key=lambda kv: (kv[0], _key(kv[1])))))
    return ("unknown", type(value).__name__)


def _key(s: Skeleton) -> Any:
    # Skeletons mix strings and tuples; repr gives a total order for the set above.
    return s if isinstance(s, str) else repr(s)


def normalise_message(message: str, paths: Iterable[tuple[str, str]] = ()) -> str:
    """Ids as ``<id>``, the listed host paths (``(path, placeholder)``) as their placeholders."""
    for path, placeholder in sorted(paths, key=lambda p: -len(p[0])):
        if path:
            message = message.replace(path, placeholder)
    return UUID_RE.sub("<id>", message)


def answer_skeleton(frame: dict[str, Any], paths: Iterable[tuple[str, str]] = ()) -> Skeleton:
    """The skeleton of a response frame: its result's, or ("error", code, message, data skeleton)."""
    error = frame.get("error")
    if isinstance(error, dict):
        message = error.get("message")
        text = normalise_message(message, paths) if isinstance(message, str) else message
        return ("error", error.get("code"), text, skeleton(error.get("data")))
    return ("result", skeleton(frame.get("result")))


def differences(expected: Skeleton, actual: Skeleton, where: str = "$") -> list[str]:
    """Where two skeletons differ, as JSON-path-like lines (empty when equal)."""
    if expected == actual:
        return []
    if isinstance(expected, tuple) and isinstance(actual, tuple) and expected[:1] == actual[:1] == ("object",):
        left, right = dict(expected[1]), dict(actual[1])
        out = [f"{where}.{k}: missing" for k in sorted(left.keys() - right.keys())]
        out += [f"{where}.{k}: unexpected" for k in sorted(right.keys() - left.keys())]
        for k in sorted(left.keys() & right.keys()):
            out += differences(left[k], right[k], f"{where}.{k}")
        return out
    if isinstance(expected, tuple) and isinstance(actual, tuple) and expected[:1] == actual[:1]:
        if expected[0] in ("result",):
            return differences(expected[1], actual[1], where)
        if expected[0] == "array" and len(expected[1]) == len(actual[1]) == 1:
            return differences(_unkey(expected[1][0]), _unkey(actual[1][0]), f"{where}[]")
    return [f"{where}: expected {_short(expected)}, got {_short(actual)}"]


def _unkey(s: Any) -> Skeleton:
    if isinstance(s, str) and s.startswith("("):
        import ast

        return ast.literal_eval(s)
    return s


def _short(s: Skeleton) -> str:
    text = repr(s)
    return text if len(text) <= 160 else text[:157] + "..."
