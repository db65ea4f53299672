"""``codex-harness run`` and ``scenarios``: table, exit codes, report artefacts, baseline, --strict."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import orjson
import pytest

from contracts.checks import CONTRACT_NAMES
from contracts.exitcodes import FAILED, INVALID_INPUT, OK, USAGE
from harness.cli import main

PLAIN = """
name = "{name}"
description = "one plain turn"

[[turns]]
input = "Say hello"

[expect]
server_trace = "none"
client_trace = "none"

[[expect.turns]]
status = "{status}"
server_status = "completed"

[expect.turns.usage]
input = 60
cache_read = 40
output = 20
"""


def scenario_file(tmp_path: Path, name: str = "mine", status: str = "completed") -> Path:
    path = tmp_path / f"{name}.toml"
    path.write_text(PLAIN.format(name=name, status=status))
    return path


def test_run_passes_and_prints_the_table(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "--scenario", str(scenario_file(tmp_path))]) == OK
    captured = capsys.readouterr()
    judged, header = captured.out.splitlines()[0], captured.out.splitlines()[1].split()
    assert judged.startswith("Judged: the harness's own trio client on target fake (release ")
    # a contract that could not apply at all (structural skips only) is named once below, not a column of dashes
    assert header[0] == "scenario" and set(header[1:]) <= set(CONTRACT_NAMES)
    for contract in set(CONTRACT_NAMES) - set(header):
        assert f"[{contract}]" in captured.out.split("Not judged for this kind of run", 1)[1]
    assert captured.out.rstrip().endswith("RESULT: PASS")
    assert "[1/1] mine [fake]" in captured.err  # progress while it runs


def test_failure_exits_1_and_is_listed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "--scenario", str(scenario_file(tmp_path, status="failed"))]) == FAILED
    out = capsys.readouterr().out
    assert "Failures:" in out and "terminal_status / turn 1 status" in out


def test_report_artefacts_are_complete(tmp_path: Path) -> None:
    report = tmp_path / "report"
    files = [scenario_file(tmp_path, "one"), scenario_file(tmp_path, "two")]
    assert main(["run", "--quiet", "--report", str(report), *(f"--scenario={f}" for f in files)]) == OK
    checks = orjson.loads((report / "checks.json").read_bytes())
    assert {(c["scenario"], c["target"], c["contract"]) for c in checks} == {
        (s, "fake", c) for s in ("one", "two") for c in CONTRACT_NAMES
    }
    assert all(
        {"scenario", "target", "contract", "status", "detail", "reference", "level", "citation"} <= set(c)
        for c in checks
    )
    root = ET.fromstring((report / "junit.xml").read_bytes())
    structural = {c["detail"] for c in checks if c["status"] == "skip" and not c["applies"]}
    judged_here = [c for c in checks if c["status"] != "skip" or c["applies"]]
    assert int(root.get("tests", "0")) == len(judged_here) + len(structural)  # one case per structural reason
    assert orjson.loads((report / "run.json").read_bytes())["client"] == "the harness's own trio client"
    for name in ("one", "two"):
        session = report / "sessions" / "fake" / name
        assert (session / "record.json").is_file() and (session / "wire.jsonl").stat().st_size > 0
        assert (session / "stderr.txt").is_file()
        assert main(["show", str(session)]) == OK


def test_baseline_excuses_known_failures_and_catches_stale_entries(tmp_path: Path) -> None:
    bad = scenario_file(tmp_path, "flaky", status="failed")
    report = tmp_path / "r1"
    assert main(["run", "--quiet", "--scenario", str(bad), "--report", str(report)]) == FAILED
    baseline = report / "checks.json"
    assert main(["run", "--quiet", "--scenario", str(bad), "--baseline", str(baseline)]) == OK
    fixed = scenario_file(tmp_path, "flaky", status="completed")
    assert main(["run", "--quiet", "--scenario", str(fixed), "--baseline", str(baseline)]) == FAILED


@pytest.mark.parametrize("dropped", [("level", "citation", "applies"), ("level", "citation", "applies", "at")])
def test_a_checks_json_from_before_levels_still_works_as_a_baseline(tmp_path: Path, dropped: tuple[str, ...]) -> None:
    """checks.json as earlier releases wrote it (no level, no citation, no applies; before that no ``at``) is read
    back."""
    from harness.report import read_checks_json

    bad = scenario_file(tmp_path, "flaky", status="failed")
    report = tmp_path / "r1"
    assert main(["run", "--quiet", "--scenario", str(bad), "--report", str(report)]) == FAILED
    rows = orjson.loads((report / "checks.json").read_bytes())
    assert all(r["level"] in ("must", "should") and r["citation"] == r["reference"] for r in rows)
    old = tmp_path / "old-checks.json"
    old.write_bytes(orjson.dumps([{k: v for k, v in r.items() if k not in dropped} for r in rows]))
    back = read_checks_json(old)
    assert [(c.key, c.status, c.level, c.citation) for c in back] == [
        ((r["scenario"], r["target"], r["contract"], r["name"]), r["status"], "must", r["reference"]) for r in rows
    ]
    assert main(["run", "--quiet", "--scenario", str(bad), "--baseline", str(old)]) == OK
    fixed = scenario_file(tmp_path, "flaky", status="completed")
    assert main(["run", "--quiet", "--scenario", str(fixed), "--baseline", str(old)]) == FAILED  # stale


def test_strict_fails_on_skips(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "noexpect.toml"
    path.write_text('name = "noexpect"\ndescription = "no truth"\n[[turns]]\ninput = "hi"\n')
    assert main(["run", "--quiet", "--scenario", str(path)]) in (OK, FAILED)
    capsys.readouterr()
    assert main(["run", "--quiet", "--strict", "--scenario", str(path)]) == FAILED
    assert "--strict" in capsys.readouterr().out


def test_invalid_scenario_file_exits_2_naming_file_and_key(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "broken.toml"
    path.write_text('name = "broken"\ndescription = "x"\n[[turns]]\ninput = 3\n')
    assert main(["run", "--scenario", str(path)]) == INVALID_INPUT
    err = capsys.readouterr().err
    assert "broken.toml" in err and "turns[0].input" in err


def test_unknown_scenario_and_missing_files_are_usage_errors(tmp_path: Path) -> None:
    assert main(["run", "--scenario", "no_such_scenario"]) == USAGE
    assert main(["run", "--scenario", str(tmp_path / "missing.toml")]) == USAGE
    assert main(["run", "--scenario-dir", str(tmp_path / "nodir")]) == USAGE
    assert main(["run", "--baseline", str(tmp_path / "missing.json")]) == USAGE


def test_scenario_dir_runs_every_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    scenario_file(tmp_path, "a")
    scenario_file(tmp_path, "b")
    assert main(["run", "--quiet", "--scenario-dir", str(tmp_path)]) == OK
    out = capsys.readouterr().out
    assert "\na " in out and "\nb " in out


def test_scenarios_lists_the_catalogue(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["scenarios"]) == OK
    lines = capsys.readouterr().out.splitlines()
    plain = next(line for line in lines if line.startswith("plain "))
    assert "fake,fake-process" in plain
    assert main(["scenarios", "--json"]) == OK
    rows = orjson.loads(capsys.readouterr().out)
    assert all({"name", "targets", "description"} <= set(r) for r in rows)
    crash = [r for r in rows if r["faults"]]
    assert crash and all("real" not in r["targets"] for r in crash)


def test_real_target_without_a_binary_is_a_usage_error(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("CODEX_BIN", raising=False)
    assert main(["run", "--target", "real", "--scenario", str(scenario_file(tmp_path))]) == USAGE
    assert "no real codex selected" in capsys.readouterr().err
    assert main(["run", "--target", "real", "--codex", str(tmp_path / "nope")]) == USAGE
