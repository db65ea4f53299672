"""``codex-harness validate-release``: does a codex release break clients? One report to decide.

For the binary given with ``--codex``: pin its wire schema (into your schema store, like ``schema pin``:
``--store DIR``, else ``$CODEX_HARNESS_STORE``, else ``${XDG_DATA_HOME:-~/.local/share}/codex-harness/schemas``;
a release shipped with the package is compared with the shipped pin, never written), diff the schema
against the newest other pinned release, run the model-level built-in scenarios on the real binary with
the contracts, the fidelity diff of each against the fake, and the interrupt latency cases. Writes ``report.md`` and
``report.json`` into ``--out``. Exit 1 when the schema diff has breaking changes, a contract fails,
or a fidelity diff is not empty; 3 for usage errors (no binary, no writable store).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from contracts import schema_store
from contracts.checks.base import Check
from contracts.exitcodes import FAILED, OK, UsageError
from contracts.fidelity import render
from contracts.scenario import Scenario
from contracts.schema_diff import SchemaDiff, diff_bundles
from contracts.text import escape
from fake_server.catalogue import model_level
from harness import confine, scenario_lookup

NAME = "validate-release"
HELP = "pin a codex release's schema, diff it, run the real-binary suite, fidelity diffs and latency; one report"
DEFAULT_LATENCY_SAMPLES = 10
GENERATE_TIMEOUT_S = 60.0


@dataclass(slots=True)
class ReleaseReport:
    version: str
    codex: str
    pin_state: str = ""  # see pin_schema
    schema_store: str = ""
    compared_with: str | None = None
    profile: str | None = None  # the fake's release profile the fidelity diffs compared with
    profile_note: str = ""
    schema: SchemaDiff | None = None
    checks: list[Check] = field(default_factory=list)
    fidelity: list[dict[str, Any]] = field(default_factory=list)
    latency: list[dict[str, Any]] = field(default_factory=list)
    wall_s: float = 0.0
    #: for the HTML report: the suite's session records and the latency cases' samples
    records: list[Any] = field(default_factory=list)
    latency_cases: list[Any] = field(default_factory=list)

    @property
    def breaking(self) -> list[str]:
        if self.schema is None:
            return []
        return [f"{c.kind} {c.where} {c.name} {c.old}->{c.new}".strip() for c in self.schema.breaking]

    @property
    def failed_checks(self) -> list[Check]:
        return [c for c in self.checks if c.status == "fail"]

    @property
    def fidelity_failures(self) -> list[dict[str, Any]]:
        return [f for f in self.fidelity if not f["equal"] and not f["skipped"]]

    @property
    def verdict(self) -> str:
        pin_failed = self.pin_state.startswith("failed") or "DIFFERENT" in self.pin_state
        if pin_failed or self.breaking or self.failed_checks or self.fidelity_failures:
            return "breaks"
        if self.nothing_judged:
            return "nothing judged"
        return "ok"

    @property
    def nothing_judged(self) -> bool:
        """No contract check passed or failed and no fidelity diff was made: the run proves nothing."""
        judged = any(c.status in ("pass", "fail") for c in self.checks)
        compared = any(not f["skipped"] and not f.get("error") for f in self.fidelity)
        return not judged and not compared

    @property
    def result(self) -> str:
        """The word of the ``RESULT:`` line, as ``run`` prints it."""
        return {"ok": "PASS", "breaks": "FAIL"}.get(self.verdict, "NOTHING JUDGED")

    def to_json(self) -> dict[str, Any]:
        return {
            "version": self.version,
            "codex": self.codex,
            "verdict": self.verdict,
            "schema": {
                "pin": self.pin_state,
                "store": self.schema_store,
                "compared_with": self.compared_with,
                "changes": len(self.schema.changes) if self.schema else None,
                "breaking": self.breaking,
                "added_methods": [c.name for c in self.schema.changes if c.kind == "method_added"]
                if self.schema
                else [],
            },
            "contracts": {
                "checks": len(self.checks),
                "passed": sum(c.status == "pass" for c in self.checks),
                "failed": [c.to_dict() for c in self.failed_checks],
                "skipped": sum(c.status == "skip" for c in self.checks),
            },
            "profile": {"release": self.profile, "note": self.profile_note},
            "fidelity": self.fidelity,
            "latency": self.latency,
            "wall_s": round(self.wall_s, 1),
        }


def render_markdown(report: ReleaseReport) -> str:
    data = report.to_json()
    headline = {"ok": "no client-breaking change found", "breaks": "BREAKS CLIENTS"}.get(
        report.verdict, "NOTHING JUDGED (no check passed or failed: not a pass)"
    )
    lines = [
        f"# codex-cli {report.version}: {headline}",
        "",
        f"Binary: `{report.codex}`; run took {data['wall_s']} s.",
        "",
        "## Wire schema",
        "",
        f"- pinned: {report.pin_state} ({report.schema_store})",
    ]
    if report.schema is None:
        lines.append("- no other pinned release to compare with")
    else:
        lines.append(f"- compared with {report.compared_with}: {len(report.schema.changes)} change(s)")
        lines.append(f"- breaking: {len(report.breaking)}")
        lines += [f"  - {b}" for b in report.breaking[:50]]
        added = data["schema"]["added_methods"]
        if added:
            lines.append(f"- methods added: {', '.join(added[:30])}{' …' if len(added) > 30 else ''}")
    contracts = data["contracts"]
    lines += [
        "",
        "## Contracts on the real binary (model-level built-in scenarios)",
        "",
        f"{contracts['checks']} checks: {contracts['passed']} passed, {len(contracts['failed'])} failed, "
        f"{contracts['skipped']} skipped.",
    ]
    lines += [f"- FAIL {c['scenario']} {c['contract']} {c['name']}: {c['detail']}" for c in contracts["failed"]]
    lines += ["", "## Fidelity (fake vs real, structural: server sides and trace bundles)", ""]
    if report.profile_note:
        lines += [f"The fake played release profile {report.profile}: {report.profile_note}.", ""]
    for f in report.fidelity:
        state = "equal" if f["equal"] else ("skipped: " + f["skipped"] if f["skipped"] else "DIFFERENT")
        lines.append(f"- {f['scenario']}: {state}")
        if f.get("error"):
            lines.append(f"  - {f['error']}")
        lines += [f"  - {d['text']}" for d in f["differences"][:10]]
        lines += [f"  - invalid against its release's schema: {x}" for x in f.get("invalid_frames", [])[:5]]
        lines += [f"  - trace bundle: {x}" for x in f.get("trace_differences", [])[:10]]
    lines += ["", "## Interrupt latency (ms, nearest rank)", ""]
    if report.latency:
        lines += ["| case | metric | n | p50 | p95 | p99 |", "|---|---|---|---|---|---|"]
        for row in report.latency:
            lines.append(
                f"| {row['scenario']} | {row['metric']} | {row['n']} | {_ms(row['p50'])} | {_ms(row['p95'])} "
                f"| {_ms(row['p99'])} |"
            )
    else:
        lines.append("not measured")
    return "\n".join(lines) + "\n"


def _ms(value: float) -> str:
    return "-" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:.1f}"


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


def pin_schema(binary: Path, version: str, root: Path) -> tuple[str, dict[str, Any] | None]:
    """Generate both bundles; store them when ``version`` is not pinned yet. Returns (state, stable bundle).

    An already pinned release (shipped with the package, else in ``root``, the user's store) is compared,
    never overwritten (re-pinning is ``schema pin``'s job); a new one goes to ``root``.
    State: ``new``, ``already pinned, identical``, ``already pinned, DIFFERENT …`` or ``failed: …``.
    """
    from harness.commands.schema import generate_both, same_as_pinned

    try:
        stable, experimental = generate_both(binary, GENERATE_TIMEOUT_S)
    except (RuntimeError, schema_store.SchemaStoreError) as exc:
        return f"failed: {exc}", None
    holder = schema_store.SHIPPED_ROOT if version in schema_store.shipped_releases() else root
    if version in schema_store.pinned_releases(holder):
        pinned = schema_store.load_meta(version, holder).get("bundles", {})
        if same_as_pinned(pinned, stable, experimental):
            return "already pinned, identical", stable
        return "already pinned, DIFFERENT from what the binary prints (not overwritten; see `schema pin`)", stable
    produced_by = {
        "binary_version": version,
        "commands": ["generate-json-schema", "generate-json-schema --experimental"],
    }
    try:
        schema_store.write_release(version, stable, experimental, root, produced_by)
    except schema_store.SchemaStoreError as exc:
        return f"failed: {exc}", stable
    return "new", stable


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--codex", metavar="PATH", help="the codex binary to validate (else $CODEX_BIN)")
    confine.add_argument(parser)
    parser.add_argument(
        "--out", metavar="DIR", type=Path, help="where report.md / report.json go (default: ./release-<version>)"
    )
    parser.add_argument(
        "--latency-samples",
        type=int,
        default=DEFAULT_LATENCY_SAMPLES,
        metavar="N",
        help=f"samples per latency case (default {DEFAULT_LATENCY_SAMPLES}; 0 skips the measurement)",
    )
    parser.add_argument(
        "--scenario", metavar="NAME", action="append", default=[], help="only these model-level scenarios"
    )
    parser.add_argument(
        "--store",
        metavar="DIR",
        type=Path,
        help="your schema store (default: $CODEX_HARNESS_STORE, else "
        "${XDG_DATA_HOME:-~/.local/share}/codex-harness/schemas)",
    )


def progress_line(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def validate(
    binary: Path, version: str, root: Path, *, scenarios: list[Scenario], latency_samples: int
) -> ReleaseReport:
    from harness.commands.diff import fidelity_diff, profile_for
    from harness.latency import CASES, run_case
    from harness.runner import run_many

    started = time.perf_counter()
    report = ReleaseReport(version=version, codex=str(binary), schema_store=str(root))
    report.profile, report.profile_note = profile_for(version)  # like with like: the fake plays this release
    progress_line(f"pinning the schema of codex-cli {version}")
    report.pin_state, stable = pin_schema(binary, version, root)
    if version in schema_store.shipped_releases():  # the pin compared with is the package's, not the user's
        report.schema_store = f"{schema_store.SHIPPED_ROOT} (shipped with the package)"
    others = [v for v in schema_store.pinned_releases() if v != version]  # shipped and the user's
    if stable is not None:
        older = [v for v in others if schema_store.version_key(v) < schema_store.version_key(version)]
        base = (older or others or [None])[-1]
        if base is not None:
            report.compared_with = base
            report.schema = diff_bundles(schema_store.load_bundle(base), stable, base, version)
    if report.pin_state.startswith("failed"):
        report.wall_s = time.perf_counter() - started
        return report
    progress_line(f"contracts: {len(scenarios)} scenario(s) on the real binary")
    runs = run_many(scenarios, ["real"], codex=binary)
    report.checks = [c for r in runs for c in r.checks]
    report.records = [r.record for r in runs if r.record is not None]
    for scenario in scenarios:
        progress_line(f"fidelity: {scenario.name}")
        result = fidelity_diff(scenario, binary, release=report.profile)
        entry = result.to_json()
        entry["rendered"] = render(result.differences)
        report.fidelity.append(entry)
    if latency_samples > 0:
        names = {s.name for s in scenarios}
        for case in CASES:
            if case not in names:
                continue
            progress_line(f"latency: {case} ({latency_samples} samples)")
            scenario = scenario_lookup.load_builtin(case)
            measured = run_case(scenario, "real", samples=latency_samples, warmups=1, settle_ms=100, codex=binary)
            report.latency_cases.append(measured)
            for metric in ("interrupt_to_completed", "cancel_to_result"):
                report.latency.append({"scenario": case, **measured.summary(metric)})
    report.wall_s = time.perf_counter() - started
    return report


def run(args: argparse.Namespace) -> int:
    from harness.targets import TargetUnavailable
    from harness.targets.real_adapter import preflight

    if args.latency_samples < 0:
        raise UsageError("--latency-samples must be >= 0")
    try:  # a binary that cannot run at all: exit 3 at once (its release need not be pinned yet)
        binary, version = preflight(Path(args.codex) if args.codex else None, require_pinned_schema=False)
    except TargetUnavailable as exc:
        raise UsageError(str(exc)) from None
    from harness.commands.schema import user_store_to_write

    root = user_store_to_write(args.store)
    scenarios = select_scenarios(args.scenario)
    out = args.out or Path(f"release-{version}")
    from harness.report_dir import writable_with

    writable_with(out, ("report.json", "report.md", "report.html"), "--out")  # before the suite, not after it
    with schema_store.using_user_store(root):  # the suite validates frames against a pin made here too
        report = validate(binary, version, root, scenarios=scenarios, latency_samples=args.latency_samples)
        note = schema_store.shadowed_note(version)
    if note:
        print(f"codex-harness validate-release: {note}", file=sys.stderr)
    markdown = escape(render_markdown(report), keep_newlines=True)  # report.md is read in terminals too
    from contracts.safe_dir import SafeDir
    from harness.html.release import render_release

    with SafeDir.open(out) as held:  # each file written whole, never through a link
        held.write_text("report.json", json.dumps(report.to_json(), indent=2, default=str) + "\n")
        held.write_text("report.md", markdown)
        held.write_text("report.html", render_release(report, markdown))
    print(markdown, end="")
    print(f"report: {out}/report.md, {out}/report.json, {out}/report.html")
    print(f"RESULT: {report.result}")
    return OK if report.verdict == "ok" else FAILED
