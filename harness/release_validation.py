"""Does a codex release break clients? The release report of ``validate-release``: its schema pinned and diffed
against the nearest older pin, the model-level built-in scenarios on the real binary with the contracts, the
fidelity diff of each against the fake, the interrupt latency cases; and, from an older release (``--from``),
both validated and the step between them."""

from __future__ import annotations

import json
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from contracts import schema_store
from contracts.exitcodes import UsageError
from contracts.fidelity import render
from contracts.report import FidelityEntry, LatencyPart, Report, judge, release_report
from contracts.scenario import Scenario
from contracts.schema_diff import diff_bundles
from contracts.text import escape
from fake_server.catalogue import model_level
from harness import scenario_lookup
from harness.fidelity_run import fidelity_diff, profile_for
from harness.schema_pin import pin_schema, user_store_to_write

OUT_FILES = ("report.json", "report.md", "report.html", "checks.json", "junit.xml")


@dataclass(frozen=True, slots=True)
class Ask:
    """What ``validate-release`` was asked (its options, as given)."""

    codex: str | None = None
    out: Path | None = None
    scenarios: list[str] = field(default_factory=list)
    latency_samples: int = 10
    profile: str | None = None
    from_codex: str | None = None
    store: Path | None = None


def model_level_scenarios() -> list[Scenario]:
    return model_level()


def select_scenarios(names: list[str] | None) -> list[Scenario]:
    """The model-level built-in scenarios, or the ``--scenario`` names among them (others: a usage error)."""
    scenarios = model_level_scenarios()
    if not names:
        return scenarios
    known = {s.name: s for s in scenarios}
    unknown = [n for n in names if n not in known]
    if unknown:
        raise UsageError(f"not model-level built-in scenarios: {', '.join(unknown)} (known: {', '.join(known)})")
    return [known[n] for n in names]


def progress_line(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def validate(
    binary: Path,
    version: str,
    root: Path,
    *,
    scenarios: list[Scenario],
    latency_samples: int,
    profile: str | None = None,
    baseline: str | None = None,
) -> Report:
    """The release report of the binary: pin, schema diff, contracts, fidelity, latency (the model's parts)."""
    from harness.latency import CASES, run_case
    from harness.runner import run_many

    started = time.perf_counter()
    report = release_report(version, str(binary), store=str(root))
    release, schema = report.release, report.schema
    assert release is not None and schema is not None
    progress_line(f"pinning the schema of codex-cli {version}")
    schema.pin, stable = pin_schema(binary, version, root)
    # like with like: the fake plays this release, else the closest by measured behaviour (or --profile)
    measurable = binary if not schema.pin.startswith("failed") else None
    release.profile, release.profile_note = profile_for(version, measurable, profile)
    if version in schema_store.shipped_releases():  # the pin compared with is the package's, not the user's
        schema.store = f"{schema_store.SHIPPED_ROOT} (shipped with the package)"
    others = [v for v in schema_store.pinned_releases() if v != version]  # shipped and the user's
    if stable is not None:
        # The baseline is always an older release, named with why: --from's, else the nearest older pinned one.
        older = [v for v in others if schema_store.version_key(v) < schema_store.version_key(version)]
        base = baseline or (older[-1] if older else None)
        schema.baseline = (
            "--from"
            if baseline
            else ("the nearest older release pinned" if base else "none: no older release is pinned")
        )
        if base is not None:
            schema.compared_with = base
            schema.diff = diff_bundles(schema_store.load_bundle(base), stable, base, version)
    if schema.pin.startswith("failed"):
        report.wall_s = time.perf_counter() - started
        return report
    progress_line(f"contracts: {len(scenarios)} scenario(s) on the real binary")
    runs = run_many(scenarios, ["real"], codex=binary)
    report.checks = [c for r in runs for c in r.checks]
    report.records = [r.record for r in runs if r.record is not None]
    fidelity = report.fidelity
    assert fidelity is not None
    for scenario in scenarios:
        progress_line(f"fidelity: {scenario.name}")
        result = fidelity_diff(scenario, binary, release=release.profile)
        entry: dict[str, Any] = result.to_json()
        entry["rendered"] = render(result.differences)
        fidelity.entries.append(FidelityEntry(entry, real_frames=result.real_side, real_trace=result.real_trace_events))
    latency = report.latency = LatencyPart()
    if latency_samples > 0:
        names = {s.name for s in scenarios}
        for case in CASES:
            if case not in names:
                continue
            progress_line(f"latency: {case} ({latency_samples} samples)")
            scenario = scenario_lookup.load_builtin(case)
            measured = run_case(scenario, "real", samples=latency_samples, warmups=1, settle_ms=100, codex=binary)
            latency.cases.append(measured)
    report.wall_s = time.perf_counter() - started
    return report


def _upgrade(ask: Ask, from_codex: str, binary: Path, version: str, root: Path, scenarios: list[Scenario]) -> int:
    """``--from OLD``: both releases validated, the step between them; the same report ``matrix`` makes of the
    two (one verdict: the same exit code and counts), written as matrix.md / matrix.json / matrix.html."""
    from harness.release_step import matrix_report, neighbours, write_matrix
    from harness.report_dir import writable_with
    from harness.targets import TargetUnavailable
    from harness.targets.real_adapter import preflight

    try:
        old_binary, old_version = preflight(Path(from_codex), require_pinned_schema=False)
    except TargetUnavailable as exc:
        raise UsageError(f"--from: {exc}") from None
    if old_version == version:
        raise UsageError(f"--from {ask.from_codex} and --codex {binary} are both codex-cli {version}")
    if schema_store.version_key(old_version) > schema_store.version_key(version):
        raise UsageError(f"--from codex-cli {old_version} is newer than --codex codex-cli {version}")
    out = ask.out or Path(f"release-{old_version}-to-{version}")
    writable_with(out, ("matrix.md", "matrix.json", "matrix.html"), "--report")
    started = time.perf_counter()
    reports = []
    with schema_store.using_user_store(root):
        steps = ((old_binary, old_version, None, ask.from_codex), (binary, version, old_version, ask.codex))
        for path, ver, base, given in steps:
            progress_line(f"== codex-cli {ver}")
            report = validate(
                path,
                ver,
                root,
                scenarios=scenarios,
                latency_samples=ask.latency_samples,
                baseline=base,
                profile=ask.profile if ver == version else None,  # --profile is the new release's
            )
            if report.release is not None and given:
                report.release.codex = given  # as the user wrote it, as matrix shows it
            reports.append(report)
        matrix = matrix_report(reports, neighbours([old_version, version], reports))
    matrix.title = f"codex-cli {old_version} -> {version}"
    matrix.command = f"codex-harness validate-release --codex {ask.codex or binary} --from {ask.from_codex}"
    matrix.wall_s = time.perf_counter() - started
    return write_matrix(matrix, out)


def write_release(report: Report, out: Path) -> int:
    """Every file of the release report into ``out``, the Markdown on the terminal, the ``RESULT:`` line; the
    exit code (the model's verdict)."""
    from contracts.report import checks_json
    from contracts.safe_dir import SafeDir
    from harness.html.release import render_release
    from harness.report import junit_xml, result_line
    from harness.report.documents import release_json
    from harness.report.markdown import for_file, render_markdown

    verdict = judge(report)
    markdown = escape(render_markdown(report, verdict), keep_newlines=True)  # report.md is read in terminals too
    with SafeDir.open(out) as held:  # each file written whole, never through a link
        held.write_text("report.json", json.dumps(release_json(report, verdict), indent=2, default=str) + "\n")
        held.write_text("report.md", for_file(markdown))  # no raw HTML in a renderer
        held.write_text("report.html", render_release(report, markdown, verdict))
        held.write("checks.json", checks_json(report.checks))
        held.write("junit.xml", junit_xml(report))
    print(markdown, end="")
    print(f"report: {out}/report.md, {out}/report.json, {out}/report.html, {out}/checks.json, {out}/junit.xml")
    print(result_line(verdict))
    return verdict.exit_code


def validate_release(ask: Ask) -> int:
    """``validate-release``: the release report of ``ask.codex`` written into ``ask.out``; its exit code."""
    from harness.targets import TargetUnavailable
    from harness.targets.real_adapter import preflight

    if ask.latency_samples < 0:
        raise UsageError("--latency-samples must be >= 0")
    try:  # a binary that cannot run at all: exit 3 at once (its release need not be pinned yet)
        binary, version = preflight(Path(ask.codex) if ask.codex else None, require_pinned_schema=False)
    except TargetUnavailable as exc:
        raise UsageError(str(exc)) from None
    root = user_store_to_write(ask.store)
    scenarios = select_scenarios(ask.scenarios)
    if ask.from_codex:
        return _upgrade(ask, ask.from_codex, binary, version, root, scenarios)
    out = ask.out or Path(f"release-{version}")
    from harness.report_dir import writable_with

    writable_with(out, OUT_FILES, "--report")  # before the suite, not after it
    with schema_store.using_user_store(root):  # the suite validates frames against a pin made here too
        report = validate(
            binary, version, root, scenarios=scenarios, latency_samples=ask.latency_samples, profile=ask.profile
        )
        note = schema_store.shadowed_note(version)
    if note:
        print(f"codex-harness validate-release: {note}", file=sys.stderr)
    return write_release(report, out)
