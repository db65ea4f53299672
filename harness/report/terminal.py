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
_NAMED_ROWS = 12  # scenarios named on a skip line before "and N more"


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
    verbose: bool = False,
) -> str:
    """The scenario × contract table, what was not judged, then warnings and known failures, failures last.

    Failures come last, just above the ``RESULT:`` line, so they are on the last screen of a CI log. Skips are
    one line per reason with its count (``verbose``: one line per scenario and reason). A contract no check of
    which could apply to this kind of run (every check a structural skip, :attr:`Check.applies` False) gets no
    column of dashes: it is named once, with its reason.
    """
    report = as_report(subject)
    verdict = verdict or judge(report)
    checks = report.checks
    if not checks:
        return f"no checks ran\n\n{result_line(verdict)}\n"
    symbols = ASCII_SYMBOLS if ascii_only else SYMBOLS
    not_applicable = structural_contracts(checks)
    contracts = [c for c in report.contracts() if c not in not_applicable]
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
    out = [_clip(report.judged_line())] if report.judged else []
    out += ["\n".join(lines), ""]
    counts = report.counts
    target_note = "" if multi_target else f" on target {_name(groups[0].target)}"
    out.append(
        f"{len(groups)} scenario(s){target_note}, {len(checks)} checks: {counts.passed} passed, "
        f"{counts.failed_text()}, {counts.warned} warnings, {counts.skipped} skipped"
    )
    if report.budgets:
        out.append(f"Budgets the client declared (every scenario judged with them): {_clip(budget_text(report))}")
    structural = [c for c in checks if c.status == "skip" and not c.applies]
    if structural:
        out += ["", "Not judged for this kind of run (by construction; no column where nothing of a contract is):"]
        out += skip_summary(structural)
    skipped = [c for c in checks if c.status == "skip" and c.applies]
    if show_skips and skipped:
        heading = "Skipped:" if verbose else "Skipped (each reason once, with how many checks; --verbose lists them):"
        out += ["", heading]
        out += skip_lines(report, only_applicable=True) if verbose else skip_summary(skipped)
    warnings = report.of_status("warn")
    if warnings:
        out += ["", "Warnings:"]
        out += [check_line(c) for c in warnings]
    if verdict.known:
        out += ["", "Known failures (in the baseline):"]
        out += [check_line(c) for c in verdict.known]
    if verdict.stale:
        fails = "" if verdict.stale_fails else "; --stale warn: they do not fail the run"
        out += ["", f"Stale baseline entries (listed as failing, now passing; remove them{fails}):"]
        out += [f"  {one_line(e.describe(), _DETAIL_WIDTH)}" for e in verdict.stale]
    if verdict.should_failures:
        strict = " (--strict: they fail the run)" if verdict.strict else " (warnings; --strict fails on them)"
        out += ["", f"Recommendations not met (should){strict}:"]
        out += [check_line(c) for c in verdict.should_failures]
    if verdict.failures:
        out += ["", "Failures:"]
        out += [check_line(c) for c in verdict.failures]
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


def structural_contracts(checks: Sequence[Check]) -> dict[str, str]:
    """Contracts of which every check is a structural skip (``applies`` False), with the first one's reason."""
    reasons: dict[str, str] = {}
    judged: set[str] = set()
    for c in checks:
        if c.status == "skip" and not c.applies:
            reasons.setdefault(c.contract, c.detail)
        else:
            judged.add(c.contract)
    return {contract: reason for contract, reason in reasons.items() if contract not in judged}


def skip_summary(skips: Sequence[Check]) -> list[str]:
    """One line per skip reason: how many checks, in how many scenarios, which contracts; a scenario not played
    at all is named (``plain [real]``), up to a bound."""
    grouped: dict[str, list[Check]] = {}
    for c in skips:
        grouped.setdefault(_clip(c.detail, 200), []).append(c)
    lines = []
    for reason, mine in sorted(grouped.items(), key=lambda kv: -len(kv[1])):
        rows = list(dict.fromkeys((c.scenario, c.target) for c in mine))
        unplayed = list(dict.fromkeys((c.scenario, c.target) for c in mine if c.name in ("", "scenario")))
        if unplayed:
            names = ", ".join(f"{_name(s)} [{_name(t)}]" for s, t in unplayed[:_NAMED_ROWS])
            more = f" and {len(unplayed) - _NAMED_ROWS} more" if len(unplayed) > _NAMED_ROWS else ""
            lines.append(f"  {len(unplayed)} scenario(s) not played ({names}{more}): {reason}")
            continue
        contracts = ", ".join(sorted({_name(c.contract) for c in mine}))
        lines.append(f"  {len(mine)} check(s) in {len(rows)} scenario(s) [{contracts}]: {reason}")
    return lines


def skip_lines(report: Report, *, only_applicable: bool = False) -> list[str]:
    """Skips grouped by reason, so 'target does not support' reads once per scenario, not per contract."""
    grouped: dict[tuple[str, str, str], list[str]] = {}
    for skip in report.skip_reasons():
        if only_applicable and not any(c.applies for c in skip.checks):
            continue
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
