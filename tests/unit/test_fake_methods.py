"""The fake's method tables come from the release's pinned schema and its release.json, not from literals.

The real deserializer's "unknown variant" answer is the truth for each release's list and its order
(tests/process/test_release_profiles.py compares it word for word); these tests hold the derivation to the pin.
"""

from __future__ import annotations

from typing import Any

import pytest

from contracts import releases, schema_store
from contracts.protocol_index import Union, build_index
from fake_server import profiles

#: Every release the fake plays, read from the release folders (a new folder is covered without an edit here).
RELEASES = tuple(profiles.names())
# v1 methods the real deserializer still lists in its "unknown variant" answer; the v2 schema has none of them.
LEGACY_V1_METHODS = {"getAuthStatus", "gitDiffToRemote", "getConversationSummary"}


def _client_methods(release: str, experimental: bool) -> set[str]:
    bundle = schema_store.load_bundle(release, experimental)
    return set(build_index(bundle).methods[Union.CLIENT_REQUEST])


def _variants(release: str) -> list[dict[str, Any]]:
    request = schema_store.load_bundle(release, True)["ClientRequest.json"]
    return request.get("oneOf") or request["anyOf"]


@pytest.mark.parametrize("release", RELEASES)
def test_client_methods_are_the_schema_methods_plus_the_legacy_v1_ones(release: str) -> None:
    table = releases.get(release).methods
    assert len(table.client) == len(set(table.client))
    assert set(table.client) == _client_methods(release, experimental=True) | LEGACY_V1_METHODS
    # in the schema's order, the v1 ones where the deserializer lists them (after account/read)
    schema_order = [v["properties"]["method"]["enum"][0] for v in _variants(release)]
    assert [m for m in table.client if m not in LEGACY_V1_METHODS] == schema_order
    at = table.client.index("account/read")
    assert table.client[at + 1 : at + 4] == ("getConversationSummary", "gitDiffToRemote", "getAuthStatus")


@pytest.mark.parametrize("release", RELEASES)
def test_experimental_methods_are_those_only_the_experimental_schema_has(release: str) -> None:
    expected = _client_methods(release, experimental=True) - _client_methods(release, experimental=False)
    assert releases.get(release).methods.experimental == expected


@pytest.mark.parametrize("release", RELEASES)
def test_paramless_methods_are_those_whose_schema_variant_does_not_require_params(release: str) -> None:
    variants = _variants(release)
    paramless = {v["properties"]["method"]["enum"][0] for v in variants if "params" not in v.get("required", [])}
    assert releases.get(release).methods.paramless == paramless
