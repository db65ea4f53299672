"""A server the scenario foresees going before it answers ``initialize`` (a crash fault there) leaves a correct
outside client nothing to play: ``client / plan followed`` is no failure of it (the fuzzer found careful.py failed
so). The outside record keeps no ``[expect] server_exit`` (client_run judges the exit), so the plan check reads
what the scenario foresaw from the record's meta."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from support import paths

from contracts.exitcodes import OK
from harness.cli import main

CAREFUL = f"{sys.executable} {paths.REPO / 'conformance' / 'clients' / 'careful.py'}"

SCENARIO = """
name = "crash_at_initialize"
description = "the server exits 1 before it answers initialize"

[[turns]]
input = "Say hello"
faults = [{ kind = "crash", at = "initialize", n = 1, exit_code = 1, mid_line = false }]

[expect]
server_trace = "unclosed"
server_exit = 1
allow = [
    { contract = "protocol", what = "unanswered_server_requests", reason = "fault crash" },
    { contract = "schema", what = "server_frames_invalid", reason = "fault crash" },
]

[[expect.turns]]
status = "failed"
server_status = "none"
usage = { input = 0, cache_read = 0, cache_write = 0, output = 0 }
"""


def test_a_correct_client_passes_a_server_that_crashes_at_initialize(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "crash_at_initialize.toml"
    path.write_text(SCENARIO)
    code = main(["run", "--client-cmd", CAREFUL, "--scenario", str(path), "--report", str(tmp_path / "out")])
    out = capsys.readouterr().out
    assert code == OK, out
