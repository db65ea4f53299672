"""Release folders are data, read by one loader: shipped ones and the user's store alike.

A folder is ``codex-cli-<version>/`` (schema pin, ``release.json``, ``answers.json``, ``shapes.json``). A folder
written into the store (as ``release learn`` will) is used exactly like a shipped one: the fake plays it, its
trace format is read, ``diff`` picks it. A folder with only the schema pin (the layout of older stores) is still
a release to validate against. Every file is another program's output: read bounded, never through a link,
checked key by key.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import orjson
import pytest
from support.virtual import VirtualServer

from contracts import releases, schema_store
from contracts.releases import ReleaseError
from contracts.validator import Validator
from fake_server import profiles
from fake_server.catalogue import load_builtin
from fake_server.engine import Engine
from harness.targets.fake import fake_codex_argv

#: the folders under contracts/releases/ (at least the three re-expressed from the old profiles)
SHIPPED = tuple(schema_store.shipped_releases())
NEW = "9.9.9"
INIT = {"id": 0, "method": "initialize", "params": {"clientInfo": {"name": "t", "version": "1"}}}


@pytest.fixture
def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "store"
    root.mkdir()
    monkeypatch.setenv(schema_store.STORE_ENV, str(root))
    releases.clear_caches()
    yield root
    releases.clear_caches()


def learned(store: Path, version: str = NEW, edit: Any = None) -> Path:
    """A release folder in the store: the default release's, copied, its version changed (as a tool writes)."""
    folder = store / f"codex-cli-{version}"
    shutil.copytree(releases.default().folder, folder)
    meta = json.loads((folder / "meta.json").read_text())
    meta["codex_version"] = version
    (folder / "meta.json").write_text(json.dumps(meta))
    body = json.loads((folder / "release.json").read_text())
    body["release"] = version
    if edit is not None:
        edit(body)
    (folder / "release.json").write_text(json.dumps(body))
    releases.clear_caches()
    return folder


def fake(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    full = {k: v for k, v in os.environ.items() if k != profiles.RELEASE_ENV} | (env or {})
    return subprocess.run(
        [*fake_codex_argv(), *args], capture_output=True, text=True, timeout=60, env=full, stdin=subprocess.DEVNULL
    )


def session(profile: profiles.Profile, *frames: dict[str, Any]) -> list[dict[str, Any]]:
    scenario = load_builtin("plain")
    server = VirtualServer(scenario)
    server.engine = Engine(scenario, profile=profile)
    for frame in (INIT, *frames):
        server.send(frame)
    server.settle()
    return server.frames


# --- the shipped folders ----------------------------------------------------------------------------------


def test_the_shipped_releases_are_folders_the_fake_plays() -> None:
    assert {"0.163.0", "0.169.0", "0.171.0"} <= set(SHIPPED)
    assert [r.version for r in releases.known()] == list(SHIPPED)
    assert profiles.names() == list(SHIPPED)
    for release in releases.known():
        assert release.shipped and release.playable
        assert release.folder == schema_store.SHIPPED_ROOT / f"codex-cli-{release.version}"
        for name in ("meta.json", "stable.json.zst", "experimental.json.zst", "release.json"):
            assert (release.folder / name).is_file()
        assert profiles.get(release.version).release == release.version


def test_one_file_names_the_default_release() -> None:
    body = json.loads((schema_store.SHIPPED_ROOT / releases.DEFAULT_FILE).read_text())
    assert body == {"default": releases.default_version()}
    assert releases.default_version() in profiles.names()
    assert profiles.select().release == releases.default_version()


def test_every_shipped_folder_names_every_switch() -> None:
    """The engine's neutral values never stand in for a shipped release: each folder says what it plays."""
    for release in releases.known():
        assert set(release.description["fake"]["switches"]) == set(profiles.SWITCHES), release.version


def test_the_folders_hold_no_code_and_no_transcript() -> None:
    for release in releases.known():
        for path in release.folder.iterdir():
            assert path.suffix in (".json", ".zst"), path
            assert "transcript" not in path.name and not path.name.endswith(".jsonl"), path


# --- a release learned into the store is used like a shipped one ------------------------------------------


def _answers_edit(folder: Path) -> None:
    answers = json.loads((folder / "answers.json").read_text())
    answers["account/read"] = {"account": None, "requiresOpenaiAuth": True}
    (folder / "answers.json").write_text(json.dumps(answers))


def test_a_release_in_the_store_is_played_like_a_shipped_one(store: Path) -> None:
    folder = learned(store)
    _answers_edit(folder)
    assert profiles.names() == [*SHIPPED, NEW]
    profile = profiles.get(NEW)
    frames = session(profile, {"id": 1, "method": "account/read", "params": {}})
    assert frames[0]["result"]["userAgent"].startswith(f"t/{NEW} ")
    assert next(f for f in frames if f.get("id") == 1)["result"] == {"account": None, "requiresOpenaiAuth": True}
    default = session(profiles.default(), {"id": 1, "method": "account/read", "params": {}})
    assert next(f for f in default if f.get("id") == 1)["result"] != {"account": None, "requiresOpenaiAuth": True}
    # fake-codex finds it through the store variable, as every command does
    out = fake("--release", NEW, "--version", env={schema_store.STORE_ENV: str(store)})
    assert out.returncode == 0 and out.stdout.strip() == f"codex-cli {NEW}", out
    # diff picks it for a binary of its version, and the nearest for a newer one
    assert profiles.nearest(NEW) == (profile, True)
    assert profiles.nearest("10.0.0")[0].release == NEW


def test_a_release_in_the_store_brings_its_trace_format(store: Path) -> None:
    def schema_4(body: dict[str, Any]) -> None:
        body["trace"] = {"schema": 4, "payload_files": True, "closing_event": "rollout_ended", "not_written": []}

    learned(store, edit=schema_4)
    formats = releases.trace_formats()
    assert formats[4].release == NEW and formats[4].closing_event == "rollout_ended"
    assert formats[3].release == releases.default_version()  # a shipped release's format is never replaced
    assert profiles.get(NEW).trace_schema == 4


def test_a_switch_a_folder_leaves_out_plays_its_neutral_value(store: Path) -> None:
    def no_switches(body: dict[str, Any]) -> None:
        body["fake"] = {"switches": {}, "not_written": []}

    learned(store, edit=no_switches)
    profile = profiles.get(NEW)
    for name, switch in profiles.SWITCHES.items():
        assert getattr(profile, name) == switch.neutral


def test_a_folder_with_only_the_schema_pin_is_a_release_to_validate_against(store: Path) -> None:
    """The layout of stores written before release folders: still read; the fake says why it cannot play it."""
    shipped = releases.default()
    schema_store.write_release(NEW, shipped.bundle(False), shipped.bundle(True), store)
    release = releases.get(NEW)
    assert not release.playable and release.description is None
    assert NEW not in profiles.names()
    assert Validator.for_release(NEW).validate({"method": "initialized"}, "c2s") == []
    # its methods are its pin's; release.json, which would list those beyond the pin, is not there
    assert "thread/start" in release.methods.known and "getAuthStatus" not in release.methods.known
    with pytest.raises(profiles.UnknownRelease, match="has only a schema pin"):
        profiles.get(NEW)
    out = fake("--release", NEW, "--version", env={schema_store.STORE_ENV: str(store)})
    assert out.returncode == 3 and "has only a schema pin" in out.stderr and "Traceback" not in out.stderr


# --- the loader reads the methods from the pin ------------------------------------------------------------


def _variant(method: str, params: bool = True) -> dict[str, Any]:
    return {
        "properties": {"method": {"enum": [method]}, "params": {"type": "object"}},
        "required": ["id", "method", *(["params"] if params else [])],
    }


def test_methods_come_from_the_pin_with_those_beyond_it_where_the_folder_says(store: Path) -> None:
    stable = {"ClientRequest.json": {"oneOf": [_variant("a"), _variant("c", params=False)]}}
    experimental = {"ClientRequest.json": {"oneOf": [_variant("a"), _variant("b"), _variant("c", params=False)]}}
    schema_store.write_release(NEW, stable, experimental, store)
    folder = store / f"codex-cli-{NEW}"
    body = {"format": 1, "release": NEW, "methods": {"beyond_schema": {"after": "a", "names": ["v1", "v2"]}}}
    (folder / "release.json").write_text(json.dumps(body))
    releases.clear_caches()
    table = releases.get(NEW).methods
    assert table.client == ("a", "v1", "v2", "b", "c")
    assert table.experimental == {"b"}
    assert table.paramless == {"c"}
    body["methods"]["beyond_schema"]["after"] = "gone"  # not in the list: at the end
    (folder / "release.json").write_text(json.dumps(body))
    releases.clear_caches()
    assert releases.get(NEW).methods.client == ("a", "b", "c", "v1", "v2")


# --- hostile folders --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("edit", "key"),
    [
        (lambda b: b.update(format=2), "format"),
        (lambda b: b.update(release="1.2.3"), "release"),
        (lambda b: b.update(extra=1), "extra"),
        (lambda b: b["trace"].update(closing_event="nothing"), "trace.closing_event"),
        (lambda b: b["trace"].update(schema=True), "trace.schema"),
        (lambda b: b["trace"].update(not_written=[["nope", "x"]]), "trace.not_written"),
        (lambda b: b["fake"].update(not_written=[["item"]]), "fake.not_written"),
        (lambda b: b["fake"]["switches"].update(diff_after_tools=[1]), "fake.switches.diff_after_tools"),
        (lambda b: b["methods"]["beyond_schema"].update(names="x"), "methods.beyond_schema.names"),
    ],
)
def test_a_bad_release_json_is_refused_naming_its_key(store: Path, edit: Any, key: str) -> None:
    learned(store, edit=edit)
    with pytest.raises(ReleaseError, match=f"release.json: {key}") as info:
        profiles.get(NEW)
    assert NEW in str(info.value)
    assert NEW not in profiles.names()  # listing skips it; the shipped ones still play
    assert profiles.names() == list(SHIPPED)


@pytest.mark.parametrize(
    ("switch", "value"), [("no_such_switch", True), ("trace_history", "all"), ("diff_after_tools", "yes")]
)
def test_a_switch_the_engine_does_not_have_is_refused(store: Path, switch: str, value: Any) -> None:
    learned(store, edit=lambda b: b["fake"]["switches"].update({switch: value}))
    with pytest.raises(ReleaseError, match=f"fake.switches.{switch}"):
        profiles.get(NEW)


def test_a_broken_store_release_exits_3_naming_it(store: Path) -> None:
    learned(store, edit=lambda b: b.update(format="x"))
    env = {schema_store.STORE_ENV: str(store)}
    out = fake("--release", NEW, "--version", env=env)
    assert out.returncode == 3 and f"release {NEW}" in out.stderr and "Traceback" not in out.stderr, out
    assert fake("--version", env=env).stdout.strip() == f"codex-cli {releases.default_version()}"


@pytest.mark.parametrize(
    ("change", "match"),
    [
        (lambda s: s["frames"]["thread"].update(id="${no_such_value}"), r"frames.thread: \$\{no_such_value\}"),
        (lambda s: s["frames"].pop("turn"), "frames.turn: missing"),
        (lambda s: s["frames"].update(turn="text"), "frames.turn: expected an object"),
        (lambda s: s["values"].update(default_sandbox="nowhere"), "values.default_sandbox"),
        (lambda s: s["frames"]["http_error"].pop("other"), "frames.http_error"),
    ],
)
def test_shapes_the_engine_cannot_fill_are_refused_when_read(store: Path, change: Any, match: str) -> None:
    folder = learned(store)
    shapes = json.loads((folder / "shapes.json").read_text())
    change(shapes)
    (folder / "shapes.json").write_text(json.dumps(shapes))
    with pytest.raises(ReleaseError, match=match):
        profiles.get(NEW)


def test_a_shape_field_the_engine_does_not_compute_is_written_and_one_left_out_is_not(store: Path) -> None:
    """Additions and removals against the release-neutral engine, as data: the thread's field set."""
    folder = learned(store)
    shapes = json.loads((folder / "shapes.json").read_text())
    shapes["frames"]["thread"]["newField"] = {"recorded": ["${cwd}"]}
    del shapes["frames"]["thread"]["preview"]
    (folder / "shapes.json").write_text(json.dumps(shapes))
    frames = session(profiles.get(NEW), {"id": 1, "method": "thread/start", "params": {}})
    thread = next(f for f in frames if f.get("id") == 1)["result"]["thread"]
    assert thread["newField"] == {"recorded": [thread["cwd"]]}
    assert "preview" not in thread
    start = {"id": 1, "method": "thread/start", "params": {}}
    assert "preview" in next(f for f in session(profiles.default(), start) if f.get("id") == 1)["result"]["thread"]


@pytest.mark.parametrize("kind", ["link", "fifo", "big", "not json", "deep"])
def test_release_json_is_read_bounded_never_through_a_link(store: Path, tmp_path: Path, kind: str) -> None:
    folder = learned(store)
    target = folder / "release.json"
    body = target.read_bytes()
    target.unlink()
    if kind == "link":
        (tmp_path / "elsewhere.json").write_bytes(body)
        target.symlink_to(tmp_path / "elsewhere.json")
    elif kind == "fifo":
        os.mkfifo(target)  # a read would block forever
    elif kind == "big":
        target.write_bytes(b" " * (releases.MAX_DATA_BYTES + 1) + body)
    elif kind == "deep":
        target.write_bytes(b"[" * 1000 + b"]" * 1000)  # orjson reads it; the fillers would recurse past Python's limit
    else:
        target.write_bytes(b"{not json")
    releases.clear_caches()
    with pytest.raises(ReleaseError) as info:
        profiles.get(NEW)
    assert str(target) in str(info.value)


def test_deeply_nested_shapes_are_refused_when_read(store: Path) -> None:
    folder = learned(store)
    shapes = json.loads((folder / "shapes.json").read_text())
    deep: Any = "${cwd}"
    for _ in range(900):
        deep = [deep]
    shapes["frames"]["thread"]["extra"] = deep
    (folder / "shapes.json").write_text(json.dumps(shapes))
    with pytest.raises(ReleaseError, match="nests deeper than"):
        profiles.get(NEW)


def test_a_data_file_that_is_not_regular_is_refused(store: Path) -> None:
    folder = learned(store)
    (folder / "answers.json").unlink()
    os.mkfifo(folder / "answers.json")
    profile = profiles.get(NEW)
    with pytest.raises(ReleaseError, match="not a regular file"):
        profile.answers()
    frames = session(profile, {"id": 1, "method": "account/read", "params": {}})
    answer = next(f for f in frames if f.get("id") == 1)
    assert answer["error"]["code"] == -32603  # an answer, never a hang


def test_the_folder_is_what_a_tool_writes(store: Path) -> None:
    """Every part round-trips through plain JSON: a tool that writes JSON can write a release."""
    folder = learned(store)
    for name in ("release.json", "answers.json", "shapes.json"):
        text = (folder / name).read_bytes()
        assert orjson.loads(orjson.dumps(orjson.loads(text))) == orjson.loads(text)
    assert profiles.get(NEW).release == NEW


def test_a_tool_writes_a_release_folder_the_loader_reads(store: Path) -> None:
    """What ``release learn`` will do: pin the schema, then write release.json and the data files."""
    shipped = releases.default()
    schema_store.write_release(NEW, shipped.bundle(False), shipped.bundle(True), store)
    description = {**shipped.description, "release": NEW}
    data = {name: shipped.data(name) for name in ("answers.json", "shapes.json")}
    folder = releases.write(NEW, description, data)
    assert folder == store / f"codex-cli-{NEW}"
    assert profiles.get(NEW).version_line == f"codex-cli {NEW}" and NEW in profiles.names()
    with pytest.raises(ReleaseError, match=r"release\.json: format"):
        releases.write(NEW, {**description, "format": 9})
    with pytest.raises(ReleaseError, match="never written"):
        releases.write(shipped.version, shipped.description, root=schema_store.SHIPPED_ROOT)
    with pytest.raises(ReleaseError, match="not a data file name"):
        releases.write(NEW, description, {"../x.json": {}})
    assert profiles.get(NEW).release == NEW  # a refused write left the folder as it was
