"""The pinned-schema store and the method index built from a bundle."""

from __future__ import annotations

from pathlib import Path

import pytest
import zstandard

from contracts import schema_store
from contracts.protocol_index import Union, build_index, words


def test_the_packaged_store_pins_0_171_0() -> None:
    assert "0.171.0" in schema_store.pinned_releases()
    assert schema_store.latest_release() == schema_store.pinned_releases()[-1]
    meta = schema_store.load_meta("0.171.0")
    assert meta["codex_version"] == "0.171.0"
    stable = schema_store.load_bundle("0.171.0")
    experimental = schema_store.load_bundle("0.171.0", experimental=True)
    assert len(stable) == meta["bundles"]["stable"]["schema_files"] == 331
    assert len(experimental) == meta["bundles"]["experimental"]["schema_files"] == 483
    assert schema_store.bundle_digest(stable) == meta["bundles"]["stable"]["sha256"]
    assert {"ClientRequest.json", "ServerNotification.json", "v1/InitializeResponse.json"} <= set(stable)
    assert schema_store.load_bundle("0.171.0") is stable  # cached


def test_write_and_read_back(tmp_path: Path) -> None:
    bundle = {"A.json": {"type": "object"}, "v2/B.json": {"enum": ["x"]}}
    target = schema_store.write_release("1.2.3", bundle, {**bundle, "C.json": {}}, tmp_path, {"how": "test"})
    assert target == tmp_path / "codex-cli-1.2.3"
    assert schema_store.load_bundle("1.2.3", root=tmp_path) == bundle
    assert len(schema_store.load_bundle("1.2.3", True, root=tmp_path)) == 3
    assert schema_store.load_meta("1.2.3", tmp_path)["produced_by"] == {"how": "test"}
    schema_store.write_release("1.10.0", bundle, bundle, tmp_path)
    schema_store.write_release("1.10.0-beta.1", bundle, bundle, tmp_path)
    assert schema_store.pinned_releases(tmp_path) == ["1.2.3", "1.10.0-beta.1", "1.10.0"]
    assert schema_store.latest_release(tmp_path) == "1.10.0"
    assert not list(tmp_path.rglob("*.tmp"))
    with pytest.raises(schema_store.SchemaStoreError, match="not a release version"):
        schema_store.write_release("../evil", bundle, bundle, tmp_path)


def test_unpinned_release_and_unreadable_bundles(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(schema_store.ReleaseNotPinned, match="pin it with `codex-harness schema pin"):
        schema_store.load_bundle("7.7.7", root=tmp_path)
    with pytest.raises(schema_store.SchemaStoreError, match="no pinned schema"):
        schema_store.latest_release(tmp_path)
    monkeypatch.setattr(schema_store, "MAX_BUNDLE_BYTES", 1024)
    bomb = tmp_path / "bomb.json.zst"
    bomb.write_bytes(zstandard.ZstdCompressor().compress(b" " * 1025))
    with pytest.raises(schema_store.SchemaStoreError, match="declared size"):
        schema_store.read_bundle_file(bomb)
    unsized = tmp_path / "unsized.json.zst"
    unsized.write_bytes(zstandard.ZstdCompressor(write_content_size=False).compress(b"{}"))
    with pytest.raises(schema_store.SchemaStoreError, match="unknown"):
        schema_store.read_bundle_file(unsized)
    not_a_bundle = tmp_path / "list.json.zst"
    not_a_bundle.write_bytes(zstandard.ZstdCompressor().compress(b"[1]"))
    with pytest.raises(schema_store.SchemaStoreError, match="not a mapping"):
        schema_store.read_bundle_file(not_a_bundle)
    bad_dir = tmp_path / "gen"
    bad_dir.mkdir()
    (bad_dir / "X.json").write_text("{")
    with pytest.raises(schema_store.SchemaStoreError, match="cannot read schema"):
        schema_store.read_bundle_dir(bad_dir)


def test_open_bundle_by_version_or_directory(tmp_path: Path) -> None:
    label, bundle = schema_store.open_bundle("0.171.0")
    assert label == "0.171.0" and "ClientRequest.json" in bundle
    (tmp_path / "v2").mkdir()
    (tmp_path / "v2" / "X.json").write_text('{"type": "string"}')
    assert schema_store.open_bundle(tmp_path)[1] == {"v2/X.json": {"type": "string"}}
    with pytest.raises(schema_store.ReleaseNotPinned):
        schema_store.open_bundle("0.0.1")


def test_method_index_of_0_171_0() -> None:
    index = build_index(schema_store.load_bundle("0.171.0"))
    counts = {union: len(methods) for union, methods in index.methods.items()}
    assert counts == {
        Union.CLIENT_REQUEST: 110,
        Union.CLIENT_NOTIFICATION: 1,
        Union.SERVER_REQUEST: 10,
        Union.SERVER_NOTIFICATION: 87,
    }
    response = {m: e.response_file for m, e in index.methods[Union.CLIENT_REQUEST].items()}
    assert response["initialize"] == "v1/InitializeResponse.json"
    assert response["thread/start"] == "v2/ThreadStartResponse.json"
    assert response["account/logout"] == "v2/LogoutAccountResponse.json"
    assert response["account/securitySetup/read"] == "v2/GetAccountSecuritySetupResponse.json"
    assert response["config/value/write"] == "v2/ConfigWriteResponse.json"
    assert response["config/mcpServer/reload"] == "v2/McpServerRefreshResponse.json"
    server = index.methods[Union.SERVER_REQUEST]["item/commandExecution/requestApproval"]
    assert server.response_file == "CommandExecutionRequestApprovalResponse.json"
    # The one method whose response type the schema does not name recognisably: envelope checks only.
    assert index.unmapped_responses() == ["modelProvider/default/set"]


def test_words() -> None:
    assert words("account/gatewayOAuth/cancel") == ["account", "gateway", "o", "auth", "cancel"]
    assert words("GatewayOAuthCancel") == ["gateway", "o", "auth", "cancel"]
