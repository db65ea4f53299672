"""The report as Markdown: ``validate-release``'s ``report.md``, ``matrix``'s ``matrix.md``, and any run's checks.

The text is the report's own; the caller escapes it for where it goes (:func:`contracts.text.escape`:
report.md and matrix.md are read in terminals too; :func:`for_file`: and in Markdown renderers).
"""

from __future__ import annotations

from contracts.checks import shown
from contracts.report import Report, Verdict, judge
from harness.report.releases import fidelity_differing, headline, matrix_rows, ms, step_cell, step_groups

SHOWN_CHANGES = 40


def for_file(markdown: str) -> str:
    """Markdown as a ``.md`` file holds it: ``&``, ``<`` and ``>`` as entities, so what a binary or a client wrote
    (a script element in its stderr) is text in every renderer, never raw HTML, as the HTML report escapes it. Our
    own Markdown uses no HTML; inside a code span an entity shows as written (safe, if less pretty)."""
    return markdown.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def render_markdown(report: Report, verdict: Verdict | None = None) -> str:
    """The Markdown of ``report``: a matrix (it has columns), a release report (it has a release), or a run."""
    verdict = verdict or judge(report)
    if report.columns:
        return _matrix(report)
    if report.release is not None:
        return _release(report, verdict)
    return _run(report, verdict)


def _run(report: Report, verdict: Verdict) -> str:
    counts = report.counts
    lines = [
        f"# {report.title}: {verdict.result}",
        "",
        f"{len(report.groups())} scenario run(s), {counts.total} checks: {counts.passed} passed, "
        f"{counts.failed_text()}, {counts.warned} warnings, {counts.skipped} skipped.",
        "",
    ]
    contracts = report.contracts()
    if report.checks:
        lines.append("| scenario | target | " + " | ".join(contracts) + " |")
        lines.append("|---|---|" + "---|" * len(contracts))
        for group in report.groups():
            cells = []
            for contract in contracts:
                mine = group.of_contract(contract)
                cells.append(shown(mine) if mine else "")
            lines.append(f"| {_cell(group.scenario)} | {_cell(group.target)} | " + " | ".join(cells) + " |")
    failed = report.of_status("fail")
    if failed:
        lines += ["", "## Failed checks", ""]
        lines += [
            f"- {c.scenario} [{c.target}] {c.contract} / {c.name} ({c.level}): {c.detail}"
            + (f" [{c.citation}]" if c.citation else "")
            for c in failed
        ]
    return "\n".join(lines) + "\n"


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def _release(report: Report, verdict: Verdict) -> str:
    release, schema = report.release, report.schema
    assert release is not None
    lines = [
        f"# codex-cli {release.version}: {headline(report, verdict)}",
        "",
        f"Binary: `{release.codex}`; run took {round(report.wall_s, 1)} s.",
        "",
        "## Wire schema",
        "",
        f"- pinned: {schema.pin if schema else ''} ({schema.store if schema else ''})",
    ]
    if schema is None or schema.diff is None:
        lines.append(f"- not compared: {schema.baseline if schema and schema.baseline else 'no older release'}")
    else:
        impact = {k: len(v) for k, v in schema.diff.by_impact().items()}
        lines.append(
            f"- compared with {schema.compared_with} ({schema.baseline}): {len(schema.diff.changes)} change(s): "
            + ", ".join(f"{n} {k}" for k, n in impact.items())
        )
        lines.append(f"- breaking: {len(schema.breaking)}")
        lines += [f"  - {b}" for b in schema.breaking[:50]]
        added = schema.added_methods
        if added:
            lines.append(f"- methods added: {', '.join(added[:30])}{' …' if len(added) > 30 else ''}")
    counts = report.counts
    failed = report.of_status("fail")
    lines += [
        "",
        "## Contracts on the real binary (model-level built-in scenarios)",
        "",
        f"{counts.total} checks: {counts.passed} passed, {len(failed)} failed, {counts.skipped} skipped.",
    ]
    lines += [f"- FAIL {c.scenario} {c.contract} {c.name}: {c.detail}" for c in failed]
    lines += ["", "## Fidelity (fake vs real, structural: server sides and trace bundles)", ""]
    fidelity = report.fidelity
    if release.profile_note:
        lines += [f"The fake played release profile {release.profile}: {release.profile_note}.", ""]
    for f in fidelity.entries if fidelity is not None else []:
        lines.append(f"- {f.scenario}: {f.state}")
        if f.error:
            lines.append(f"  - {f.error}")
        lines += [f"  - {d}" for d in f.differences[:10]]
        lines += [f"  - invalid against its release's schema: {x}" for x in f.invalid_frames[:5]]
        lines += [f"  - trace bundle: {x}" for x in f.trace_differences[:10]]
    lines += ["", "## Interrupt latency (ms, nearest rank)", ""]
    rows = report.latency.rows() if report.latency is not None else []
    if rows:
        lines += ["| case | metric | n | p50 | p95 | p99 |", "|---|---|---|---|---|---|"]
        for row in rows:
            lines.append(
                f"| {row['scenario']} | {row['metric']} | {row['n']} | {ms(row['p50'])} | {ms(row['p95'])} "
                f"| {ms(row['p99'])} |"
            )
    else:
        lines.append("not measured")
    return "\n".join(lines) + "\n"


def _matrix(matrix: Report) -> str:
    columns = matrix.columns
    header = "| | " + " | ".join(f"codex-cli {c.version()}" for c in columns) + " |"
    lines = [header, "|---|" + "---|" * len(columns)]
    for label, cells in matrix_rows(matrix):
        lines.append(f"| {label} | " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    notes = [
        f"codex-cli {r.version}: the fake played {r.profile}; {r.profile_note}"
        for r in (c.release for c in columns)
        if r is not None and r.profile_note and r.profile != r.version
    ]
    notes += [
        f"codex-cli {c.version()}: fidelity differs on {', '.join(names)}"
        for c in columns
        if (names := fidelity_differing(c))
    ]
    notes += [
        f"codex-cli {c.version()}: schema pin {c.schema.pin}"
        for c in columns
        if c.schema is not None and c.schema.pin_failed
    ]
    if notes:
        lines += ["", *[f"- {n}" for n in notes]]
    for n in matrix.neighbours:
        lines += ["", f"### codex-cli {n.old} -> {n.new}", ""]
        if n.diff is None:
            lines.append(f"wire schema not compared: {n.error}")
        else:
            lines.append(f"Wire schema (baseline {n.old}): {step_cell(n).replace('**', '')}.")
            data = n.to_json()
            if data["methods_added"]:
                lines.append(f"- methods added: {', '.join(data['methods_added'])}")
            if data["methods_removed"]:
                lines.append(f"- methods removed: {', '.join(data['methods_removed'])}")
        for title, entries, breaking in step_groups(n):
            if title.startswith(("additive", "behaviour changes in the trace")) or not entries:
                continue  # counted above, listed in matrix.json / matrix.html
            lines.append(f"- {title}:")
            mark = "BREAKING " if breaking else ""
            lines += [f"  - {mark}{x}" for x in entries[:SHOWN_CHANGES]]
            if len(entries) > SHOWN_CHANGES:
                lines.append(f"  - ... and {len(entries) - SHOWN_CHANGES} more (matrix.json)")
    failures = [(c.version(), k) for c in columns for k in c.of_status("fail")]
    if failures:
        lines += ["", "### Failed checks", ""]
        lines += [f"- {v} {c.scenario} {c.contract} {c.name}: {c.detail}" for v, c in failures]
    return "\n".join(lines) + "\n"
