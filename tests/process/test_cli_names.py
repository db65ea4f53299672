"""One name for the output folder in every command (``--report``; ``--out`` kept as an alias), and ``--version``."""

from __future__ import annotations

import subprocess
import sys

import pytest

from contracts.version import harness_version
from harness.cli import build_parser, main

FOLDER_COMMANDS = ("run", "latency", "fuzz", "matrix", "validate-release")


def _subparser(name: str):  # type: ignore[no-untyped-def]
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    return sub.choices[name]  # type: ignore[union-attr]


@pytest.mark.parametrize("command", FOLDER_COMMANDS)
def test_every_command_names_its_output_folder_report_and_keeps_out(command: str) -> None:
    action = next(a for a in _subparser(command)._actions if "--report" in a.option_strings)
    assert action.option_strings[0] == "--report" and "--out" in action.option_strings
    extra = ["--codex", "x"] if command in ("matrix",) else []
    ns_report = _subparser(command).parse_args([*extra, "--report", "d"])
    ns_out = _subparser(command).parse_args([*extra, "--out", "d"])
    assert str(getattr(ns_report, action.dest)) == str(getattr(ns_out, action.dest)) == "d"


def test_codex_harness_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["--version"])
    assert exc.value.code == 0
    assert capsys.readouterr().out.strip() == f"codex-harness {harness_version()}"


def test_fake_codex_names_the_harness_version_on_request() -> None:
    def fake(*args: str) -> str:
        done = subprocess.run(
            [sys.executable, "-m", "fake_server.cli", *args], capture_output=True, text=True, timeout=60, check=True
        )
        return done.stdout.strip()

    assert fake("--version").startswith("codex-cli ")  # as the real binary, for clients that parse it
    assert fake("--version", "--harness") == f"codex-harness {harness_version()}"
