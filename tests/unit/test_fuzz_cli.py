"""``codex-harness fuzz``: the report, the exit codes, the written failure."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from codex_client import usage as client_usage
from harness import cli


def test_a_passing_run_prints_rate_and_coverage_and_exits_0(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["fuzz", "--examples", "15", "--seed", "3", "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "examples run: 15" in out
    assert "examples/s" in out
    assert "coverage: faults " in out and "actions " in out
    assert "RESULT: PASS" in out


def test_a_failure_exits_1_with_its_scenario_file(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    def summed_total(self: Any, token_usage: Any) -> Any:
        total = client_usage.breakdown(token_usage.get("total")) or client_usage.zero()
        self.fields = client_usage.add(self.fields, total)
        self.accepted += 1
        return total

    monkeypatch.setattr(client_usage.TurnUsage, "apply", summed_total)
    code = cli.main(["fuzz", "--examples", "200", "--seed", "1", "--out", str(tmp_path), "--quiet"])
    out = capsys.readouterr().out
    assert code == 1
    assert "RESULT: FAIL" in out and "usage" in out
    files = sorted(p.name for p in tmp_path.iterdir())
    assert any(n.endswith(".toml") for n in files) and any(n.endswith(".checks.json") for n in files)
    toml = next(p for p in tmp_path.iterdir() if p.suffix == ".toml")
    assert f"--scenario {toml}" in out


@pytest.mark.parametrize("argv", [["fuzz", "--examples", "0"], ["fuzz", "--examples", "x"]])
def test_bad_arguments_are_usage_errors(argv: list[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        code = cli.main(argv)
        raise SystemExit(code)
    assert exc.value.code == 3


def test_out_must_be_a_directory(tmp_path: Path) -> None:
    path = tmp_path / "file"
    path.write_text("x")
    assert cli.main(["fuzz", "--examples", "1", "--out", str(path)]) == 3


def test_the_reproduce_line_of_an_outside_client_keeps_what_shaped_its_play() -> None:
    """A finding under 0.163.0's profile, a declared budget or a set deadline may not come back without them: the
    reproduce line (printed, and in NAME.checks.json) names them with the client's command, quoted for a shell."""
    import argparse
    import shlex

    from harness.commands import fuzz as fuzz_command

    parser = argparse.ArgumentParser()
    fuzz_command.add_arguments(parser)
    argv = ["--client-cmd", "python my client.py", "--release", "0.163.0", "--budget", "turn_timeout_ms=9000"]
    replay = fuzz_command._replay(parser.parse_args([*argv, "--client-deadline", "30"]))
    assert shlex.split(replay) == [*argv, "--client-deadline", "30"]
    assert fuzz_command._replay(parser.parse_args([])) == ""
