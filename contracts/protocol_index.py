"""Where each wire method lives in a schema bundle (pure: a bundle in, tables out).

The bundle that ``generate-json-schema`` prints has one self-contained file per union —
``ClientRequest.json``, ``ClientNotification.json``, ``ServerRequest.json``,
``ServerNotification.json`` — whose ``oneOf`` holds one variant per method (``method`` is a
one-value enum) next to the shared ``definitions``, and one self-contained file per response type
(``v1/InitializeResponse.json``, ``v2/ThreadStartResponse.json``, ``CommandExecutionRequestApprovalResponse.json``).
The schema does not say which response answers which method, so that link is derived from the names
(``XParams`` → ``XResponse``, else the response whose words are the method's words), with the few
upstream naming exceptions listed in ``RESPONSE_NAME_EXCEPTIONS``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Final

import orjson


class Union(StrEnum):
    CLIENT_REQUEST = "ClientRequest"
    CLIENT_NOTIFICATION = "ClientNotification"
    SERVER_REQUEST = "ServerRequest"
    SERVER_NOTIFICATION = "ServerNotification"


UNION_FILES: Final = {u: f"{u.value}.json" for u in Union}

# Response types whose names follow neither rule (upstream `response:` types named differently from
# the method). Applied only when the named response exists in the bundle.
RESPONSE_NAME_EXCEPTIONS: Final = {
    "config/mcpServer/reload": "McpServerRefreshResponse",
}

_WORD_RE: Final = re.compile(r"[A-Z]?[a-z0-9]+|[A-Z]+(?![a-z])")
_REF_RE: Final = re.compile(r"#/definitions/([A-Za-z0-9_]+)")
_IGNORED_RESPONSE_WORDS: Final = frozenset({"get"})


@dataclass(frozen=True, slots=True)
class MethodEntry:
    union: Union
    method: str
    variant: dict[str, Any]  # the oneOf variant (properties id/method/params, required)
    params_refs: tuple[str, ...]  # definition names its params refer to directly
    response_file: str | None = None  # bundle path of the response schema, for requests


@dataclass(frozen=True, slots=True)
class ProtocolIndex:
    methods: dict[Union, dict[str, MethodEntry]]
    union_schemas: dict[Union, dict[str, Any]]
    response_files: dict[str, str] = field(default_factory=dict)  # response type name → bundle path

    def entry(self, union: Union, method: str) -> MethodEntry | None:
        return self.methods[union].get(method)

    def unmapped_responses(self) -> list[str]:
        """Request methods whose response schema could not be found (their answers get envelope checks only)."""
        return sorted(
            entry.method
            for union in (Union.CLIENT_REQUEST, Union.SERVER_REQUEST)
            for entry in self.methods[union].values()
            if entry.response_file is None
        )


def words(name: str) -> list[str]:
    """``"account/gatewayOAuth/cancel"`` → ``["account", "gateway", "o", "auth", "cancel"]``."""
    return [w.lower() for w in _WORD_RE.findall(name)]


def variant_method(variant: Mapping[str, Any]) -> str | None:
    method = variant.get("properties", {}).get("method", {})
    values = method.get("enum") or ([method["const"]] if "const" in method else [])
    return values[0] if len(values) == 1 and isinstance(values[0], str) else None


def _response_files(bundle: Mapping[str, Any]) -> dict[str, str]:
    found: dict[str, str] = {}
    # v2 first: it is the protocol the server speaks; v1 and the top level hold the rest.
    for path in sorted(bundle, key=lambda p: (not p.startswith("v2/"), p)):
        name = path.rsplit("/", 1)[-1].removesuffix(".json")
        if name.endswith("Response") and name != "JSONRPCResponse":
            found.setdefault(name, path)
    return found


def _match_response(entry: MethodEntry, responses: Mapping[str, str]) -> str | None:
    if (alias := RESPONSE_NAME_EXCEPTIONS.get(entry.method)) and alias in responses:
        return responses[alias]
    for ref in entry.params_refs:
        if ref.endswith("Params") and (name := ref.removesuffix("Params") + "Response") in responses:
            return responses[name]
    method_words = set(words(entry.method))
    scored: list[tuple[int, str]] = []
    for name, path in responses.items():
        response_words = set(words(name.removesuffix("Response")))
        if response_words - _IGNORED_RESPONSE_WORDS <= method_words:
            scored.append((len(response_words & method_words), path))
    scored.sort(reverse=True)
    # Two shared words at least: one ("account") links unrelated methods and responses.
    if scored and scored[0][0] >= 2 and (len(scored) == 1 or scored[1][0] < scored[0][0]):
        return scored[0][1]
    return None


def build_index(bundle: Mapping[str, Any]) -> ProtocolIndex:
    """Tables of methods per union, with the response file of every request method."""
    responses = _response_files(bundle)
    methods: dict[Union, dict[str, MethodEntry]] = {}
    unions: dict[Union, dict[str, Any]] = {}
    for union, filename in UNION_FILES.items():
        schema = bundle.get(filename)
        if not isinstance(schema, dict):
            schema = {"oneOf": []}
        unions[union] = schema
        table: dict[str, MethodEntry] = {}
        for variant in schema.get("oneOf", []):
            method = variant_method(variant) if isinstance(variant, dict) else None
            if method is None:
                continue
            params = variant.get("properties", {}).get("params", {})
            refs = tuple(dict.fromkeys(_REF_RE.findall(orjson.dumps(params).decode())))
            entry = MethodEntry(union, method, variant, refs)
            if union in (Union.CLIENT_REQUEST, Union.SERVER_REQUEST):
                entry = MethodEntry(union, method, variant, refs, _match_response(entry, responses))
            table[method] = entry
        methods[union] = table
    return ProtocolIndex(methods, unions, responses)
