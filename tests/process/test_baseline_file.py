"""The reviewable baseline: `codex-harness baseline OUT/` writes only the failures, `--baseline` reads them."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from contracts.checks import Check
from contracts.exitcodes import FAILED, OK, USAGE, UsageError
from contracts.report import judge, load_baseline
from contracts.report.baseline_file import baseline_toml
from contracts.report.checks_file import write_checks_json
from harness.cli import main

CHECKS = [
    Check("plain", "fake-process", "usage", "turn 1 usage", "pass", "ok"),
    Check("large", "fake-process", "usage", "turn 1 usage", "fail", 'input 0 != 60 "quoted"\x1b[31m'),
    Check("large", "fake-process", "client", "interrupt -> turn/completed / again", "fail", "late", level="should"),
    Check("weird name", "real", "protocol", "request ids unique", "fail", "id 3 twice"),
    *[Check(f"s{i}", "fake-process", "schema", "frames", "pass", "ok") for i in range(500)],
]


def test_baseline_lists_only_failures_one_line_each_with_detail_as_comment(tmp_path: Path) -> None:
    text = baseline_toml(CHECKS)
    data = tomllib.loads(text)
    assert data["failures"] == [
        "large [fake-process] / client / interrupt -> turn/completed / again",
        "large [fake-process] / usage / turn 1 usage",
        "weird name [real] / protocol / request ids unique",
    ]
    assert "# must: input 0 != 60" in text and "\x1b" not in text  # escaped: a detail quotes what others sent
    assert len(text.splitlines()) < 15  # 504 checks, 3 failures: a file a reviewer reads
    path = tmp_path / "known-failures.toml"
    path.write_text(text)
    verdict = judge(CHECKS, baseline=load_baseline(path))
    assert verdict.exit_code == OK and len(verdict.known) == 3 and not verdict.stale


def test_the_command_writes_what_run_reads(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    report = tmp_path / "out"
    report.mkdir()
    write_checks_json(CHECKS, report / "checks.json")
    assert main(["baseline", str(report)]) == OK
    text = capsys.readouterr().out
    assert text.count("[fake-process] / usage") == 1
    (tmp_path / "b.toml").write_text(text)
    entries = load_baseline(tmp_path / "b.toml")
    assert {e.describe() for e in entries} == {
        "large [fake-process] usage / turn 1 usage",
        "large [fake-process] client / interrupt -> turn/completed / again",
        "weird name [real] protocol / request ids unique",
    }


def test_a_stale_toml_entry_still_fails(tmp_path: Path) -> None:
    path = tmp_path / "b.toml"
    path.write_text('failures = ["plain [fake-process] / usage / turn 1 usage"]\n')
    assert judge(CHECKS, baseline=load_baseline(path)).exit_code == FAILED


@pytest.mark.parametrize(
    "text",
    [
        'failures = ["no target / usage"]\n',
        "failures = 3\n",
        "failures = [" * 5000 + "]" * 5000 + "\n",
        "not toml at all ===\n",
    ],
)
def test_a_malformed_baseline_is_a_usage_error(tmp_path: Path, text: str) -> None:
    path = tmp_path / "b.toml"
    path.write_text(text)
    with pytest.raises(UsageError, match="baseline"):
        load_baseline(path)


def test_baseline_of_a_folder_without_checks_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["baseline", str(tmp_path)]) == USAGE
    assert "codex-harness baseline: cannot read" in capsys.readouterr().err
