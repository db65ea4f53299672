"""fake-codex tells the person debugging a client what it plays and which fault struck where (--quiet: nothing)."""

from __future__ import annotations

import os
import subprocess
import sys

import orjson
import pytest

INIT = orjson.dumps({"id": 1, "method": "initialize", "params": {"clientInfo": {"name": "t", "version": "1"}}})


def _fake(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[bytes]:
    lines = [
        INIT,
        orjson.dumps({"method": "initialized"}),
        orjson.dumps({"id": 2, "method": "thread/start", "params": {}}),
        orjson.dumps({"id": 3, "method": "turn/start", "params": {"threadId": "x", "input": []}}),
    ]
    return subprocess.run(
        [sys.executable, "-m", "fake_server.cli", "app-server", *args],
        input=b"\n".join(lines) + b"\n",
        capture_output=True,
        timeout=60,
        env={**os.environ, **(env or {})},
        check=False,
    )


def test_the_scenario_and_each_fault_struck_are_said_on_stderr(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from harness.cli import main

    main(["run", "--quiet", "--target", "fake-process", "--scenario", "crash_mid_turn", "--report", str(tmp_path)])
    err = (tmp_path / "sessions" / "fake-process" / "crash_mid_turn" / "stderr.txt").read_text()
    assert "fake-codex: playing scenario crash_mid_turn as codex-cli " in err
    assert "fake-codex: fault crash struck at delta 2 of turn 1" in err


def test_quiet_says_nothing() -> None:
    assert b"fake-codex:" not in _fake("--scenario", "crash_mid_turn", "--quiet").stderr
    assert b"fake-codex:" not in _fake("--scenario", "crash_mid_turn", env={"FAKE_CODEX_QUIET": "1"}).stderr


def test_a_recording_names_its_show_command(tmp_path) -> None:  # type: ignore[no-untyped-def]
    err = _fake("--scenario", "plain", "--record", str(tmp_path)).stderr.decode()
    assert f"see it with: codex-harness show {tmp_path}/" in err


def test_a_fault_from_the_command_line_strikes_where_it_says(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """`fake-codex app-server --fault crash:exit_code=101@delta:2` adds the fault to the scenario played: a client
    sees the crash (exit 101) after the second delta, and the fake says so on stderr."""
    from contracts.scenario_file import load, with_faults
    from fake_server.catalogue import load_builtin

    crashed = with_faults(load_builtin("plain"), ["crash:exit_code=101@delta:2"])
    assert [(f.kind, f.at, f.n, f.params.get("exit_code")) for f in crashed.turns[0].faults] == [
        ("crash", "delta", 2, 101)
    ]
    scenario = tmp_path / "plain_crash.toml"
    from contracts.scenario_file import dump

    dump(crashed, scenario)
    assert load(scenario).turns[0].faults == crashed.turns[0].faults  # as a scenario file would have it


@pytest.mark.parametrize(
    ("spec", "says"),
    [
        ("crash@nowhere", "turns[0].faults[0].at: expected one of"),
        ("no_such_fault", "turns[0].faults[0].kind"),
        ("crash:exit_code=101@delta:2#3", "expected a turn in 1..1"),
        ("crash:exit_code", "param=value pairs"),
        ("Crash!", "KIND[:param=value,...]"),
    ],
)
def test_a_bad_fault_flag_is_refused_as_a_scenario_file_is(spec: str, says: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "fake_server.cli", "app-server", "--fault", spec],
        input=b"",
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2 and says in done.stderr.decode(), done.stderr
