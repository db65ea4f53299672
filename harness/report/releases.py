"""The release views shared by every renderer of a release report and of a matrix: the verdict's words, the
matrix table's rows and cells (Markdown, JSON and HTML draw the same rows)."""

from __future__ import annotations

import math
from typing import Any

from contracts.checks import CONTRACT_NAMES
from contracts.report import Report, SchemaChanges, Verdict, judge
from contracts.report.model import change_text

LATENCY_METRIC = "interrupt_to_completed"
#: What ``report.json`` has always called the three verdicts.
VERDICT_WORDS = {"PASS": "ok", "FAIL": "breaks", "NOTHING JUDGED": "nothing judged"}
HEADLINES = {
    "PASS": "no client-breaking change found",
    "FAIL": "BREAKS CLIENTS",
    "NOTHING JUDGED": "NOTHING JUDGED (no check passed or failed: not a pass)",
}


def headline(report: Report, verdict: Verdict) -> str:
    """The verdict in words, saying whose failure it is: a breaking schema change (the release breaks clients), a
    contract the real server violates (the release's bug), or only the fake differing from it (the harness's)."""
    if verdict.result != "FAIL":
        return HEADLINES[verdict.result]
    parts = [report, *report.columns]
    breaking = any(p.schema is not None and p.schema.decides and p.schema.breaking for p in parts) or any(
        n.diff is not None and n.diff.is_breaking for n in report.neighbours
    )
    if breaking:
        return HEADLINES["FAIL"]
    if any(c.status == "fail" for p in parts for c in p.checks) or any(
        p.schema is not None and p.schema.pin_failed for p in parts
    ):
        return "FAILS: the server violates a contract"
    return "FAILS: the fake differs from the release (the harness's own)"


#: the JSON word of each failing headline: whose failure it is, as the headline says
FAIL_WORDS = {
    HEADLINES["FAIL"]: "breaks clients",
    "FAILS: the server violates a contract": "server violates a contract",
    "FAILS: the fake differs from the release (the harness's own)": "fake differs",
}


def verdict_word(verdict: Verdict, report: Report | None = None) -> str:
    """``ok``, ``nothing judged``, or whose failure it is (the headline's words); "breaks" only without a report."""
    if verdict.result == "FAIL" and report is not None:
        return FAIL_WORDS[headline(report, verdict)]
    return VERDICT_WORDS[verdict.result]


def ms(value: Any, digits: int = 1) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    return f"{value:.{digits}f}"


def contract_cell(column: Report, contract: str) -> str:
    checks = [c for c in column.checks if c.contract == contract]
    if not checks:
        return "-"
    passed = sum(c.status == "pass" for c in checks)
    failed = sum(c.status == "fail" for c in checks)
    skipped = sum(c.status == "skip" for c in checks)
    text = f"{passed} pass"
    if failed:
        text += f", **{failed} FAIL**"
    if skipped:
        text += f", {skipped} skip"
    return text


def fidelity_cell(column: Report) -> str:
    """A count (the scenarios that differ are listed below the table, not in the cell)."""
    entries = column.fidelity.compared if column.fidelity is not None else []
    equal = sum(1 for f in entries if f.equal)
    differing = len(entries) - equal
    text = f"{equal}/{len(entries)} equal"
    if differing:
        text += f"; **{differing} differ**"
    return text


def fidelity_differing(column: Report) -> list[str]:
    entries = column.fidelity.compared if column.fidelity is not None else []
    return [f.scenario for f in entries if not f.equal]


def step_cell(step: SchemaChanges) -> str:
    """A release step in one cell: its counts (the one vocabulary of validate-release and matrix)."""
    if step.diff is None:
        return f"not compared: {step.error}"
    counts = step.counts()
    text = (
        f"from {step.old}: {counts['breaking']} breaking, {counts['exhaustive-match risk']} exhaustive-match risk, "
        f"{counts['additive']} additive"
    )
    if counts["breaking"]:
        text = "**" + text + "**"
    if step.behaviour:
        text += (
            f"; behaviour of {counts['scenarios compared']} scenario(s): {counts['wire changes']} changed on the wire, "
            f"{counts['trace changes']} in the trace"
        )
    if step.trace_format_note:  # a trace reader of the old format cannot read the new one as it is
        text += f"; **{step.trace_format_note}**"
    return text


def step_groups(step: SchemaChanges) -> list[tuple[str, list[str], bool]]:
    """(title, entries, breaking) for a release step's folded lists, in reading order."""
    if step.diff is None:
        return []
    impacts = step.diff.by_impact()
    groups = [
        (f"{name} ({len(found)})", [change_text(c) for c in found], name == "breaking")
        for name, found in impacts.items()
    ]
    wire = [b for b in step.behaviour if b.wire]
    lines = [f"{b.scenario}: {x}" for b in wire for x in b.wire]
    lines += [f"{b.scenario}: not compared: {b.note}" for b in step.behaviour if b.note]
    groups.append((f"behaviour changes on the wire ({len(wire)} scenario(s))", lines, False))
    traced = [b for b in step.behaviour if b.trace]
    lines = [f"{b.scenario}: {x}" for b in traced for x in b.trace]
    groups.append((f"behaviour changes in the trace ({len(traced)} scenario(s))", lines, False))
    return groups


def latency_rows(columns: list[Report]) -> list[tuple[str, list[str]]]:
    cases: list[str] = []
    for column in columns:
        for row in column.latency.rows() if column.latency else []:
            if row["metric"] == LATENCY_METRIC and row["scenario"] not in cases:
                cases.append(row["scenario"])
    rows = []
    for case in cases:
        cells = []
        for column in columns:
            found = [
                x
                for x in (column.latency.rows() if column.latency else [])
                if x["scenario"] == case and x["metric"] == LATENCY_METRIC
            ]
            cells.append(f"{ms(found[0]['p50'], 0)} / {ms(found[0]['p99'], 0)} (n={found[0]['n']})" if found else "-")
        rows.append((f"interrupt latency p50 / p99 ms: {case}", cells))
    return rows


def matrix_rows(matrix: Report) -> list[tuple[str, list[str]]]:
    """(label, one cell per release) in table order."""
    columns = matrix.columns
    schema_cells = ["(oldest column)"] + [step_cell(n) for n in matrix.neighbours]
    releases = [c.release for c in columns]
    pins = [c.schema.pin if c.schema is not None else "-" for c in columns]
    rows: list[tuple[str, list[str]]] = [
        ("binary", [f"`{r.codex}`" if r else "-" for r in releases]),
        (
            "fake profile",
            [f"{r.profile}" + ("" if r.profile == r.version else _how(r.profile_note)) if r else "-" for r in releases],
        ),
        ("schema pin", [("**" + p + "**") if p.startswith("failed") or "DIFFERENT" in p else p for p in pins]),
        ("wire schema vs previous column", schema_cells),
    ]
    rows += [(f"contract {name}", [contract_cell(c, name) for c in columns]) for name in CONTRACT_NAMES]
    rows.append(("fidelity to its profile", [fidelity_cell(c) for c in columns]))
    rows += latency_rows(columns)
    rows.append(("verdict", ["ok" if judge(c).ok else "**FAIL**" for c in columns]))
    rows.append(("wall s", [f"{c.wall_s:.0f}" for c in columns]))
    return rows


def _how(note: str) -> str:
    """How a profile not the binary's own was chosen, in a table cell (the report's text says it whole)."""
    if "measured" in note:
        return " (closest measured)"
    return " (--profile)" if "--profile" in note else " (by version)"
