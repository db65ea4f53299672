"""Reports: the table a person reads, checks.json, junit.xml, baseline semantics and --strict."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import orjson
import pytest

from contracts.checks import Check
from contracts.exitcodes import FAILED, OK, UsageError
from contracts.report import Report
from harness.report import (
    BaselineEntry,
    judge,
    junit_xml,
    load_baseline,
    read_checks_json,
    render_table,
    write_checks_json,
)


def C(scenario: str, contract: str, status: str, name: str = "n", detail: str = "d", target: str = "fake") -> Check:
    return Check(scenario, target, contract, name, status, detail, "docs/client-rules.md §3")  # type: ignore[arg-type]


CHECKS = [
    C("plain", "terminal_status", "pass"),
    C("plain", "usage", "pass"),
    C("crash", "terminal_status", "fail", "turn 1 status", "Result completed, [expect] declares failed"),
    C("crash", "usage", "warn", "turn 1 usage", "derived differs"),
    C("hang", "terminal_status", "skip", "scenario", "fault hang can only be produced by the fake"),
]


def test_table_shows_rows_columns_and_failures_below() -> None:
    verdict = judge(CHECKS)
    text = render_table(CHECKS, verdict)
    lines = text.splitlines()
    assert lines[0].split() == ["scenario", "terminal_status", "usage"]
    assert any(line.startswith("crash") and "✗ FAIL" in line and "! warn" in line for line in lines)
    assert any(line.startswith("plain") and line.count("✓ pass") == 2 for line in lines)
    assert "Failures:" in text and "Result completed, [expect] declares failed" in text
    assert "Warnings:" in text and "Skipped" in text and "can only be produced by the fake" in text
    assert text.rstrip().endswith("RESULT: FAIL")
    # the failures are the last thing above the verdict: on the last screen of a CI log
    assert text.index("Failures:") > max(text.index("Warnings:"), text.index("Skipped"))
    assert verdict.exit_code == FAILED


def test_ascii_table_and_multi_target_rows() -> None:
    checks = [C("plain", "usage", "pass"), C("plain", "usage", "pass", target="fake-process")]
    text = render_table(checks, ascii_only=True)
    assert "plain [fake]" in text and "plain [fake-process]" in text and "✓" not in text


def test_exit_code_zero_with_only_skips_and_warnings_unless_strict() -> None:
    checks = [c for c in CHECKS if c.status != "fail"]
    assert judge(checks).exit_code == OK
    strict = judge(checks, strict=True)
    assert strict.exit_code == FAILED and len(strict.strict_failures) == 2


def test_baseline_excuses_listed_failures() -> None:
    baseline = [BaselineEntry("crash", "fake", "terminal_status")]
    verdict = judge(CHECKS, baseline=baseline)
    assert verdict.exit_code == OK and len(verdict.known) == 1
    assert "(baseline)" in render_table(CHECKS, verdict)


def test_stale_baseline_entry_fails_the_run() -> None:
    baseline = [BaselineEntry("plain", "fake", "usage")]
    verdict = judge([c for c in CHECKS if c.status != "fail"], baseline=baseline)
    assert verdict.exit_code == FAILED and verdict.stale == baseline
    assert "Stale baseline entries" in render_table(CHECKS, verdict)


def test_baseline_entry_for_something_not_run_is_not_stale() -> None:
    verdict = judge(
        CHECKS, baseline=[BaselineEntry("hang", "fake", "terminal_status"), BaselineEntry("x", "fake", "usage")]
    )
    assert verdict.stale == []


def test_baseline_by_check_name_is_exact() -> None:
    verdict = judge(CHECKS, baseline=[BaselineEntry("crash", "fake", "terminal_status", "turn 2 status")])
    assert verdict.exit_code == FAILED and verdict.stale == []


def test_checks_json_round_trip_and_as_baseline(tmp_path: Path) -> None:
    path = write_checks_json(CHECKS, tmp_path / "checks.json")
    data = orjson.loads(path.read_bytes())
    assert isinstance(data, list) and len(data) == len(CHECKS)
    assert set(data[0]) >= {"scenario", "target", "contract", "status", "detail", "reference"}
    assert read_checks_json(path) == CHECKS
    baseline = load_baseline(path)  # a previous checks.json is a baseline of its failures
    assert baseline == [BaselineEntry("crash", "fake", "terminal_status", "turn 1 status")]
    assert judge(CHECKS, baseline=baseline).exit_code == OK


@pytest.mark.parametrize("content", [b"{not json", b'{"a": 1}', b'[{"scenario": 1}]'])
def test_bad_baseline_is_a_usage_error(tmp_path: Path, content: bytes) -> None:
    (tmp_path / "b.json").write_bytes(content)
    with pytest.raises(UsageError, match="baseline"):
        load_baseline(tmp_path / "b.json")
    with pytest.raises(UsageError):
        load_baseline(tmp_path / "missing.json")


def test_junit_counts_and_elements() -> None:
    root = ET.fromstring(junit_xml(CHECKS))
    assert root.get("tests") == "5" and root.get("failures") == "1" and root.get("skipped") == "1"
    suites = {s.get("name"): s for s in root.iter("testsuite")}
    assert set(suites) == {"plain[fake]", "crash[fake]", "hang[fake]"}
    failure = next(root.iter("failure"))
    assert "declares failed" in (failure.get("message") or "")


def test_empty_run_says_so() -> None:
    assert render_table([]) == "no checks ran\n\nRESULT: NOTHING JUDGED\n"
    assert judge([]).exit_code == FAILED


def test_a_cell_shows_what_was_judged_not_a_sub_check_that_skipped() -> None:
    """A reported status judged and passed, its server-status sub-check skipped: the cell says pass."""
    checks = [
        C("plain", "terminal_status", "pass", "turn 1 status"),
        C("plain", "terminal_status", "skip", "turn 1 server status", "not on the wire"),
        C("hang", "terminal_status", "skip", "scenario", "fake only"),
    ]
    rows = {line.split()[0]: line for line in render_table(checks, ascii_only=True).splitlines()[2:4]}
    assert rows["plain"].split()[1] == "ok", rows
    assert rows["hang"].split()[1] == "skip", rows  # nothing judged: still a skip


def test_a_scenario_whose_judged_checks_passed_is_a_pass_in_progress_lines() -> None:
    from harness.runner import ScenarioRun

    run = ScenarioRun("plain", "fake", [C("plain", "usage", "pass"), C("plain", "latency", "skip")])
    assert run.status == "pass"
    assert ScenarioRun("plain", "fake", [C("plain", "latency", "skip")]).status == "skip"
    assert ScenarioRun("plain", "fake", [C("plain", "usage", "warn"), C("plain", "x", "skip")]).status == "warn"
    assert ScenarioRun("plain", "fake", []).status == "skip"  # nothing judged is never a pass


def _outside_like(n: int) -> list[Check]:
    """``n`` scenarios of an outside client: one failure, and per scenario the structural skips of its kind."""
    out = []
    for i in range(n):
        out.append(Check(f"s{i}", "fake-process", "terminal_status", "turn 1 status", "pass", "ok"))
        out.append(Check(f"s{i}", "fake-process", "latency", "cancel", "skip", "on the client's clock", applies=False))
        out.append(Check(f"s{i}", "fake-process", "trace_closure", "", "skip", "own trace not judged", applies=False))
        out.append(Check(f"s{i}", "fake-process", "usage", "turn 1 usage", "skip", "the client reported no usage"))
    out.append(Check("s0", "fake-process", "usage", "turn 2 usage", "fail", "input 0 != 60"))
    return out


def test_skips_are_one_line_per_reason_and_structural_columns_are_named_once() -> None:
    checks = _outside_like(40)
    text = render_table(checks)
    lines = text.splitlines()
    header = next(line for line in lines if line.startswith("scenario"))
    assert "latency" not in header and "trace_closure" not in header  # no column of dashes
    assert sum("own trace not judged" in line for line in lines) == 1
    assert sum("the client reported no usage" in line for line in lines) == 1
    assert "40 check(s) in 40 scenario(s)" in text
    assert len(lines) < 40 + 25  # one row a scenario, not five skip lines a scenario
    assert text.index("Failures:") > text.index("Skipped")
    verbose = render_table(checks, verbose=True)
    assert sum("the client reported no usage" in line for line in verbose.splitlines()) == 40


def test_junit_groups_structural_skips_and_carries_times() -> None:
    checks = _outside_like(30)
    times = {(f"s{i}", "fake-process"): 2.0 for i in range(30)}
    root = ET.fromstring(junit_xml(checks, times=times))
    cases = list(root.iter("testcase"))
    not_judged = [c for c in cases if c.get("classname") == "not-judged"]
    assert len(not_judged) == 2  # one per reason, not 60 skipped cases
    assert all(c.get("time") is not None for c in cases)
    assert abs(float(root.get("time")) - 60.0) < 0.01


def test_judged_line_names_client_target_release_and_harness() -> None:
    report = Report(checks=CHECKS, judged={"client": "the command 'x'", "target": "fake", "release": "0.171.0",
                                           "harness": "9.9"})
    first = render_table(report).splitlines()[0]
    assert first == "Judged: the command 'x' on target fake (release 0.171.0), by codex-harness 9.9"
