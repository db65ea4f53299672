"""A release step and a set of releases as one report (:mod:`contracts.report`): the columns, the steps between
neighbours (schema changes by client impact, behaviour changes real against real), and the files ``matrix`` and
``validate-release --from`` write. Shared by both commands, so a pair is judged alike whichever one ran."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

from contracts import releases, schema_store
from contracts.report import BehaviourChange, Report, SchemaChanges, judge
from contracts.schema_diff import diff_bundles
from contracts.text import escape


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
        step.trace_formats = (_trace_format(old), _trace_format(new))
        if old in by_version and new in by_version:
            step.behaviour = behaviour_changes(by_version[old], by_version[new])
        out.append(step)
    return out


def _trace_format(version: str) -> int | None:
    """The trace bundle format the release writes (its folder's ``trace``), None when no folder says."""
    try:
        found = releases.get(version)
    except Exception:  # no folder, or one that cannot be read: the format is not known, nothing claimed
        return None
    return found.trace.schema if found.trace is not None else None


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


def write_matrix(matrix: Report, out: Path) -> int:
    """matrix.md, matrix.json and matrix.html into ``out``, the Markdown on the terminal, the ``RESULT:`` line;
    the exit code (the model's verdict)."""
    from contracts.safe_dir import SafeDir
    from harness.html.matrix import render_matrix
    from harness.report import result_line
    from harness.report.documents import matrix_json
    from harness.report.markdown import for_file, render_markdown

    verdict = judge(matrix)
    markdown = escape(render_markdown(matrix, verdict), keep_newlines=True)  # matrix.md is read in terminals too
    with SafeDir.open(out) as held:  # each file written whole, never through a link
        held.write_text("matrix.md", for_file(markdown))  # no raw HTML in a renderer
        held.write_text("matrix.json", json.dumps(matrix_json(matrix, verdict), indent=2, default=str) + "\n")
        held.write_text("matrix.html", render_matrix(matrix, verdict))
    print(markdown, end="")
    print(f"matrix: {out}/matrix.md, {out}/matrix.json, {out}/matrix.html")
    print(result_line(verdict))
    return verdict.exit_code
