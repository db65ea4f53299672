"""The pinned-schema stores (shipped, read-only; the user's, written by pin) and the method index of a bundle."""

from __future__ import annotations

import sys
from pathlib import Path

import orjson
import pytest
import zstandard

from contracts import schema_store
from contracts.exitcodes import FAILED, OK, USAGE
from contracts.protocol_index import Union, build_index, words
from harness.cli import main


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
    with pytest.raises(schema_store.ReleaseNotPinned, match="pin it with `codex-harness schema pin") as caught:
        schema_store.load_bundle("7.7.7", root=tmp_path)
    assert "--store DIR, else $CODEX_HARNESS_STORE" in str(caught.value)  # how to choose the store it names
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


# --- the user's store beside the shipped pins ---------------------------------------------------------

FAKE_CODEX = f"""#!{sys.executable}
import json, os, shutil, sys
args = sys.argv[1:]
if args == ["--version"]:
    print("codex-cli " + os.environ.get("FAKE_CODEX_VERSION", "9.8.7"))
    sys.exit(0)
if "generate-json-schema" not in args:
    sys.exit("not a server")
out = args[args.index("--out") + 1]
source = os.environ.get("FAKE_SCHEMA_DIR")
if source:  # replay a bundle written out beforehand
    shutil.copytree(os.path.join(source, "experimental" if "--experimental" in args else "stable"), out)
    sys.exit(0)
os.makedirs(out, exist_ok=True)
with open(os.path.join(out, "ClientRequest.json"), "w") as fh:
    json.dump({{"title": "ClientRequest", "oneOf": []}}, fh)
"""


@pytest.fixture
def fake_codex(tmp_path: Path) -> Path:
    path = tmp_path / "bin" / "codex"
    path.parent.mkdir()
    path.write_text(FAKE_CODEX)
    path.chmod(0o755)
    return path


def _package_listing() -> list[str]:
    return sorted(str(p.relative_to(schema_store.SHIPPED_ROOT)) for p in schema_store.SHIPPED_ROOT.rglob("*"))


def _bundle_dir(bundle: schema_store.Bundle, directory: Path) -> Path:
    for rel, schema in bundle.items():
        path = directory / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(orjson.dumps(schema))
    return directory


def test_the_default_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("XDG_DATA_HOME", raising=False)
    assert schema_store.default_user_store() == tmp_path / "home" / ".local/share/codex-harness/schemas"
    monkeypatch.setenv("XDG_DATA_HOME", "relative/ignored")
    assert schema_store.default_user_store() == tmp_path / "home" / ".local/share/codex-harness/schemas"
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    assert schema_store.default_user_store() == tmp_path / "xdg" / "codex-harness" / "schemas"
    monkeypatch.setenv("CODEX_HARNESS_STORE", str(tmp_path / "env-store"))
    assert schema_store.user_store() == tmp_path / "env-store"
    assert schema_store.user_store(tmp_path / "flag") == tmp_path / "flag"  # --store beats the variable
    with schema_store.using_user_store(tmp_path / "flag") as store:
        assert store == schema_store.user_store() == tmp_path / "flag"
    assert schema_store.user_store() == tmp_path / "env-store"


def test_the_shipped_pins_are_never_written(tmp_path: Path) -> None:
    before = _package_listing()
    bundle = {"A.json": {"type": "object"}}
    for root in (schema_store.SHIPPED_ROOT, schema_store.SHIPPED_ROOT / "sub"):
        with pytest.raises(schema_store.SchemaStoreError, match="shipped with the package and is never written"):
            schema_store.write_release("1.2.3", bundle, bundle, root)
    written = schema_store.write_release("1.2.3", bundle, bundle)  # default: the user's store
    assert written == schema_store.user_store() / "codex-cli-1.2.3"
    assert not written.resolve().is_relative_to(schema_store.SHIPPED_ROOT)
    assert _package_listing() == before


def test_lookups_see_both_stores_and_the_shipped_pin_wins(tmp_path: Path) -> None:
    bundle = {"A.json": {"type": "object"}}
    schema_store.write_release("0.1.0", bundle, bundle)
    assert {"0.1.0", "0.171.0"} <= set(schema_store.pinned_releases())
    assert schema_store.pinned_releases(schema_store.SHIPPED_ROOT) == schema_store.shipped_releases()
    assert "0.1.0" not in schema_store.shipped_releases()
    assert schema_store.load_bundle("0.1.0") == bundle
    assert schema_store.open_bundle("0.1.0")[1] == bundle
    assert schema_store.shadowed_note("0.171.0") is None
    # A user pin of a shipped release that differs: the shipped one is used, the difference reported.
    schema_store.write_release("0.171.0", bundle, bundle)
    assert len(schema_store.load_bundle("0.171.0")) == 331
    assert schema_store.release_root("0.171.0") == schema_store.SHIPPED_ROOT
    note = schema_store.shadowed_note("0.171.0")
    assert note and "differs from the pin shipped with the package; the shipped pin is used" in note
    # An identical user pin is no news.
    shipped = (schema_store.load_bundle("0.171.0"), schema_store.load_bundle("0.171.0", True))
    schema_store.write_release("0.171.0", *shipped)
    assert schema_store.shadowed_note("0.171.0") is None


def test_schema_pin_writes_to_the_users_store_only(
    fake_codex: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    before = _package_listing()
    assert main(["schema", "pin", "--codex", str(fake_codex)]) == OK
    default = schema_store.default_user_store()
    assert f"-> {default.resolve()}/codex-cli-9.8.7" in capsys.readouterr().out
    monkeypatch.setenv("CODEX_HARNESS_STORE", str(tmp_path / "env-store"))
    monkeypatch.setenv("FAKE_CODEX_VERSION", "9.8.8")
    assert main(["schema", "pin", "--codex", str(fake_codex)]) == OK
    assert schema_store.pinned_releases(tmp_path / "env-store") == ["9.8.8"]
    monkeypatch.setenv("FAKE_CODEX_VERSION", "9.8.9")
    assert main(["schema", "pin", "--codex", str(fake_codex), "--store", str(tmp_path / "flag")]) == OK
    assert schema_store.pinned_releases(tmp_path / "flag") == ["9.8.9"]
    assert main(["schema", "pin", "--codex", str(fake_codex), "--store", str(schema_store.SHIPPED_ROOT)]) == USAGE
    assert "never written" in capsys.readouterr().err
    assert _package_listing() == before
    # `schema diff` reads the user's pins by version, beside the shipped ones.
    assert main(["schema", "diff", "9.8.8", "9.8.8"]) == OK
    assert main(["schema", "diff", "9.8.9", "9.8.9", "--store", str(tmp_path / "flag")]) == OK
    assert "schema diff 9.8.9 -> 9.8.9" in capsys.readouterr().out
    assert main(["schema", "diff", "0.171.0", "9.8.9"]) == USAGE  # not in the store in use
    assert "no pinned schema for codex-cli 9.8.9" in capsys.readouterr().err


def test_pinning_a_shipped_release(
    fake_codex: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    source = tmp_path / "schemas"
    _bundle_dir(schema_store.load_bundle("0.171.0"), source / "stable")
    _bundle_dir(schema_store.load_bundle("0.171.0", True), source / "experimental")
    monkeypatch.setenv("FAKE_CODEX_VERSION", "0.171.0")
    monkeypatch.setenv("FAKE_SCHEMA_DIR", str(source))
    assert main(["schema", "pin", "--codex", str(fake_codex)]) == OK
    assert "shipped with the package, identical: nothing to pin" in capsys.readouterr().out
    assert schema_store.pinned_releases(schema_store.user_store()) == []
    # A binary of that version printing another schema: pinned in the user's store, reported, exit 1.
    monkeypatch.delenv("FAKE_SCHEMA_DIR")
    assert main(["schema", "pin", "--codex", str(fake_codex)]) == FAILED
    err = capsys.readouterr().err
    assert "differs from the pin shipped with the package; the shipped pin is used" in err
    assert schema_store.pinned_releases(schema_store.user_store()) == ["0.171.0"]
    assert main(["schema", "diff", "0.171.0", "0.171.0"]) == OK
    assert "differs from the pin shipped" in capsys.readouterr().err


def test_validate_release_pins_into_the_users_store(
    fake_codex: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A release not pinned yet goes to --store; the package is untouched (the suite then fails: no server)."""
    before = _package_listing()
    store = tmp_path / "store"
    argv = ["validate-release", "--codex", str(fake_codex), "--store", str(store), "--out", str(tmp_path / "out")]
    assert main([*argv, "--scenario", "plain", "--latency-samples", "0"]) == FAILED
    assert schema_store.pinned_releases(store) == ["9.8.7"]
    assert _package_listing() == before
    report = orjson.loads((tmp_path / "out" / "report.json").read_bytes())
    assert report["schema"]["pin"] == "new" and report["schema"]["store"] == str(store.resolve())
    assert report["schema"]["compared_with"] == "0.171.0"
    assert "RESULT: FAIL" in capsys.readouterr().out
    assert main([*argv, "--store", str(schema_store.SHIPPED_ROOT)]) == USAGE


@pytest.mark.parametrize("experimental", [False, True])
def test_one_schema_file_of_a_pin_is_read_without_the_others(experimental: bool) -> None:
    """The method list at fake-codex's first request reads ClientRequest.json only: the same value as the
    whole bundle's."""
    for version in schema_store.shipped_releases():
        whole = schema_store.load_bundle(version, experimental)
        member = schema_store.load_bundle_member(version, experimental, "ClientRequest.json")
        assert member == whole["ClientRequest.json"]
        assert schema_store.load_bundle_member(version, experimental, "No/such.json") is None


def test_a_bundle_in_another_form_is_parsed_whole(tmp_path: Path) -> None:
    """Pretty-printed, keys unsorted, a decoy key inside a value: the member is still the top-level file's."""
    bundle = {"Z.json": {"title": "z"}, "ClientRequest.json": {"oneOf": [{"title": "real"}]}}
    schema_store.write_release("1.2.3", bundle, bundle, tmp_path)
    path = tmp_path / "codex-cli-1.2.3" / "stable.json.zst"
    decoy = {"A.json": {"x": {"ClientRequest.json ": {"title": "decoy"}}}, **bundle}
    raw = orjson.dumps(decoy, option=orjson.OPT_INDENT_2)
    path.write_bytes(zstandard.ZstdCompressor(write_content_size=True).compress(raw))
    schema_store._clear_caches()
    member = schema_store.load_bundle_member("1.2.3", False, "ClientRequest.json", tmp_path)
    assert member == {"oneOf": [{"title": "real"}]}
