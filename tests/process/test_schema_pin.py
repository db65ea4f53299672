"""``codex-harness schema pin`` against a stand-in binary: storing, failures and exit codes."""

from __future__ import annotations

import stat
import sys
import time
import uuid
from pathlib import Path

import pytest

from codex_client.process import run_marker, set_run_marker
from conformance.noleak import marked_processes
from contracts import schema_store
from contracts.exitcodes import FAILED, OK, USAGE
from harness.cli import main

FAKE_CODEX = f"""#!{sys.executable}
import json, os, sys, time
args = sys.argv[1:]
if args == ["--version"]:
    print("codex-cli 9.8.7")
    sys.exit(0)
mode = os.environ.get("FAKE_CODEX_MODE", "ok")
if mode == "fail":
    print("generation exploded", file=sys.stderr)
    sys.exit(2)
if mode == "hang":
    time.sleep(120)
out = args[args.index("--out") + 1]
os.makedirs(os.path.join(out, "v2"), exist_ok=True)
methods = ["initialize", "thread/start"] + (["thread/settings/update"] if "--experimental" in args else [])
variants = [
    {{"type": "object", "required": ["id", "method"], "properties": {{"method": {{"enum": [m]}}}}}} for m in methods
]
with open(os.path.join(out, "ClientRequest.json"), "w") as fh:
    json.dump({{"title": "ClientRequest", "oneOf": variants}}, fh)
with open(os.path.join(out, "v2", "ThreadStartResponse.json"), "w") as fh:
    json.dump({{"title": "ThreadStartResponse", "type": "object", "properties": {{}}}}, fh)
"""


@pytest.fixture
def fake_codex(tmp_path: Path) -> Path:
    path = tmp_path / "bin" / "codex"
    path.parent.mkdir()
    path.write_text(FAKE_CODEX)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def test_pin_stores_both_bundles_under_the_version(fake_codex: Path, tmp_path: Path, capsys) -> None:
    store = tmp_path / "store"
    assert main(["schema", "pin", "--codex", str(fake_codex), "--out", str(store)]) == OK
    assert "pinned codex-cli 9.8.7 (new): 2 stable and 2 experimental" in capsys.readouterr().out
    assert schema_store.pinned_releases(store) == ["9.8.7"]
    stable = schema_store.load_bundle("9.8.7", root=store)
    experimental = schema_store.load_bundle("9.8.7", experimental=True, root=store)
    assert sorted(stable) == ["ClientRequest.json", "v2/ThreadStartResponse.json"]
    assert len(experimental["ClientRequest.json"]["oneOf"]) == 3
    meta = schema_store.load_meta("9.8.7", store)
    assert meta["codex_version"] == "9.8.7" and meta["bundles"]["stable"]["schema_files"] == 2
    assert main(["schema", "pin", "--codex", str(fake_codex), "--out", str(store)]) == OK
    assert "(unchanged)" in capsys.readouterr().out
    # The pinned directory is a valid side of `schema diff`.
    assert main(["schema", "diff", str(store / "codex-cli-9.8.7"), str(store / "codex-cli-9.8.7")]) == OK


def test_pin_into_an_unwritable_target_exits_3(fake_codex: Path, tmp_path: Path, capsys) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    assert main(["schema", "pin", "--codex", str(fake_codex), "--out", str(blocker / "store")]) == USAGE
    err = capsys.readouterr().err
    assert "not a writable directory" in err and "$CODEX_HARNESS_STORE" in err


def test_pin_with_a_missing_binary_exits_3(tmp_path: Path, capsys, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CODEX_BIN", raising=False)
    assert main(["schema", "pin", "--codex", str(tmp_path / "nope"), "--out", str(tmp_path)]) == USAGE
    assert "not found" in capsys.readouterr().err
    assert main(["schema", "pin", "--out", str(tmp_path)]) == USAGE
    assert "--codex PATH" in capsys.readouterr().err


def test_pin_when_generation_fails_exits_1(fake_codex: Path, tmp_path: Path, capsys, monkeypatch) -> None:
    monkeypatch.setenv("FAKE_CODEX_MODE", "fail")
    assert main(["schema", "pin", "--codex", str(fake_codex), "--out", str(tmp_path / "s")]) == FAILED
    assert "generation exploded" in capsys.readouterr().err
    assert schema_store.pinned_releases(tmp_path / "s") == []


def test_pin_kills_a_hanging_generator(fake_codex: Path, tmp_path: Path, capsys, monkeypatch) -> None:
    monkeypatch.setenv("FAKE_CODEX_MODE", "hang")
    previous = set_run_marker(uuid.uuid4().hex)  # every start carries it: a leftover is found by it
    try:
        started = time.monotonic()
        argv = ["schema", "pin", "--codex", str(fake_codex), "--out", str(tmp_path / "s"), "--timeout", "1"]
        assert main(argv) == FAILED
        assert time.monotonic() - started < 30
        assert "did not finish within 1 s" in capsys.readouterr().err
        deadline = time.monotonic() + 5
        while (left := marked_processes(run_marker())) and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        set_run_marker(previous)
    assert not left, "the hanging generator outlived the pin"
