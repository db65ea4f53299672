"""The one report model: a run of checks grouped by (scenario, target), and the typed parts a command adds.

Every command that judges builds a :class:`Report` and hands it to the renderers (``harness.report``: terminal,
Markdown, JSON, JUnit; ``harness.html``: the pages); its exit code and its ``RESULT:`` word come from one
function, :func:`contracts.report.verdict.judge`. What each command adds is a typed part of the same model:

- ``run``: the checks and the session records behind them (``show``: one record's checks);
- ``latency``: :class:`LatencyPart`, the distributions (samples per case);
- ``validate-release``: :class:`ReleasePart` (which binary, which fake profile), :class:`SchemaPart` (its pin
  and the diff against the nearest older release), the checks on the real binary, :class:`FidelityPart`
  (fake against real, per scenario), :class:`LatencyPart`;
- ``matrix``: ``columns``, one validate-release report per release (oldest first), and ``neighbours``, the
  wire-schema changes between adjacent columns (:class:`SchemaChanges`).

A part says what it adds to the verdict as :class:`Finding` s: ``pass`` and ``fail`` are judgements, ``skip`` is
something that could not be judged. A part built with ``decides=False`` is a fact to read, not a verdict (the
schema diff and the latency of a matrix column, the latency of a release: as they have always been).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from contracts.checks import registry
from contracts.checks.base import Check, worst
from contracts.record import SessionRecord
from contracts.report.latency import CaseResult
from contracts.schema_diff import Change, ChangeKind, SchemaDiff

FindingStatus = Literal["pass", "fail", "skip"]
#: The latency metrics a release report summarises (client_overhead is the difference of the two).
RELEASE_METRICS: tuple[str, ...] = ("interrupt_to_completed", "cancel_to_result")


@dataclass(frozen=True, slots=True)
class Finding:
    """What one part of a report adds to the verdict (``what`` names it for the reader)."""

    status: FindingStatus
    what: str


@dataclass(frozen=True, slots=True)
class Counts:
    passed: int = 0
    failed: int = 0
    warned: int = 0
    skipped: int = 0
    #: of ``failed``, the should-level ones (recommendations: they fail a run only under --strict)
    should: int = 0

    @property
    def total(self) -> int:
        return self.passed + self.failed + self.warned + self.skipped

    @classmethod
    def of(cls, checks: Sequence[Check]) -> Counts:
        n = {s: 0 for s in ("pass", "fail", "warn", "skip")}
        should = 0
        for c in checks:
            n[c.status] += 1
            should += c.status == "fail" and c.level == "should"
        return cls(n["pass"], n["fail"], n["warn"], n["skip"], should)

    def failed_text(self) -> str:
        """``N failed``, and how many of them are recommendations: ``N failed (K should)``."""
        return f"{self.failed} failed" + (f" ({self.should} should)" if self.should else "")

    def to_json(self) -> dict[str, int]:
        return {
            "checks": self.total,
            "passed": self.passed,
            "failed": self.failed,
            "should_failed": self.should,
            "warnings": self.warned,
            "skipped": self.skipped,
        }


@dataclass(slots=True)
class Group:
    """The checks of one (scenario, target): a row of the table, a testsuite of junit.xml."""

    scenario: str
    target: str
    checks: list[Check] = field(default_factory=list)

    @property
    def status(self) -> str:
        return worst([c.status for c in self.checks])

    @property
    def counts(self) -> Counts:
        return Counts.of(self.checks)

    def of_contract(self, contract: str) -> list[Check]:
        return [c for c in self.checks if c.contract == contract]


@dataclass(frozen=True, slots=True)
class SkipReason:
    """Skips of one (scenario, target) that share a reason: said once, with the checks it covers."""

    scenario: str
    target: str
    reason: str
    checks: tuple[Check, ...]


# --- the parts a command adds -------------------------------------------------------------------------


@dataclass(slots=True)
class ReleasePart:
    """Which codex release a report judges, and which release profile the fake played against it."""

    version: str
    codex: str
    profile: str | None = None
    profile_note: str = ""

    def findings(self) -> list[Finding]:
        return []


def change_text(c: Change) -> str:
    arrow = f" {c.old}->{c.new}" if (c.old or c.new) else ""
    return f"{c.kind} {c.where} {c.name}{arrow}".strip()


@dataclass(slots=True)
class SchemaPart:
    """A release's wire schema: its pin, and its diff against the release it is compared with.

    ``pin``: ``new``, ``already pinned, identical``, ``already pinned, DIFFERENT …`` or ``failed: …``.
    """

    pin: str = ""
    store: str = ""
    compared_with: str | None = None
    #: why that release: "the nearest older release pinned", "--from", or why there is none
    baseline: str = ""
    diff: SchemaDiff | None = None
    decides: bool = True

    @property
    def pin_failed(self) -> bool:
        return self.pin.startswith("failed") or "DIFFERENT" in self.pin

    @property
    def breaking(self) -> list[str]:
        if self.diff is None:
            return []
        return [f"{c.kind} {c.where} {c.name} {c.old}->{c.new}".strip() for c in self.diff.breaking]

    @property
    def added_methods(self) -> list[str]:
        return [c.name for c in self.diff.changes if c.kind == "method_added"] if self.diff else []

    def findings(self) -> list[Finding]:
        if not self.decides:
            return []
        out = [Finding("fail", f"schema pin: {self.pin}")] if self.pin_failed else []
        # A diff without a breaking change has never counted as a judgement by itself (see verdict.judge).
        return out + [Finding("fail", f"breaking against {self.compared_with}: {b}") for b in self.breaking]

    def to_json(self) -> dict[str, Any]:
        return {
            "pin": self.pin,
            "store": self.store,
            "compared_with": self.compared_with,
            "baseline": self.baseline,
            "impact": {k: len(v) for k, v in self.diff.by_impact().items()} if self.diff else None,
            "changes": len(self.diff.changes) if self.diff else None,
            "breaking": self.breaking,
            "added_methods": self.added_methods,
        }


@dataclass(frozen=True, slots=True)
class BehaviourChange:
    """What one scenario's real server sides did differently from one release to the next (real against real,
    structurally, with the orders the binary varies read in one order, as ``diff`` compares): wire and trace
    lines naming the two releases; ``note``: why it was not compared."""

    scenario: str
    wire: tuple[str, ...] = ()
    trace: tuple[str, ...] = ()
    note: str = ""

    @property
    def changed(self) -> bool:
        return bool(self.wire or self.trace)

    def to_json(self) -> dict[str, Any]:
        return {"scenario": self.scenario, "wire": list(self.wire), "trace": list(self.trace), "note": self.note}


@dataclass(slots=True)
class SchemaChanges:
    """From one release to the next (a matrix's neighbouring columns; ``validate-release --from``): the wire-schema
    changes by what they mean to a client, and the behaviour changes of the real servers per scenario.

    The one verdict of a release step: a breaking schema change fails it (as it fails ``validate-release``); an
    exhaustive-match risk, an additive change and a behaviour change are what a client must read, not failures.
    """

    old: str
    new: str
    diff: SchemaDiff | None
    error: str = ""
    behaviour: list[BehaviourChange] = field(default_factory=list)
    #: the trace bundle format (its ``schema``) each release writes; None: not known (no release folder)
    trace_formats: tuple[int | None, int | None] = (None, None)

    @property
    def trace_format_note(self) -> str:
        """What a trace reader must know of the step: the bundle format changed (empty: the same, or not known)."""
        old, new = self.trace_formats
        if old is None or new is None or old == new:
            return ""
        return f"trace bundle format changed: schema {old} -> {new}"

    def findings(self) -> list[Finding]:
        if self.diff is None:
            return [Finding("skip", f"wire schema {self.old} -> {self.new}: not compared: {self.error}")]
        breaking = [change_text(c) for c in self.diff.breaking]
        if not breaking:
            return [Finding("pass", f"wire schema {self.old} -> {self.new}: nothing breaking")]
        return [Finding("fail", f"breaking {self.old} -> {self.new}: {b}") for b in breaking]

    def impact_counts(self) -> dict[str, int]:
        return {name: len(found) for name, found in self.diff.by_impact().items()} if self.diff else {}

    def counts(self) -> dict[str, int]:
        """The numbers every renderer and both commands print for this step."""
        return {
            **self.impact_counts(),
            "behaviour changes": sum(1 for b in self.behaviour if b.changed),
            # what a client sees (the wire) apart from what only a trace reader sees
            "wire changes": sum(1 for b in self.behaviour if b.wire),
            "trace changes": sum(1 for b in self.behaviour if b.trace),
            "scenarios compared": sum(1 for b in self.behaviour if not b.note),
        }

    def to_json(self) -> dict[str, Any]:
        behaviour = [b.to_json() for b in self.behaviour]
        trace_format = {"from": self.trace_formats[0], "to": self.trace_formats[1], "note": self.trace_format_note}
        if self.diff is None:
            return {
                "from": self.old,
                "to": self.new,
                "error": self.error,
                "behaviour": behaviour,
                "trace_format": trace_format,
            }
        changes = self.diff.changes
        impacts = self.diff.by_impact()
        return {
            "from": self.old,
            "to": self.new,
            "changes": len(changes),
            "counts": self.counts(),
            "breaking": [change_text(c) for c in impacts["breaking"]],
            "exhaustive_match_risk": [change_text(c) for c in impacts["exhaustive-match risk"]],
            "additive": [change_text(c) for c in impacts["additive"]],
            "methods_added": [c.name for c in self.diff.of_kind(ChangeKind.METHOD_ADDED)],
            "methods_removed": [c.name for c in self.diff.of_kind(ChangeKind.METHOD_REMOVED)],
            "all": [change_text(c) for c in changes],
            "behaviour": behaviour,
            "trace_format": trace_format,
        }


@dataclass(slots=True)
class FidelityEntry:
    """One scenario's fidelity diff (fake against real), as ``diff`` reports it (its JSON, kept whole)."""

    data: dict[str, Any]
    #: The real binary's server side and trace events as played for this diff (kept in memory, not in the JSON):
    #: what the next release's are compared with (:class:`BehaviourChange`). None: not played.
    real_frames: list[Any] | None = field(default=None, compare=False)
    real_trace: list[str] | None = field(default=None, compare=False)

    @property
    def scenario(self) -> str:
        return str(self.data.get("scenario", ""))

    @property
    def equal(self) -> bool:
        return bool(self.data.get("equal"))

    @property
    def skipped(self) -> str:
        return str(self.data.get("skipped") or "")

    @property
    def error(self) -> str:
        return str(self.data.get("error") or "")

    @property
    def differences(self) -> list[str]:
        return [str(d.get("text", d)) if isinstance(d, dict) else str(d) for d in self.data.get("differences") or []]

    @property
    def invalid_frames(self) -> list[str]:
        return [str(x) for x in self.data.get("invalid_frames") or []]

    @property
    def trace_differences(self) -> list[str]:
        return [str(x) for x in self.data.get("trace_differences") or []]

    @property
    def compared(self) -> bool:
        """A diff was made (neither side skipped nor failed to play)."""
        return not self.skipped and not self.error

    @property
    def state(self) -> str:
        """``equal``, ``skipped: why`` or ``DIFFERENT``, as every renderer says it."""
        return "equal" if self.equal else ("skipped: " + self.skipped if self.skipped else "DIFFERENT")

    def finding(self) -> Finding:
        if self.equal:
            return Finding("pass", f"fidelity {self.scenario}: equal")
        if self.skipped:
            return Finding("skip", f"fidelity {self.scenario}: skipped: {self.skipped}")
        # Not equal and not skipped: a difference, or a side that could not be played (a failure either way).
        return Finding("fail", f"fidelity {self.scenario}: " + (self.error or "DIFFERENT"))


@dataclass(slots=True)
class FidelityPart:
    """Fake against real, per scenario (the release profile the fake played is the report's :class:`ReleasePart`)."""

    entries: list[FidelityEntry] = field(default_factory=list)

    @property
    def failures(self) -> list[FidelityEntry]:
        return [f for f in self.entries if not f.equal and not f.skipped]

    @property
    def compared(self) -> list[FidelityEntry]:
        return [f for f in self.entries if not f.skipped]

    def findings(self) -> list[Finding]:
        return [f.finding() for f in self.entries]


@dataclass(slots=True)
class LatencyPart:
    """Latency distributions: each case's samples. ``decides``: a sample not aborted fails (``latency``)."""

    cases: list[CaseResult] = field(default_factory=list)
    decides: bool = False
    metrics: tuple[str, ...] = RELEASE_METRICS

    def rows(self) -> list[dict[str, Any]]:
        """One summary per (case, metric): ``{"scenario", "metric", "n", "p50", "p95", "p99", "max"}``."""
        return [{"scenario": c.scenario, **c.summary(m)} for c in self.cases for m in self.metrics]

    def findings(self) -> list[Finding]:
        if not self.decides:
            return []
        out = []
        for case in self.cases:
            bad = case.not_aborted
            what = f"latency {case.scenario} [{case.target}]"
            out.append(Finding("fail", f"{what}: {len(bad)} sample(s) not aborted") if bad else Finding("pass", what))
        return out


# --- the report -----------------------------------------------------------------------------------------


@dataclass(slots=True)
class Report:
    """A run of checks and the parts its command adds; see the module's docstring."""

    title: str = "codex-harness report"
    checks: list[Check] = field(default_factory=list)
    records: list[SessionRecord] = field(default_factory=list)
    release: ReleasePart | None = None
    schema: SchemaPart | None = None
    fidelity: FidelityPart | None = None
    latency: LatencyPart | None = None
    columns: list[Report] = field(default_factory=list)
    neighbours: list[SchemaChanges] = field(default_factory=list)
    command: str = ""
    wall_s: float = 0.0
    #: the budgets the client declared (``run --budget``: plan name → ms); every scenario was judged with them
    budgets: dict[str, int] = field(default_factory=dict)
    #: what was judged, by what (``client``, ``target``, ``release``, ``harness``): the header of every rendering
    judged: dict[str, str] = field(default_factory=dict)

    def judged_line(self) -> str:
        """``Judged: the client … on target … (release …), by codex-harness X``, or empty when not known."""
        if not self.judged:
            return ""
        j = self.judged
        release = f" (release {j['release']})" if j.get("release") else ""
        harness = f", by codex-harness {j['harness']}" if j.get("harness") else ""
        return f"Judged: {j.get('client', '?')} on target {j.get('target', '?')}{release}{harness}"

    def groups(self) -> list[Group]:
        """The checks by (scenario, target), in the order the rows were first seen (linear in the checks)."""
        groups: dict[tuple[str, str], Group] = {}
        for c in self.checks:
            key = (c.scenario, c.target)
            group = groups.get(key)
            if group is None:
                group = groups[key] = Group(c.scenario, c.target)
            group.checks.append(c)
        return list(groups.values())

    @property
    def counts(self) -> Counts:
        return Counts.of(self.checks)

    @property
    def targets(self) -> list[str]:
        return list(dict.fromkeys(c.target for c in self.checks))

    def contracts(self) -> list[str]:
        """The contracts the checks name: the session contracts in their order, then any other, sorted."""
        present = {c.contract for c in self.checks}
        known = [name for name in registry.names("session") if name in present]
        return known + sorted(present - set(known))

    def of_status(self, status: str) -> list[Check]:
        return [c for c in self.checks if c.status == status]

    def skip_reasons(self) -> list[SkipReason]:
        """Skips grouped by (scenario, target, reason): 'target does not support' reads once per scenario."""
        grouped: dict[tuple[str, str, str], list[Check]] = {}
        for c in self.checks:
            if c.status == "skip":
                grouped.setdefault((c.scenario, c.target, c.detail), []).append(c)
        return [SkipReason(s, t, reason, tuple(checks)) for (s, t, reason), checks in grouped.items()]

    def skipped_scenarios(self) -> dict[tuple[str, str], str]:
        """(scenario, target) that were not played at all, with why (their checks are named ``scenario``)."""
        out: dict[tuple[str, str], str] = {}
        for c in self.checks:
            if c.status == "skip" and c.name in ("", "scenario"):
                out.setdefault((c.scenario, c.target), c.detail)
        return out

    def parts(self) -> list[ReleasePart | SchemaPart | FidelityPart | LatencyPart]:
        return [p for p in (self.release, self.schema, self.fidelity, self.latency) if p is not None]

    def version(self) -> str:
        return self.release.version if self.release is not None else ""


def release_report(version: str, codex: str, *, store: str = "") -> Report:
    """An empty release report of codex-cli ``version`` (validate-release fills it; a matrix column is one)."""
    return Report(
        title=f"codex-cli {version}",
        release=ReleasePart(version, codex),
        schema=SchemaPart(store=store),
        fidelity=FidelityPart(),
        latency=LatencyPart(),
    )
