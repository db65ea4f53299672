"""The fake's method tables are copied from the real binary's wire; the pinned schema keeps them honest.

The fake keeps them as literals so that `fake-codex` starts without loading the schema bundle; these
tests fail as soon as a table drifts from the pinned 0.171.0 schema.
"""

from __future__ import annotations

from typing import Any

from contracts import schema_store
from contracts.protocol_index import Union, build_index
from fake_server.methods import CLIENT_METHODS, EXPERIMENTAL_METHODS, PARAMLESS_METHODS

# v1 methods the real deserializer still lists in its "unknown variant" answer; the v2 schema has none of them.
LEGACY_V1_METHODS = {"getAuthStatus", "gitDiffToRemote", "getConversationSummary"}


def _client_methods(experimental: bool) -> set[str]:
    bundle = schema_store.load_bundle("0.171.0", experimental)
    return set(build_index(bundle).methods[Union.CLIENT_REQUEST])


def _variants() -> list[dict[str, Any]]:
    request = schema_store.load_bundle("0.171.0", True)["ClientRequest.json"]
    return request.get("oneOf") or request["anyOf"]


def test_client_methods_are_the_schema_methods_plus_the_legacy_v1_ones() -> None:
    assert len(CLIENT_METHODS) == len(set(CLIENT_METHODS))
    assert set(CLIENT_METHODS) == _client_methods(experimental=True) | LEGACY_V1_METHODS


def test_experimental_methods_are_those_only_the_experimental_schema_has() -> None:
    assert set(EXPERIMENTAL_METHODS) == _client_methods(experimental=True) - _client_methods(experimental=False)


def test_paramless_methods_are_those_whose_schema_variant_does_not_require_params() -> None:
    paramless = {v["properties"]["method"]["enum"][0] for v in _variants() if "params" not in v.get("required", [])}
    assert set(PARAMLESS_METHODS) == paramless
