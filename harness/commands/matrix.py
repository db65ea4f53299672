"""``codex-harness matrix --codex PATH --codex PATH…``: several codex releases side by side, one table.

Each binary gets what ``validate-release`` gives it (its schema pinned or compared with the shipped pin, the
model-level built-in scenarios on the real binary with the contracts, the fidelity diff of each against the
fake playing that release's profile, the interrupt latency cases); the releases become the columns, oldest
first, with the wire-schema changes between neighbours. Writes ``matrix.md``, ``matrix.json`` and
``matrix.html`` into ``--out`` and prints the Markdown.

The matrix is one report model (:mod:`contracts.report`): a column per release, each a validate-release
report, and the schema changes between neighbours; its verdict is the one function every command uses. Exit 0
when every release holds its contracts and matches its fake profile, 1 otherwise (a schema change between
releases is a fact to read, not a failure: a column's schema part does not decide), 3 for usage errors (fewer
than two binaries, one that does not run, two of the same release, no writable store).
"""

from __future__ import annotations

import argparse
import itertools
import json
import time
from pathlib import Path

from contracts import schema_store
from contracts.exitcodes import UsageError
from contracts.report import BehaviourChange, Report, SchemaChanges, judge
from contracts.schema_diff import diff_bundles
from contracts.text import escape
from harness import confine

NAME = "matrix"
HELP = "validate several codex releases and print them side by side (schema changes, contracts, fidelity, latency)"
MIN_BINARIES = 2
MAX_BINARIES = 8


def matrix_report(columns: list[Report], changes: list[SchemaChanges], command: str = "") -> Report:
    """The matrix of release reports (oldest first): their schema parts are facts to read, not verdicts."""
    for column in columns:
        if column.schema is not None:
            column.schema.decides = False
    return Report(title="codex releases side by side", columns=columns, neighbours=changes, command=command)


def neighbours(versions: list[str], columns: list[Report] | None = None) -> list[SchemaChanges]:
    """Each release step: the schema diff old -> new and, given the columns, what the real servers did
    differently per scenario."""
    out = []
    by_version = {c.version(): c for c in columns or []}
    for old, new in itertools.pairwise(versions):
        try:
            diff = diff_bundles(schema_store.load_bundle(old), schema_store.load_bundle(new), old, new)
            step = SchemaChanges(old, new, diff)
        except Exception as exc:  # a release whose pin could not be made: said in its cell
            step = SchemaChanges(old, new, None, f"{type(exc).__name__}: {exc}")
        if old in by_version and new in by_version:
            step.behaviour = behaviour_changes(by_version[old], by_version[new])
        out.append(step)
    return out


def behaviour_changes(old: Report, new: Report) -> list[BehaviourChange]:
    """Per scenario both releases played: the real server sides against each other (wire, then trace events),
    structurally, the orders a real binary varies read in one order (as ``diff`` compares fake and real)."""
    from contracts.fidelity import diff_server_sides
    from contracts.trace.sequence import diff_sequences

    sides = (old.version(), new.version())
    before = {f.scenario: f for f in (old.fidelity.entries if old.fidelity else [])}
    out = []
    for entry in new.fidelity.entries if new.fidelity else []:
        other = before.get(entry.scenario)
        if other is None or other.real_frames is None or entry.real_frames is None:
            why = "not played on both releases" if other is None else (other.error or entry.error or "not played")
            out.append(BehaviourChange(entry.scenario, note=why))
            continue
        wire = diff_server_sides(other.real_frames, entry.real_frames, collapse_deltas=True, sides=sides)
        if other.real_trace is None or entry.real_trace is None:
            trace = [] if other.real_trace is entry.real_trace else ["only one release wrote a readable trace bundle"]
        else:
            trace = diff_sequences(other.real_trace, entry.real_trace, sides=sides)
        out.append(BehaviourChange(entry.scenario, tuple(str(d) for d in wire), tuple(trace)))
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
        for n, version in enumerate(versions):
            progress_line(f"== codex-cli {version}")
            samples = args.latency_samples
            previous = versions[n - 1] if n else None  # each column's schema against the column before it
            report = validate(
                binaries[version], version, root, scenarios=scenarios, latency_samples=samples, baseline=previous
            )
            if report.release is not None:
                report.release.codex = given[version]
            reports.append(report)
        matrix = matrix_report(reports, neighbours(versions, reports))
    matrix.command = "codex-harness matrix " + " ".join(f"--codex {c}" for c in args.codex)
    matrix.wall_s = time.perf_counter() - started
    return write_matrix(matrix, args.out)


def write_matrix(matrix: Report, out: Path) -> int:
    """matrix.md, matrix.json and matrix.html into ``out``, the Markdown on the terminal, the ``RESULT:`` line;
    the exit code (the model's verdict)."""
    from contracts.safe_dir import SafeDir
    from harness.html.matrix import render_matrix
    from harness.report import result_line
    from harness.report.documents import matrix_json
    from harness.report.markdown import render_markdown

    verdict = judge(matrix)
    markdown = escape(render_markdown(matrix, verdict), keep_newlines=True)  # matrix.md is read in terminals too
    with SafeDir.open(out) as held:  # each file written whole, never through a link
        held.write_text("matrix.md", markdown)
        held.write_text("matrix.json", json.dumps(matrix_json(matrix, verdict), indent=2, default=str) + "\n")
        held.write_text("matrix.html", render_matrix(matrix, verdict))
    print(markdown, end="")
    print(f"matrix: {out}/matrix.md, {out}/matrix.json, {out}/matrix.html")
    print(result_line(verdict))
    return verdict.exit_code
