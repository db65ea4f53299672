"""`show DIR` gives every record the verdict `run` gave it: check for check, whatever kind of record it is."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import orjson
import pytest
from support import paths

from contracts.checks import Check
from contracts.exitcodes import FAILED, OK
from harness.cli import main
from harness.commands.show import saved_verdict

REPO = paths.REPO
CAREFUL = f"{sys.executable} {REPO / 'conformance' / 'clients' / 'careful.py'}"
BUGGY = f"{sys.executable} {REPO / 'conformance' / 'clients' / 'buggy.py'} --reasoning-in-output"


def _run_then_show(tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str]) -> int:
    """Run ``argv`` into a report, then `show` every session it saved: the same checks, the same exit code."""
    report = tmp_path / "report"
    main(["run", "--quiet", "--report", str(report), *argv])
    capsys.readouterr()
    every = [Check.from_dict(d) for d in orjson.loads((report / "checks.json").read_bytes())]
    sessions = [d for d in (report / "sessions").glob("*/*") if (d / "record.json").is_file()]
    assert sessions
    for session in sessions:
        target, scenario = session.parent.name, session.name
        given = [c for c in every if (c.scenario, c.target) == (scenario, target)]
        assert saved_verdict(session) == given
        code = main(["show", str(session)])
        out = capsys.readouterr().out
        assert "verdict: as run gave it" in out
        wanted = FAILED if any(c.status == "fail" and c.level == "must" for c in given) else OK
        assert code == wanted, out[-2000:]
    return len(sessions)


def test_our_client_on_the_fake(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert _run_then_show(tmp_path, capsys, ["--scenario", "plain", "--scenario", "approval_cancel"]) == 2


def test_our_client_over_a_websocket(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["--transport", "ws", "--target", "fake-process", "--scenario", "plain", "--scenario", "ws_close_mid_turn"]
    assert _run_then_show(tmp_path, capsys, argv) == 2


@pytest.mark.parametrize("client", [CAREFUL, BUGGY], ids=["careful", "buggy"])
def test_an_outside_client(client: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["--client-cmd", client, "--jobs", "1", "--scenario", "plain", "--scenario", "interrupt_ignored"]
    assert _run_then_show(tmp_path, capsys, argv) == 2


@pytest.mark.real_codex
def test_an_outside_client_on_the_real_binary(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    codex = os.environ.get("CODEX_BIN")
    if not codex:
        pytest.skip("no real codex binary (CODEX_BIN)")
    argv = ["--client-cmd", CAREFUL, "--target", "real", "--codex", codex, "--scenario", "plain"]
    assert _run_then_show(tmp_path, capsys, argv) == 1


def test_a_planted_verdict_link_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    report = tmp_path / "report"
    main(["run", "--quiet", "--report", str(report), "--scenario", "plain"])
    session = report / "sessions" / "fake" / "plain"
    (session / "checks.json").unlink()
    (session / "checks.json").symlink_to("/etc/passwd")
    capsys.readouterr()
    assert main(["show", str(session)]) == 3
    assert "checks.json" in capsys.readouterr().err
