"""run_all: every contract on one record; a contract that raises shows up as a failed check."""

from __future__ import annotations

from pathlib import Path

import pytest
from support import paths
from test_contracts_records import plain_record

from contracts.checks import CONTRACT_NAMES, Check, run_all, worst


def test_every_contract_yields_checks_with_references() -> None:
    checks = run_all(plain_record(2))
    assert {c.contract for c in checks} == set(CONTRACT_NAMES)
    assert all(c.reference for c in checks)
    assert all(c.scenario == "plain" and c.target == "fake" for c in checks)


def test_a_crashing_contract_is_red(monkeypatch: pytest.MonkeyPatch) -> None:
    from contracts.checks import usage

    def boom(record: object) -> list[Check]:
        raise RuntimeError("bug in a contract")

    monkeypatch.setattr(usage.CONTRACT, "judges", [boom])  # the registered judge is what run_all runs
    checks = [c for c in run_all(plain_record()) if c.contract == "usage"]
    assert [c.status for c in checks] == ["fail"]
    assert "bug in a contract" in checks[0].detail
    assert (checks[0].level, checks[0].citation) == ("must", usage.CONTRACT.citation)


def test_contracts_rerun_on_a_saved_record(tmp_path: Path) -> None:
    from contracts.record import SessionRecord

    record = plain_record(2)
    before = [c.to_dict() for c in run_all(record)]
    after = [c.to_dict() for c in run_all(SessionRecord.load(record.save(tmp_path / "r")))]
    assert before == after


def test_worst_shows_the_worst_judged_status_skip_only_when_nothing_was_judged() -> None:
    assert worst(["pass", "skip"]) == "pass"
    assert worst(["skip", "skip"]) == "skip"
    assert worst(["pass", "warn", "skip"]) == "warn"
    assert worst(["warn", "fail"]) == "fail"
    assert worst([]) == "skip"


def test_contracts_do_not_import_harness_or_fake_server() -> None:
    import ast

    root = paths.REPO / "contracts" / "checks"
    for path in root.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom | ast.Import):
                names = [node.module or ""] if isinstance(node, ast.ImportFrom) else [a.name for a in node.names]
                assert not any(n.split(".")[0] in ("harness", "fake_server") for n in names), path
