"""``codex-harness validate-release``: the report, its verdict and exit codes (the real binary for a short run)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from contracts import schema_store
from contracts.checks.base import Check
from contracts.exitcodes import FAILED, OK
from contracts.report import FidelityEntry, Report, judge, release_report
from contracts.schema_diff import Change, ChangeKind, SchemaDiff
from harness.cli import main
from harness.release_validation import model_level_scenarios
from harness.report.documents import release_json
from harness.report.markdown import render_markdown


def _release(version: str, codex: str, pin: str, store: str = "") -> Report:
    report = release_report(version, codex, store=store)
    assert report.schema is not None
    report.schema.pin = pin
    return report


def test_verdict_and_markdown() -> None:
    report = _release("9.9.9", "/bin/codex", "new", "/s")
    report.checks = [Check("plain", "real", "usage", "turn 1 usage", "pass", "")]
    assert judge(report).result == "PASS"
    assert "no client-breaking change found" in render_markdown(report)
    assert report.schema is not None
    report.schema.compared_with = "0.171.0"
    report.schema.diff = SchemaDiff(
        "0.171.0",
        "9.9.9",
        [
            Change(ChangeKind.METHOD_REMOVED, "ClientRequest", "turn/interrupt", breaking=True),
            Change(ChangeKind.METHOD_ADDED, "ClientRequest", "turn/pause"),
        ],
    )
    assert judge(report).result == "FAIL"
    text = render_markdown(report)
    assert "BREAKS CLIENTS" in text and "method_removed ClientRequest turn/interrupt" in text
    assert "methods added: turn/pause" in text
    body = release_json(report)
    assert body["schema"]["breaking"] and body["schema"]["added_methods"] == ["turn/pause"]
    assert (body["verdict"], body["result"]) == ("breaks clients", "FAIL")


def test_failed_check_or_fidelity_breaks() -> None:
    report = _release("1.0.0", "c", "already pinned, identical")
    assert report.fidelity is not None and report.schema is not None
    report.checks = [Check("plain", "real", "usage", "turn 1 usage", "fail", "input 1 != 2")]
    assert judge(report).result == "FAIL"
    assert "FAIL plain usage turn 1 usage: input 1 != 2" in render_markdown(report)
    assert render_markdown(report).startswith("# codex-cli 1.0.0: FAILS: the server violates a contract")
    report.checks = []
    differs = {"scenario": "plain", "equal": False, "skipped": None, "error": None, "differences": []}
    report.fidelity.entries = [FidelityEntry(differs)]
    assert judge(report).result == "FAIL"
    assert "FAILS: the fake differs from the release (the harness's own)" in render_markdown(report)
    fake_only = {"scenario": "x", "equal": False, "skipped": "fake-only", "error": None, "differences": []}
    report.fidelity.entries = [FidelityEntry(fake_only)]
    assert judge(report).result == "NOTHING JUDGED"  # no check ran and no diff was made: not "ok"
    assert release_json(report)["verdict"] == "nothing judged"
    report.schema.pin = "already pinned, DIFFERENT from what the binary prints"
    assert judge(report).result == "FAIL"


def test_model_level_scenarios_are_the_real_ones() -> None:
    names = {s.name for s in model_level_scenarios()}
    assert "plain" in names and "crash_mid_turn" not in names and "flood" not in names


def test_usage_errors(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CODEX_BIN", raising=False)
    assert main(["validate-release"]) == 3
    fake = tmp_path / "codex"
    fake.write_text("#!/bin/sh\necho 'codex-cli 0.171.0'\n")
    fake.chmod(0o755)
    assert main(["validate-release", "--codex", str(fake), "--latency-samples", "-1"]) == 3
    assert main(["validate-release", "--codex", str(fake), "--scenario", "crash_mid_turn"]) == 3


@pytest.mark.real_codex
def test_short_validation_of_the_pinned_release(codex_bin: Path, tmp_path: Path) -> None:
    out = tmp_path / "report"
    code = main(
        [
            "validate-release",
            "--codex",
            str(codex_bin),
            "--out",
            str(out),
            "--scenario",
            "plain",
            "--latency-samples",
            "0",
        ]
    )
    body = json.loads((out / "report.json").read_text())
    assert body["schema"]["pin"] == "already pinned, identical"
    assert body["contracts"]["failed"] == [] and body["contracts"]["passed"] > 0
    assert [f["scenario"] for f in body["fidelity"]] == ["plain"] and body["fidelity"][0]["equal"]
    # The schema is diffed against the newest older pinned release; a breaking change there (0.169.0 ->
    # 0.171.0 removed Project.position) is the one thing that may make this release "break clients".
    key = schema_store.version_key
    older = [v for v in schema_store.pinned_releases() if key(v) < key("0.171.0")]
    assert body["schema"]["compared_with"] == (older[-1] if older else None)
    breaking = bool(body["schema"]["breaking"])
    assert (code, body["verdict"]) == ((FAILED, "breaks clients") if breaking else (OK, "ok")), body
    headline = "BREAKS CLIENTS" if breaking else "no client-breaking change found"
    assert (out / "report.md").read_text().startswith(f"# codex-cli 0.171.0: {headline}")
    page = (out / "report.html").read_text()  # the same report as HTML, sessions drawn with the model's lane
    assert headline in page and "mock model (Responses API)" in page
