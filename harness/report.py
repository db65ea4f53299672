"""Reports of a run: the terminal table, ``checks.json``, ``junit.xml``, and baseline semantics.

The table is one row per (scenario, target) and one column per contract, each cell the worst status of
that contract's checks; failures follow with their detail, then warnings and skips with their reasons.

A **baseline** lists known failures (a JSON list of objects with ``scenario``, ``target``, ``contract``
and optionally ``name``; a previous ``checks.json`` works, its non-failures are ignored). A listed
failure does not fail the run; a listed failure that now passes *does* (a stale entry), so a baseline
cannot rot.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from contracts import paths, safe_read
from contracts.checks import CONTRACT_NAMES, Check, worst
from contracts.exitcodes import FAILED, OK, UsageError
from contracts.safe_dir import write_file
from contracts.text import escape, one_line

SYMBOLS = {"pass": "✓ pass", "fail": "✗ FAIL", "skip": "- skip", "warn": "! warn"}
ASCII_SYMBOLS = {"pass": "ok", "fail": "FAIL", "skip": "skip", "warn": "warn"}
_DETAIL_WIDTH = 400
_NAME_WIDTH = 120


@dataclass(frozen=True, slots=True)
class BaselineEntry:
    scenario: str
    target: str
    contract: str
    name: str | None = None  # None: every check of the contract

    def matches(self, check: Check) -> bool:
        return (check.scenario, check.target, check.contract) == (self.scenario, self.target, self.contract) and (
            self.name is None or self.name == check.name
        )

    def describe(self) -> str:
        name = f" / {self.name}" if self.name else ""
        return f"{self.scenario} [{self.target}] {self.contract}{name}"


@dataclass(slots=True)
class Verdict:
    """What decides the exit code, kept for the summary lines."""

    failures: list[Check] = field(default_factory=list)  # fail, not in the baseline
    known: list[Check] = field(default_factory=list)  # fail, listed in the baseline
    stale: list[BaselineEntry] = field(default_factory=list)  # listed, now passing
    strict_failures: list[Check] = field(default_factory=list)  # skip/warn under --strict
    nothing_judged: bool = False  # no check passed or failed (every scenario skipped, or no checks at all)
    exit_code: int = OK

    @property
    def result(self) -> str:
        """The word of the ``RESULT:`` line: PASS, FAIL or NOTHING JUDGED."""
        if self.nothing_judged:
            return "NOTHING JUDGED"
        return "FAIL" if self.exit_code else "PASS"


MAX_BASELINE_BYTES = 64 * 1024 * 1024  # a checks.json of thousands of scenarios is a few MB


def load_baseline(path: str | Path) -> list[BaselineEntry]:
    """Read a baseline file; an unreadable or malformed one is a usage error naming the file."""
    p = Path(path)
    try:
        with paths.open_file(p, "baseline") as fh:  # a FIFO or /dev/zero is refused, never read
            data_bytes = fh.read(MAX_BASELINE_BYTES + 1)
        if len(data_bytes) > MAX_BASELINE_BYTES:
            raise UsageError(f"baseline {p} is larger than {MAX_BASELINE_BYTES} bytes")
        data = orjson.loads(data_bytes)
    except OSError as exc:
        raise UsageError(f"cannot read baseline {p}: {exc.strerror}") from None
    except orjson.JSONDecodeError as exc:
        raise UsageError(f"baseline {p} is not JSON: {exc}") from None
    if not isinstance(data, list):
        raise UsageError(f"baseline {p}: expected a JSON list of objects with scenario, target, contract")
    entries = []
    for i, item in enumerate(data):
        if not isinstance(item, dict) or not all(
            isinstance(item.get(k), str) for k in ("scenario", "target", "contract")
        ):
            raise UsageError(f"baseline {p}: entry {i} needs string scenario, target and contract")
        if item.get("status", "fail") != "fail":
            continue
        name = item.get("name")
        entries.append(BaselineEntry(item["scenario"], item["target"], item["contract"], name or None))
    return entries


def judge(checks: Sequence[Check], *, strict: bool = False, baseline: Sequence[BaselineEntry] = ()) -> Verdict:
    verdict = Verdict()
    for check in checks:
        listed = any(entry.matches(check) for entry in baseline)
        if check.status == "fail":
            (verdict.known if listed else verdict.failures).append(check)
        elif strict and check.status in ("skip", "warn") and not listed:
            verdict.strict_failures.append(check)
    for entry in baseline:
        matching = [c for c in checks if entry.matches(c)]
        ran = [c for c in matching if c.status != "skip"]
        if ran and not any(c.status == "fail" for c in ran):
            verdict.stale.append(entry)
    # A run in which nothing passed or failed proved nothing: not a pass, whatever was skipped.
    verdict.nothing_judged = not any(c.status in ("pass", "fail") for c in checks)
    bad = verdict.failures or verdict.stale or verdict.strict_failures or verdict.nothing_judged
    verdict.exit_code = FAILED if bad else OK
    return verdict


# --- the table ------------------------------------------------------------------------------------


def _contracts_of(checks: Sequence[Check]) -> list[str]:
    seen = [c for c in CONTRACT_NAMES if any(k.contract == c for k in checks)]
    return seen + sorted({k.contract for k in checks} - set(seen))


def _rows(checks: Sequence[Check]) -> list[tuple[str, str]]:
    return list(dict.fromkeys((check.scenario, check.target) for check in checks))  # first-seen order


def _clip(text: str, width: int = _DETAIL_WIDTH) -> str:
    """One line of at most ``width`` characters, escaped (contracts.text): a check quotes what others sent."""
    return one_line(text, width)


def _name(text: str) -> str:
    """A scenario, target, contract or check name in the table: a record may have been written by anyone."""
    return one_line(text, _NAME_WIDTH)


def render_table(
    checks: Sequence[Check], verdict: Verdict | None = None, *, ascii_only: bool = False, show_skips: bool = True
) -> str:
    """The scenario × contract table, then failures with detail, then warnings and skips with reasons."""
    verdict = verdict or judge(checks)
    if not checks:
        return f"no checks ran\n\nRESULT: {verdict.result}\n"
    symbols = ASCII_SYMBOLS if ascii_only else SYMBOLS
    contracts = _contracts_of(checks)
    rows = _rows(checks)
    multi_target = len({t for _, t in rows}) > 1
    known = {id(c) for c in verdict.known}
    head = ["scenario" + (" [target]" if multi_target else ""), *map(_name, contracts)]
    body = []
    by_cell: dict[tuple[str, str, str], list[Check]] = {}  # grouped once: linear in the checks
    for c in checks:
        by_cell.setdefault((c.scenario, c.target, c.contract), []).append(c)
    for scenario, target in rows:
        label = f"{_name(scenario)} [{_name(target)}]" if multi_target else _name(scenario)
        cells = [label]
        for contract in contracts:
            mine = by_cell.get((scenario, target, contract), [])
            status = worst([c.status for c in mine])
            cell = symbols[status] if mine else ""
            if status == "fail" and all(id(c) in known for c in mine if c.status == "fail"):
                cell += " (baseline)"
            cells.append(cell)
        body.append(cells)
    widths = [max(len(r[i]) for r in [head, *body]) for i in range(len(head))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in [head, *body]]
    lines.insert(1, "  ".join("-" * w for w in widths))
    out = ["\n".join(lines), ""]
    counts = {s: sum(1 for c in checks if c.status == s) for s in ("pass", "fail", "warn", "skip")}
    target_note = "" if multi_target else f" on target {_name(rows[0][1])}"
    out.append(
        f"{len(rows)} scenario(s){target_note}, {len(checks)} checks: {counts['pass']} passed, "
        f"{counts['fail']} failed, {counts['warn']} warnings, {counts['skip']} skipped"
    )
    if verdict.failures:
        out += ["", "Failures:"]
        out += [_line(c) for c in verdict.failures]
    if verdict.known:
        out += ["", "Known failures (in the baseline):"]
        out += [_line(c) for c in verdict.known]
    if verdict.stale:
        out += ["", "Stale baseline entries (listed as failing, now passing; remove them):"]
        out += [f"  {one_line(e.describe(), _DETAIL_WIDTH)}" for e in verdict.stale]
    warnings = [c for c in checks if c.status == "warn"]
    if warnings:
        out += ["", "Warnings:"]
        out += [_line(c) for c in warnings]
    skips = [c for c in checks if c.status == "skip"]
    if skips and show_skips:
        out += ["", "Skipped:"]
        out += _skip_lines(skips)
    if verdict.strict_failures:
        out += ["", f"--strict: {len(verdict.strict_failures)} skip(s)/warning(s) count as failures"]
    if verdict.nothing_judged:
        out += ["", "Nothing was judged: no check passed or failed, so this run proves nothing (not a pass)."]
    out += ["", "RESULT: " + verdict.result]
    return "\n".join(out) + "\n"


def _line(check: Check) -> str:
    ref = f" [{_name(check.reference)}]" if check.reference else ""
    where = f"{_name(check.scenario)} [{_name(check.target)}] {_name(check.contract)} / {_name(check.name)}"
    return f"  {where}: {_clip(check.detail)}{ref}"


def _skip_lines(skips: Sequence[Check]) -> list[str]:
    """Skips grouped by reason, so 'target does not support' reads once per scenario, not per contract."""
    grouped: dict[tuple[str, str, str], list[str]] = {}
    for c in skips:
        grouped.setdefault((_name(c.scenario), _name(c.target), _clip(c.detail, 200)), []).append(
            _name(c.contract) if c.name in ("", "scenario") else f"{_name(c.contract)} / {_name(c.name)}"
        )
    return [f"  {s} [{t}] {', '.join(names)}: {reason}" for (s, t, reason), names in grouped.items()]


# --- files -----------------------------------------------------------------------------------------


def checks_json(checks: Iterable[Check]) -> bytes:
    return orjson.dumps([c.to_dict() for c in checks], option=orjson.OPT_INDENT_2)


def write_checks_json(checks: Iterable[Check], path: str | Path) -> Path:
    return write_file(path, checks_json(checks))


def read_checks_json(path: str | Path) -> list[Check]:
    return [Check.from_dict(d) for d in orjson.loads(safe_read.read_bounded(path, MAX_BASELINE_BYTES, follow=True))]


def _xml(text: str) -> str:
    """Text for junit.xml: what XML 1.0 forbids (C0 controls, even as ``&#27;``, lone surrogates, U+FFFE)
    and what a terminal obeys, written out as ``\\x1b`` / ``\\u202e`` (contracts.text): the file stays
    well-formed and a CI page or log that shows it shows the escape, not the effect."""
    return escape(text, keep_newlines=True)


def junit_xml(checks: Sequence[Check], *, suite_name: str = "codex-harness") -> bytes:
    """One testsuite per (scenario, target), one testcase per check (classname scenario.contract)."""
    root = ET.Element("testsuites", name=_xml(suite_name))
    totals = {"tests": 0, "failures": 0, "skipped": 0}
    by_row: dict[tuple[str, str], list[Check]] = {}  # grouped once: linear in the checks
    for c in checks:
        by_row.setdefault((c.scenario, c.target), []).append(c)
    for scenario, target in _rows(checks):
        mine = by_row.get((scenario, target), [])
        suite = ET.SubElement(
            root,
            "testsuite",
            name=_xml(f"{scenario}[{target}]"),
            tests=str(len(mine)),
            failures=str(sum(c.status == "fail" for c in mine)),
            skipped=str(sum(c.status == "skip" for c in mine)),
            errors="0",
        )
        for c in mine:
            classname = _xml(f"{scenario}[{target}].{c.contract}")
            case = ET.SubElement(suite, "testcase", classname=classname, name=_xml(c.name or c.contract))
            message = _clip(c.detail, 1000)
            if c.status == "fail":
                failure = ET.SubElement(case, "failure", message=message, type=_xml(c.reference or "contract"))
                failure.text = _xml(c.detail)
            elif c.status == "skip":
                ET.SubElement(case, "skipped", message=message)
            elif c.status == "warn":
                ET.SubElement(case, "system-out").text = _xml(f"warning: {c.detail}")
        totals["tests"] += len(mine)
        totals["failures"] += int(suite.get("failures", "0"))
        totals["skipped"] += int(suite.get("skipped", "0"))
    for key, value in totals.items():
        root.set(key, str(value))
    root.set("errors", "0")
    return ET.tostring(root, encoding="utf-8", xml_declaration=True)


def write_junit(checks: Sequence[Check], path: str | Path) -> Path:
    return write_file(path, junit_xml(checks))


def summary_dict(checks: Sequence[Check], verdict: Verdict) -> dict[str, Any]:
    return {
        "checks": len(checks),
        "failed": len(verdict.failures),
        "known": len(verdict.known),
        "stale": [e.describe() for e in verdict.stale],
        "exit_code": verdict.exit_code,
        "result": verdict.result,
    }
