"""The check registry: contracts register themselves with a decorator, each check with its level and citation.

What it holds: every contract module is registered (in the table's column order), every check a contract
yields on the built-in catalogue is declared by it, levels are ``must`` or ``should``, every citation names a
document that ships in this repository, and
a check carries its level and citation into checks.json, junit.xml and the report.
"""

from __future__ import annotations

import re
import sys
import xml.etree.ElementTree as ET
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
from support import paths
from test_contracts_records import approval_record, plain_record

from contracts.checks import CONTRACT_NAMES, Check, registry, run_all
from contracts.checks.registry import GENERIC_NAMES, Contract, Rule
from contracts.report import judge
from fake_server.catalogue import load_builtin
from harness.fuzz import invariants  # noqa: F401  (registers the fuzz invariants)
from harness.report import junit_xml, render_table
from harness.runner import run_one
from harness.scenario_lookup import builtin_names

ROOT = paths.REPO
#: A citation names a document by a path ending in .md (``docs/client-rules.md §2``, ``docs/clients.md``).
DOC = re.compile(r"[\w./-]+\.md")
#: Citations of documents the repository does not contain: none. The rules are in docs/ (protocol.md,
#: client-rules.md, trace.md) and every check cites those: a new citation of a missing file fails.
NOT_SHIPPED: set[str] = set()
CLIENTS = ROOT / "conformance" / "clients"
#: Every should-level check: robustness beyond the protocol, or a budget overrun by a client that did end.
SHOULD = {
    ("terminal_status", "server exit"),
    ("latency", "turn N cancel→Result"),
    ("latency", "turn N interrupt overhead"),
    ("latency", "turn N interrupt logged"),
    ("latency", "teardown"),
    ("latency", "cancellation"),
    ("client", "not answered after resolved"),
    ("client", "interrupt -> turn/completed"),
    ("client", "server ended"),
    ("client", "server's descendants ended"),
    ("client", "exit status"),
    ("usage", "turn N reasoning"),
    ("usage", "server usage consistent"),
    ("usage", "turn N server usage"),
    ("protocol", "server requests answered in time"),
    ("protocol", "no request after close"),
    ("protocol", "request ids not reused"),
}


def _ships(doc: str) -> bool:
    return any((base / doc).is_file() for base in (ROOT, ROOT / "docs"))


def cited_documents(citation: str) -> list[str]:
    return DOC.findall(citation)


def test_every_contract_module_registers_itself_in_column_order() -> None:
    assert CONTRACT_NAMES == ("terminal_status", "latency", "trace_closure", "usage", "schema", "protocol")
    assert registry.names("session") == CONTRACT_NAMES
    assert registry.names("outside") == ("client",)
    assert registry.names("scenario") == ("scenario",)
    assert "fuzz" in registry.names("fuzz")
    for name in CONTRACT_NAMES:
        contract = registry.get(name)
        assert contract is not None and contract.judges, name


def test_levels_and_citations_are_declared_for_every_check() -> None:
    entries = list(registry.catalogue())
    assert len(entries) > 40
    for e in entries:
        assert e.level in ("must", "should"), e
        assert e.citation.strip(), f"{e.contract} / {e.name} cites nothing"
    # The recommendations, named: a level that changes is a decision of its own (docs/client-rules.md says why).
    should = {(e.contract, e.name) for e in entries if e.level == "should"}
    assert should == SHOULD, should ^ SHOULD


def test_citations_name_documents_that_ship() -> None:
    """A citation of a file that does not ship in the repository is found here (with the check that cites it)."""
    missing: dict[str, list[str]] = {}
    for contract in registry.contracts():
        for citation in contract.citations():
            for doc in cited_documents(citation):
                if not _ships(doc):
                    missing.setdefault(citation, []).append(contract.name)
    # Strict both ways: a new missing citation fails, and so does one that was fixed but is still listed.
    assert set(missing) == NOT_SHIPPED, {k: v for k, v in missing.items() if k not in NOT_SHIPPED}
    assert _ships("docs/scenarios.md") and _ships("clients.md")  # the resolution finds what does ship


def test_the_finder_catches_a_planted_citation() -> None:
    planted = Contract("planted", citation="docs/nowhere.md §1", checks=(Rule("x", citation="clients.md §2"),))
    found = [doc for c in sorted(planted.citations()) for doc in cited_documents(c) if not _ships(doc)]
    assert found == ["docs/nowhere.md"]
    assert registry.get("planted") is None  # declared, never decorated: not registered


def test_a_check_name_per_turn_follows_its_rule() -> None:
    contract = Contract(
        "demo",
        citation="docs/clients.md",
        checks=("turn N status", Rule("turn N usage", level="should", citation="docs/client.md")),
    )
    assert contract.rule_for("turn 12 status") == ("must", "docs/clients.md")
    assert contract.rule_for("turn 3 usage") == ("should", "docs/client.md")
    assert contract.declared("turn x usage") is None
    assert contract.rule_for("undeclared") == ("must", "docs/clients.md")  # the contract's own
    with pytest.raises(ValueError, match="declared twice"):
        contract.add("turn N status")
    with pytest.raises(ValueError, match="level"):
        Contract("bad", citation="docs/clients.md", level="may")  # type: ignore[arg-type]


def test_a_second_contract_of_a_name_is_refused() -> None:
    with pytest.raises(ValueError, match="two contracts named 'usage'"):
        Contract("usage", citation="docs/clients.md").judge(lambda record: [])


def test_checks_carry_their_rule_into_every_output() -> None:
    record = approval_record(answer=False)  # the approval is never answered: protocol fails
    checks = run_all(record)
    known_ids = [c for c in checks if c.contract == "terminal_status" and c.name.endswith("server status")]
    for c in checks:
        assert (c.level, c.citation) == registry.get(c.contract).rule_for(c.name), c  # type: ignore[union-attr]
    assert all(c.citation == "docs/protocol.md §4" for c in known_ids)
    failed = next(c for c in checks if c.status == "fail" and c.contract == "protocol")
    assert failed.to_dict()["level"] == "must" and failed.to_dict()["citation"] == failed.to_dict()["reference"]
    root = ET.fromstring(junit_xml(checks))
    levels = {p.get("value") for p in root.iter("property") if p.get("name") == "level"}
    level_properties = [p for p in root.iter("property") if p.get("name") == "level"]
    judged_here = [c for c in checks if c.applies or c.status != "skip"]  # structural skips: one case per reason
    assert levels == {c.level for c in judged_here} and len(level_properties) == len(judged_here)
    assert f"[{failed.citation}]" in render_table(checks)


def test_a_failed_should_check_warns_and_fails_under_strict() -> None:
    must = Check("s", "fake", "usage", "turn 1 usage", "pass", "ok")
    should = Check("s", "fake", "usage", "turn 1 reasoning", "fail", "no timeout", "docs/client.md", (), "should")
    lenient, strict = judge([must, should]), judge([must, should], strict=True)
    assert (lenient.result, lenient.exit_code, lenient.should_failures) == ("PASS", 0, [should])
    assert (strict.result, strict.exit_code) == ("FAIL", 1)
    text = render_table([must, should], lenient)
    assert "Recommendations not met (should) (warnings; --strict fails on them):" in text
    assert "no timeout" in text and "Failures:" not in text


def undeclared(checks: Sequence[Check]) -> list[str]:
    """Checks no contract declares (the runner's own failures are no contract's)."""
    out = []
    for c in checks:
        contract = registry.get(c.contract)
        if c.name in GENERIC_NAMES or c.contract == "runner":
            continue
        if contract is None or contract.declared(c.name) is None:
            out.append(f"{c.contract} / {c.name}")
        elif (c.level, c.citation) != contract.rule_for(c.name):
            out.append(f"{c.contract} / {c.name}: {c.level} {c.citation!r}, declared {contract.rule_for(c.name)}")
    return out


@pytest.mark.parametrize("name", builtin_names())
def test_every_check_of_the_catalogue_is_declared(name: str, tmp_path: Path) -> None:
    """Each built-in scenario on the in-process fake: every check it yields is declared by its contract."""
    run = run_one(load_builtin(name), "fake", work_root=tmp_path)
    assert not undeclared(run.checks)


@pytest.mark.parametrize("client", ["careful", "careless"])
def test_every_check_of_an_outside_client_is_declared(run_scenario: Callable[..., Any], client: str) -> None:
    run = run_scenario("command_approval", client=[sys.executable, str(CLIENTS / f"{client}.py")])
    assert {c.contract for c in run.checks} >= {"client", "protocol", "schema"}
    assert not undeclared(run.checks)


def test_plain_record_checks_all_declared() -> None:
    for c in run_all(plain_record(2)):
        assert registry.get(c.contract).declared(c.name) is not None, c  # type: ignore[union-attr]


@pytest.mark.parametrize("name", sorted(registry.GENERATED))
def test_the_docs_hold_the_generated_level_tables(name: str) -> None:
    """docs/clients.md lists every outside-client check with its level, docs/client-rules.md every check: both
    exactly as the registry declares them (regenerate with ``python -m contracts.checks.registry``)."""
    doc, make = registry.GENERATED[name]
    text = (ROOT / doc).read_text(encoding="utf-8")
    found = re.search(rf"<!-- generated: {name} [^>]*-->\n(.*?)<!-- end: {name} -->", text, re.S)
    assert found is not None, f"{doc} has no generated {name} table"
    assert found.group(1) == make(), f"{doc}: the {name} table differs from the registry"
    rows = [line for line in found.group(1).splitlines() if line.startswith("| `")]
    assert len(rows) >= 40 and any("| should |" in r for r in rows) and any("| must |" in r for r in rows)


def test_strict_counts_gaps_not_what_cannot_apply() -> None:
    """A scenario that is not one for the target (fake-only, on the real binary) and a check an outside client is
    never judged on are skips that are not gaps: --strict does not count them; a skip for want of truth is one."""
    from harness.runner import unsupported_run

    fake_only = next(name for name in builtin_names() if not load_builtin(name).supports("real")[0])
    skipped = unsupported_run(load_builtin(fake_only), "real").checks
    assert skipped and all(c.status == "skip" and not c.applies for c in skipped)
    passed = Check("s", "real", "usage", "turn 1 usage", "pass", "ok")
    assert judge([passed, *skipped], strict=True).exit_code == 0
    gap = Check("s", "real", "usage", "turn 1 usage", "skip", "no truth")
    assert judge([passed, gap], strict=True).exit_code == 1
    assert Check.from_dict(skipped[0].to_dict()).applies is False  # kept in checks.json
