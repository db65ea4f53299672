"""A minimal answer the pinned schema accepts, for methods the real binary only answers with a model or an account.

Built from the method's response schema on first use (the schema bundle is loaded lazily, so
``fake-codex`` starts without it): required properties only, ``null`` where the schema allows it,
empty arrays and maps, the first value of an enum, the first branch of a union that yields a value.
"""

from __future__ import annotations

import functools
from typing import Any

_MAX_DEPTH = 24


@functools.cache
def _response_schema(release: str, method: str) -> dict[str, Any] | None:
    from fake_server.methods import pinned_client_requests

    bundle, requests = pinned_client_requests(release)
    entry = requests.get(method)
    if entry is None or entry.response_file is None:
        return None
    schema = bundle.get(entry.response_file)
    return schema if isinstance(schema, dict) else None


def minimal_result(release: str, method: str) -> Any:
    """The smallest result of ``method`` that ``release``'s pinned schema accepts (``{}`` when it does not say)."""
    schema = _response_schema(release, method)
    if schema is None:
        return {}
    return smallest_instance(schema, schema.get("definitions", {}))


def smallest_instance(node: Any, definitions: dict[str, Any]) -> Any:
    """The smallest value the schema ``node`` accepts (its ``$ref`` s looked up in ``definitions``)."""
    return _instance(node, definitions, 0)


def _instance(node: Any, definitions: dict[str, Any], depth: int) -> Any:
    if not isinstance(node, dict) or depth > _MAX_DEPTH:
        return None
    ref = node.get("$ref")
    if isinstance(ref, str):
        return _instance(definitions.get(ref.rsplit("/", 1)[-1], {}), definitions, depth + 1)
    if "const" in node:
        return node["const"]
    if node.get("enum"):
        return node["enum"][0]
    for key in ("allOf", "anyOf", "oneOf"):
        branches = node.get(key)
        if branches:
            if key != "allOf" and any(isinstance(b, dict) and b.get("type") == "null" for b in branches):
                return None
            return _instance(branches[0], definitions, depth + 1)
    kind = node.get("type")
    if isinstance(kind, list):
        if "null" in kind:
            return None
        kind = kind[0]
    if kind == "object" or (kind is None and "properties" in node):
        props = node.get("properties", {})
        return {name: _instance(props.get(name, {}), definitions, depth + 1) for name in node.get("required", [])}
    if kind == "array":
        return []
    if kind == "string":
        return ""
    if kind in ("integer", "number"):
        return max(0, int(node.get("minimum", 0)))
    if kind == "boolean":
        return False
    return None
