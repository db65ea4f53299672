"""Never green on nothing: a target that cannot run at all exits 3 at once, a run that judged nothing exits 1.

``run``, ``diff``, ``latency`` and ``validate-release`` agree: a missing, non-executable or broken binary
(``/bin/false``, one that hangs on ``--version``) is a usage error said once, before any scenario; a run in
which every scenario was skipped prints ``RESULT: NOTHING JUDGED`` and exits 1, its skips still listed.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from contracts.checks import Check
from contracts.exitcodes import FAILED, OK, USAGE
from contracts.report import FidelityEntry, release_report
from harness.cli import main
from harness.codex_bin import VERSION_TIMEOUT_ENV
from harness.report import judge, render_table, summary_dict

#: The preflight bound the tests use instead of the default (a hanging ``--version`` costs this much).
FAST_TIMEOUT_S = 0.5
#: What "at once" means here, on a loaded 2-core host (the default bound is 7 s; tests use 0.5 s).
AT_ONCE_S = 6.0

COMMANDS = {
    "run": ["run", "--target", "real", "--scenario", "plain"],
    "diff": ["diff", "--scenario", "plain"],
    "latency": ["latency", "--target", "real", "--scenario", "long_stream", "--samples", "1", "--warmups", "0"],
    "validate-release": ["validate-release", "--latency-samples", "0", "--scenario", "plain"],
}


def _script(path: Path, body: str) -> Path:
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)
    return path


@pytest.fixture(autouse=True)
def _fast_preflight(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(VERSION_TIMEOUT_ENV, str(FAST_TIMEOUT_S))
    monkeypatch.delenv("CODEX_BIN", raising=False)


@pytest.fixture
def hanging(tmp_path: Path) -> Path:
    """A binary that never answers ``--version`` (and starts a child, as the npm launcher does)."""
    return _script(tmp_path / "hanging-codex", "sleep 60 &\nsleep 60\n")


def broken_binaries(tmp_path: Path) -> dict[str, tuple[Path, str]]:
    """name → (path, what the one error line says)."""
    not_executable = tmp_path / "not-executable"
    not_executable.write_text("#!/bin/sh\necho codex-cli 0.171.0\n")
    return {
        "bin-false": (Path("/bin/false"), "--version gave no version (exit 1)"),
        "missing": (tmp_path / "nowhere" / "codex", "codex binary not found"),
        "not-executable": (not_executable, "is not executable"),
        "directory": (tmp_path, "is not a file"),
        "unpinned": (_script(tmp_path / "future", "echo codex-cli 99.0.0\n"), "no pinned schema for codex-cli 99"),
    }


BROKEN = ["bin-false", "missing", "not-executable", "directory"]


@pytest.mark.parametrize("command", list(COMMANDS))
@pytest.mark.parametrize("broken", BROKEN)
def test_a_target_that_cannot_run_is_a_usage_error_said_once(
    command: str, broken: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    binary, says = broken_binaries(tmp_path)[broken]
    started = time.monotonic()
    assert main([*COMMANDS[command], "--codex", str(binary)]) == USAGE
    elapsed = time.monotonic() - started
    captured = capsys.readouterr()
    assert captured.err.count(says) == 1, captured.err
    assert captured.err.startswith(f"codex-harness {command}: ")
    assert "Traceback" not in captured.err + captured.out
    assert "RESULT: PASS" not in captured.out and "[1/" not in captured.err  # no scenario was started
    assert elapsed < AT_ONCE_S


@pytest.mark.parametrize("command", list(COMMANDS))
def test_a_version_that_hangs_is_cut_at_the_bound(
    command: str, hanging: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    started = time.monotonic()
    assert main([*COMMANDS[command], "--codex", str(hanging)]) == USAGE
    elapsed = time.monotonic() - started
    err = capsys.readouterr().err
    assert err.count(f"--version did not answer within {FAST_TIMEOUT_S:g} s") == 1, err
    assert FAST_TIMEOUT_S <= elapsed < AT_ONCE_S


@pytest.mark.parametrize("command", ["run", "diff", "latency"])
def test_a_release_without_a_pinned_schema_cannot_run(
    command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    binary, says = broken_binaries(tmp_path)["unpinned"]
    assert main([*COMMANDS[command], "--codex", str(binary)]) == USAGE
    assert capsys.readouterr().err.count(says) == 1


def test_nothing_is_written_before_the_refusal(tmp_path: Path) -> None:
    report = tmp_path / "report"
    assert main([*COMMANDS["run"], "--codex", "/bin/false", "--report", str(report)]) == USAGE
    assert not report.exists()


def test_the_codex_bin_variable_is_checked_too(monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    monkeypatch.setenv("CODEX_BIN", "/bin/false")
    assert main(COMMANDS["run"]) == USAGE
    assert "gave no version" in capsys.readouterr().err


def test_the_command_line_as_a_user_runs_it(hanging: Path) -> None:
    """The installed entry point, /bin/false and a hanging --version: exit 3, one line, no traceback."""
    exe = Path(sys.executable).with_name("codex-harness")
    argv = [str(exe)] if exe.exists() else [sys.executable, "-m", "harness.cli"]
    for binary in ("/bin/false", str(hanging)):
        started = time.monotonic()
        done = subprocess.run(
            [*argv, "run", "--target", "real", "--codex", binary],
            capture_output=True,
            text=True,
            timeout=60,
            env={**os.environ, VERSION_TIMEOUT_ENV: str(FAST_TIMEOUT_S)},
        )
        elapsed = time.monotonic() - started
        assert done.returncode == USAGE, done
        assert done.stdout == "" and len(done.stderr.strip().splitlines()) == 1, done.stderr
        assert elapsed < AT_ONCE_S + 5  # plus the interpreter's start-up


# --- nothing judged ---------------------------------------------------------------------------------

REAL_ONLY = """
name = "{name}"
description = "a scenario only the real binary plays"
targets = ["real"]

[[turns]]
input = "hi"
"""


def test_every_scenario_skipped_is_nothing_judged(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    files = []
    for name in ("only_real_a", "only_real_b"):
        files.append(tmp_path / f"{name}.toml")
        files[-1].write_text(REAL_ONLY.format(name=name))
    report = tmp_path / "report"
    argv = ["run", "--quiet", "--report", str(report), *(f"--scenario={f}" for f in files)]
    assert main(argv) == FAILED
    out = capsys.readouterr().out
    assert "\nRESULT: NOTHING JUDGED\n" in out
    assert "RESULT: PASS" not in out
    assert "only_real_a [fake]" in out and "only_real_b [fake]" in out  # the scenarios not played, named
    assert "0 passed, 0 failed" in out


def test_fake_only_scenarios_on_the_real_target_judge_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The real target can run (its version is pinned) but every scenario asked for is fake-only."""
    codex = _script(tmp_path / "codex", "echo codex-cli 0.171.0\n")
    argv = ["run", "--target", "real", "--codex", str(codex), "--scenario", "crash_mid_turn", "--scenario", "flood"]
    assert main(argv) == FAILED
    out = capsys.readouterr().out
    assert out.rstrip().endswith("RESULT: NOTHING JUDGED")
    assert "crash_mid_turn [real]" in out and "flood [real]" in out  # the skips, with their reasons
    assert "can only be produced by the fake app-server" in out


def _check(status: str) -> Check:
    return Check("s", "fake", "usage", "n", status, "d", "")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("statuses", "result", "code"),
    [
        ((), "NOTHING JUDGED", FAILED),
        (("skip", "skip"), "NOTHING JUDGED", FAILED),
        (("warn", "skip"), "NOTHING JUDGED", FAILED),
        (("pass", "skip"), "PASS", OK),
        (("fail", "skip"), "FAIL", FAILED),
        (("pass", "fail"), "FAIL", FAILED),
    ],
)
def test_judge_says_nothing_judged(statuses: tuple[str, ...], result: str, code: int) -> None:
    checks = [_check(s) for s in statuses]
    verdict = judge(checks)
    assert (verdict.result, verdict.exit_code) == (result, code)
    assert render_table(checks, verdict).rstrip().endswith(f"RESULT: {result}")
    assert summary_dict(checks, verdict)["result"] == result


def test_validate_release_with_nothing_judged_is_not_ok() -> None:
    report = release_report("9.9.9", "c")
    assert report.schema is not None and report.fidelity is not None
    report.schema.pin = "new"
    assert (judge(report).result, judge(report).exit_code) == ("NOTHING JUDGED", FAILED)
    report.checks = [_check("skip")]
    fake_only = {"scenario": "x", "equal": False, "skipped": "fake-only", "error": None, "differences": []}
    report.fidelity.entries = [FidelityEntry(fake_only)]
    assert judge(report).result == "NOTHING JUDGED"
    report.checks = [_check("pass")]
    assert (judge(report).result, judge(report).exit_code) == ("PASS", OK)
    report.checks = [_check("fail")]
    assert (judge(report).result, judge(report).exit_code) == ("FAIL", FAILED)
