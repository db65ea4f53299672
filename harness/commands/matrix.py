"""``codex-harness matrix --codex PATH --codex PATH…``: several codex releases side by side, one table.

Each binary gets what ``validate-release`` gives it (its schema pinned or compared with the shipped pin, the
model-level built-in scenarios on the real binary with the contracts, the fidelity diff of each against the
fake playing that release's profile, the interrupt latency cases); the releases become the columns, oldest
first, with the wire-schema changes between neighbours. Writes ``matrix.md``, ``matrix.json`` and
``matrix.html`` into ``--out`` and prints the Markdown.

Exit 0 when every release holds its contracts and matches its fake profile, 1 otherwise (a schema change
between releases is a fact to read, not a failure), 3 for usage errors (fewer than two binaries, one that
does not run, two of the same release, no writable store).
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from contracts import schema_store
from contracts.exitcodes import FAILED, OK, UsageError
from contracts.schema_diff import ChangeKind, SchemaDiff, diff_bundles
from contracts.text import escape
from harness import confine

NAME = "matrix"
HELP = "validate several codex releases and print them side by side (schema changes, contracts, fidelity, latency)"
MIN_BINARIES = 2
MAX_BINARIES = 8
LATENCY_METRIC = "interrupt_to_completed"
SHOWN_CHANGES = 40


@dataclass(slots=True)
class Neighbours:
    """The wire-schema changes from one column to the next."""

    old: str
    new: str
    diff: SchemaDiff | None
    error: str = ""

    def to_json(self) -> dict[str, Any]:
        if self.diff is None:
            return {"from": self.old, "to": self.new, "error": self.error}
        changes = self.diff.changes
        return {
            "from": self.old,
            "to": self.new,
            "changes": len(changes),
            "breaking": [_change_text(c) for c in self.diff.breaking],
            "methods_added": [c.name for c in self.diff.of_kind(ChangeKind.METHOD_ADDED)],
            "methods_removed": [c.name for c in self.diff.of_kind(ChangeKind.METHOD_REMOVED)],
            "all": [_change_text(c) for c in changes],
        }


@dataclass(slots=True)
class Matrix:
    reports: list[Any]  # validate_release.ReleaseReport, oldest first
    neighbours: list[Neighbours] = field(default_factory=list)
    command: str = ""
    wall_s: float = 0.0

    @property
    def ok(self) -> bool:
        return all(_column_ok(r) for r in self.reports)

    def rows(self) -> list[tuple[str, list[str]]]:
        """(label, one cell per release) in table order."""
        return matrix_rows(self)

    def to_json(self) -> dict[str, Any]:
        return {
            "command": self.command,
            "releases": [r.version for r in self.reports],
            "ok": self.ok,
            "wall_s": round(self.wall_s, 1),
            "neighbours": [n.to_json() for n in self.neighbours],
            "table": [{"row": label, "cells": cells} for label, cells in self.rows()],
            "reports": [r.to_json() for r in self.reports],
        }


def _change_text(c: Any) -> str:
    arrow = f" {c.old}->{c.new}" if (c.old or c.new) else ""
    return f"{c.kind} {c.where} {c.name}{arrow}".strip()


def _column_ok(report: Any) -> bool:
    return not report.failed_checks and not report.fidelity_failures and not report.nothing_judged


def _ms(value: Any) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    return f"{value:.0f}"


def _contract_cell(report: Any, contract: str) -> str:
    checks = [c for c in report.checks if c.contract == contract]
    passed = sum(c.status == "pass" for c in checks)
    failed = sum(c.status == "fail" for c in checks)
    skipped = sum(c.status == "skip" for c in checks)
    if not checks:
        return "-"
    text = f"{passed} pass"
    if failed:
        text += f", **{failed} FAIL**"
    if skipped:
        text += f", {skipped} skip"
    return text


def _fidelity_cell(report: Any) -> str:
    compared = [f for f in report.fidelity if not f["skipped"]]
    equal = sum(1 for f in compared if f["equal"])
    differing = [f["scenario"] for f in compared if not f["equal"]]
    text = f"{equal}/{len(compared)} equal"
    if differing:
        text += f"; **differ: {', '.join(differing)}**"
    return text


def _latency_cells(reports: list[Any]) -> list[tuple[str, list[str]]]:
    cases: list[str] = []
    for r in reports:
        for row in r.latency:
            if row["metric"] == LATENCY_METRIC and row["scenario"] not in cases:
                cases.append(row["scenario"])
    rows = []
    for case in cases:
        cells = []
        for r in reports:
            found = [x for x in r.latency if x["scenario"] == case and x["metric"] == LATENCY_METRIC]
            cells.append(f"{_ms(found[0]['p50'])} / {_ms(found[0]['p99'])} (n={found[0]['n']})" if found else "-")
        rows.append((f"interrupt latency p50 / p99 ms: {case}", cells))
    return rows


def matrix_rows(m: Matrix) -> list[tuple[str, list[str]]]:
    from contracts.checks import CONTRACT_NAMES

    reports = m.reports
    schema_cells = ["(oldest column)"]
    for n in m.neighbours:
        if n.diff is None:
            schema_cells.append(f"not compared: {n.error}")
            continue
        data = n.to_json()
        schema_cells.append(
            f"{data['changes']} change(s) from {n.old}, {len(data['breaking'])} breaking; "
            f"methods +{len(data['methods_added'])} -{len(data['methods_removed'])}"
        )
    rows: list[tuple[str, list[str]]] = [
        ("binary", [f"`{r.codex}`" for r in reports]),
        ("fake profile", [f"{r.profile}" + ("" if r.profile == r.version else " (nearest)") for r in reports]),
        ("wire schema vs previous column", schema_cells),
    ]
    rows += [(f"contract {name}", [_contract_cell(r, name) for r in reports]) for name in CONTRACT_NAMES]
    rows.append(("fidelity to its profile", [_fidelity_cell(r) for r in reports]))
    rows += _latency_cells(reports)
    rows.append(("verdict", ["ok" if _column_ok(r) else "**FAIL**" for r in reports]))
    rows.append(("wall s", [f"{r.wall_s:.0f}" for r in reports]))
    return rows


def render_markdown(m: Matrix) -> str:
    header = "| | " + " | ".join(f"codex-cli {r.version}" for r in m.reports) + " |"
    lines = [header, "|---|" + "---|" * len(m.reports)]
    for label, cells in m.rows():
        lines.append(f"| {label} | " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    notes = [
        f"codex-cli {r.version}: the fake played {r.profile}; {r.profile_note}"
        for r in m.reports
        if r.profile_note and r.profile != r.version
    ]
    if notes:
        lines += ["", *[f"- {n}" for n in notes]]
    for n in m.neighbours:
        data = n.to_json()
        lines += ["", f"### Wire schema {n.old} -> {n.new}", ""]
        if n.diff is None:
            lines.append(f"not compared: {n.error}")
            continue
        lines.append(f"{data['changes']} change(s), {len(data['breaking'])} breaking.")
        if data["methods_added"]:
            lines.append(f"- methods added: {', '.join(data['methods_added'])}")
        if data["methods_removed"]:
            lines.append(f"- methods removed: {', '.join(data['methods_removed'])}")
        lines += [f"- breaking: {b}" for b in data["breaking"][:SHOWN_CHANGES]]
    failures = [(r.version, c) for r in m.reports for c in r.failed_checks]
    if failures:
        lines += ["", "### Failed checks", ""]
        lines += [f"- {v} {c.scenario} {c.contract} {c.name}: {c.detail}" for v, c in failures]
    return "\n".join(lines) + "\n"


def render_html(m: Matrix) -> str:
    from harness.html.page import e, page

    head = "".join(f"<th>codex-cli {e(r.version)}</th>" for r in m.reports)
    body_rows = []
    for label, cells in m.rows():
        tds = "".join(
            f'<td class="{"fail" if "FAIL" in c or "differ" in c else ""}">{e(c.replace("**", ""))}</td>'
            for c in cells
        )
        body_rows.append(f"<tr><th>{e(label)}</th>{tds}</tr>")
    verdict = "every release holds its contracts and matches its profile" if m.ok else "SOME RELEASE FAILS"
    parts = [
        "<h1>codex releases side by side</h1>",
        f'<p><span class="verdict {"pass" if m.ok else "fail"}">{e(verdict)}</span> '
        f'<span class="meta">{e(m.command)}; {m.wall_s:.0f} s</span></p>',
        f'<table class="sum"><thead><tr><th></th>{head}</tr></thead><tbody>{"".join(body_rows)}</tbody></table>',
    ]
    for n in m.neighbours:
        data = n.to_json()
        parts.append(f"<h2>Wire schema {e(n.old)} &rarr; {e(n.new)}</h2>")
        if n.diff is None:
            parts.append(f"<p>not compared: {e(n.error)}</p>")
            continue
        parts.append(f"<p>{data['changes']} change(s), {len(data['breaking'])} breaking</p>")
        items = "".join(f"<li>{e(t)}</li>" for t in data["all"][:500])
        parts.append(f'<ul class="checks">{items}</ul>')
    return page("codex releases side by side", "".join(parts))


def neighbours(versions: list[str]) -> list[Neighbours]:
    out = []
    for old, new in itertools.pairwise(versions):
        try:
            diff = diff_bundles(schema_store.load_bundle(old), schema_store.load_bundle(new), old, new)
            out.append(Neighbours(old, new, diff))
        except Exception as exc:  # a release whose pin could not be made: said in its cell
            out.append(Neighbours(old, new, None, f"{type(exc).__name__}: {exc}"))
    return out


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--codex", metavar="PATH", action="append", default=[], help="a codex binary (repeat: at least two)"
    )
    parser.add_argument("--out", metavar="DIR", type=Path, default=Path("release-matrix"), help="where the files go")
    parser.add_argument(
        "--latency-samples", type=int, default=10, metavar="N", help="samples per latency case (0 skips them)"
    )
    parser.add_argument("--scenario", metavar="NAME", action="append", default=[], help="only these scenarios")
    parser.add_argument("--store", metavar="DIR", type=Path, help="your schema store (as validate-release)")
    confine.add_argument(parser)


def run(args: argparse.Namespace) -> int:
    from harness.commands.schema import user_store_to_write
    from harness.commands.validate_release import progress_line, select_scenarios, validate
    from harness.targets import TargetUnavailable
    from harness.targets.real_adapter import preflight

    if not MIN_BINARIES <= len(args.codex) <= MAX_BINARIES:
        raise UsageError(f"matrix needs between {MIN_BINARIES} and {MAX_BINARIES} --codex PATH, got {len(args.codex)}")
    if args.latency_samples < 0:
        raise UsageError("--latency-samples must be >= 0")
    binaries: dict[str, Path] = {}
    given: dict[str, str] = {}  # the path as the user wrote it, for the table
    for spec in args.codex:
        try:
            binary, version = preflight(Path(spec), require_pinned_schema=False)
        except TargetUnavailable as exc:
            raise UsageError(str(exc)) from None
        if version in binaries:
            raise UsageError(f"{spec} and {binaries[version]} are both codex-cli {version}")
        binaries[version] = binary
        given[version] = spec
    versions = sorted(binaries, key=schema_store.version_key)
    root = user_store_to_write(args.store)
    scenarios = select_scenarios(args.scenario)
    from harness.report_dir import writable_with

    writable_with(args.out, ("matrix.md", "matrix.json", "matrix.html"), "--out")  # before the work, not after it
    started = time.perf_counter()
    reports = []
    with schema_store.using_user_store(root):
        for version in versions:
            progress_line(f"== codex-cli {version}")
            samples = args.latency_samples
            report = validate(binaries[version], version, root, scenarios=scenarios, latency_samples=samples)
            report.codex = given[version]
            reports.append(report)
        matrix = Matrix(reports, neighbours(versions))
    matrix.command = "codex-harness matrix " + " ".join(f"--codex {c}" for c in args.codex)
    matrix.wall_s = time.perf_counter() - started
    markdown = escape(render_markdown(matrix), keep_newlines=True)  # matrix.md is read in terminals too
    from contracts.safe_dir import SafeDir

    with SafeDir.open(args.out) as held:  # each file written whole, never through a link
        held.write_text("matrix.md", markdown)
        held.write_text("matrix.json", json.dumps(matrix.to_json(), indent=2, default=str) + "\n")
        held.write_text("matrix.html", render_html(matrix))
    print(markdown, end="")
    print(f"matrix: {args.out}/matrix.md, {args.out}/matrix.json, {args.out}/matrix.html")
    print(f"RESULT: {'PASS' if matrix.ok else 'FAIL'}")
    return OK if matrix.ok else FAILED
