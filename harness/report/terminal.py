"""The report on a terminal: the scenario × contract table, then failures, warnings and skips with reasons.

The table is one row per (scenario, target) and one column per contract, each cell the worst status of that
contract's checks; failures follow with their detail and citation, then ``should`` checks not met, known
failures, stale baseline entries, warnings, and skips grouped by reason; last the ``RESULT:`` line. Every text
that came from a record (a name, a detail, a citation) is folded to one line, clipped and escaped
(:mod:`contracts.text`): a check quotes what others sent.
"""

from __future__ import annotations

from collections.abc import Sequence

from contracts.checks import Check, shown
from contracts.report import Report, Verdict, judge
from contracts.report.latency import METRICS, summary_line
from contracts.report.model import LatencyPart
from contracts.text import one_line

#: A cell's word: its worst status; ``should`` when every failure in it is a recommendation (level should).
SYMBOLS = {"pass": "✓ pass", "fail": "✗ FAIL", "skip": "- skip", "warn": "! warn", "should": "! should"}
ASCII_SYMBOLS = {"pass": "ok", "fail": "FAIL", "skip": "skip", "warn": "warn", "should": "should"}
_DETAIL_WIDTH = 400
_NAME_WIDTH = 120


def _clip(text: str, width: int = _DETAIL_WIDTH) -> str:
    """One line of at most ``width`` characters, escaped (contracts.text): a check quotes what others sent."""
    return one_line(text, width)


def _name(text: str) -> str:
    """A scenario, target, contract or check name in the table: a record may have been written by anyone."""
    return one_line(text, _NAME_WIDTH)


def as_report(subject: Report | Sequence[Check]) -> Report:
    return subject if isinstance(subject, Report) else Report(checks=list(subject))


def result_line(verdict: Verdict) -> str:
    return "RESULT: " + verdict.result


def render_table(
    subject: Report | Sequence[Check],
    verdict: Verdict | None = None,
    *,
    ascii_only: bool = False,
    show_skips: bool = True,
) -> str:
    """The scenario × contract table, then failures with detail, then warnings and skips with reasons."""
    report = as_report(subject)
    verdict = verdict or judge(report)
    checks = report.checks
    if not checks:
        return f"no checks ran\n\n{result_line(verdict)}\n"
    symbols = ASCII_SYMBOLS if ascii_only else SYMBOLS
    contracts = report.contracts()
    groups = report.groups()
    multi_target = len(report.targets) > 1
    known = {id(c) for c in verdict.known}
    head = ["scenario" + (" [target]" if multi_target else ""), *map(_name, contracts)]
    body = []
    for group in groups:
        label = f"{_name(group.scenario)} [{_name(group.target)}]" if multi_target else _name(group.scenario)
        by_contract: dict[str, list[Check]] = {}
        for c in group.checks:
            by_contract.setdefault(c.contract, []).append(c)
        cells = [label]
        for contract in contracts:
            mine = by_contract.get(contract, [])
            status = shown(mine)
            cell = symbols[status] if mine else ""
            if status == "fail" and all(id(c) in known for c in mine if c.status == "fail"):
                cell += " (baseline)"
            cells.append(cell)
        body.append(cells)
    widths = [max(len(r[i]) for r in [head, *body]) for i in range(len(head))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in [head, *body]]
    lines.insert(1, "  ".join("-" * w for w in widths))
    out = ["\n".join(lines), ""]
    counts = report.counts
    target_note = "" if multi_target else f" on target {_name(groups[0].target)}"
    out.append(
        f"{len(groups)} scenario(s){target_note}, {len(checks)} checks: {counts.passed} passed, "
        f"{counts.failed_text()}, {counts.warned} warnings, {counts.skipped} skipped"
    )
    if report.budgets:
        out.append(f"Budgets the client declared (every scenario judged with them): {_clip(budget_text(report))}")
    if verdict.failures:
        out += ["", "Failures:"]
        out += [check_line(c) for c in verdict.failures]
    if verdict.should_failures:
        strict = " (--strict: they fail the run)" if verdict.strict else " (warnings; --strict fails on them)"
        out += ["", f"Recommendations not met (should){strict}:"]
        out += [check_line(c) for c in verdict.should_failures]
    if verdict.known:
        out += ["", "Known failures (in the baseline):"]
        out += [check_line(c) for c in verdict.known]
    if verdict.stale:
        fails = "" if verdict.stale_fails else "; --stale warn: they do not fail the run"
        out += ["", f"Stale baseline entries (listed as failing, now passing; remove them{fails}):"]
        out += [f"  {one_line(e.describe(), _DETAIL_WIDTH)}" for e in verdict.stale]
    warnings = report.of_status("warn")
    if warnings:
        out += ["", "Warnings:"]
        out += [check_line(c) for c in warnings]
    if show_skips and report.of_status("skip"):
        out += ["", "Skipped:"]
        out += skip_lines(report)
    if verdict.strict_failures:
        out += ["", f"--strict: {len(verdict.strict_failures)} skip(s)/warning(s) count as failures"]
    if verdict.nothing_judged:
        out += ["", "Nothing was judged: no check passed or failed, so this run proves nothing (not a pass)."]
    out += ["", result_line(verdict)]
    return "\n".join(out) + "\n"


def budget_text(report: Report) -> str:
    """The declared budgets, ``turn_timeout_ms=600000, …`` (the rest are each scenario's own)."""
    from harness.budgets import describe

    return describe(report.budgets)


def check_line(check: Check) -> str:
    """One check on one line: where, its level, its detail and its citation."""
    ref = f" [{_name(check.citation)}]" if check.citation else ""
    where = f"{_name(check.scenario)} [{_name(check.target)}] {_name(check.contract)} / {_name(check.name)}"
    return f"  {where} ({check.level}): {_clip(check.detail)}{ref}"


def skip_lines(report: Report) -> list[str]:
    """Skips grouped by reason, so 'target does not support' reads once per scenario, not per contract."""
    grouped: dict[tuple[str, str, str], list[str]] = {}
    for skip in report.skip_reasons():
        key = (_name(skip.scenario), _name(skip.target), _clip(skip.reason, 200))
        grouped.setdefault(key, []).extend(
            _name(c.contract) if c.name in ("", "scenario") else f"{_name(c.contract)} / {_name(c.name)}"
            for c in skip.checks
        )
    return [f"  {s} [{t}] {', '.join(names)}: {reason}" for (s, t, reason), names in grouped.items()]


def latency_lines(part: LatencyPart, *, samples: int, warmups: int) -> list[str]:
    """What ``latency`` prints per case: the summary of each metric, and the samples whose turn was not aborted."""
    out = []
    for case in part.cases:
        out.append(f"{case.scenario} on {case.target}: {samples} samples, {warmups} warm-ups discarded")
        out += [summary_line(metric, case.summary(metric)) for metric in METRICS]
        bad = case.not_aborted
        if bad:
            out.append(f"FAIL {len(bad)} sample(s) not aborted: {sorted({s.status for s in bad})}")
    return out
