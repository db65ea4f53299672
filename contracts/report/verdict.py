"""The verdict of a report: its ``RESULT:`` word and its exit code, from one function for every command.

:func:`judge` reads the checks and the findings of the report's parts (and of its columns, for a matrix):

- a failed check fails the run, unless a **baseline** lists it (a known failure); a failed ``should`` check
  (a recommendation, :mod:`contracts.checks.registry`) is a warning, and fails only under ``--strict``;
- a baseline entry that matches checks which ran and none failed is **stale** and fails the run, so a
  baseline cannot rot (``stale_fails=False``, ``--stale warn``: it is listed and does not fail, for a CI job
  that fails only on new failures);
- under ``--strict`` a skip or a warning not in the baseline fails too, except a skip that is not a gap
  (:attr:`~contracts.checks.base.Check.applies` False: what this kind of run cannot show by construction, such
  as an outside client's own trace, or where nothing of it happened);
- a part's failed finding fails (a breaking schema change, a failed pin, a fidelity difference, a latency
  sample that was not aborted, a matrix column that does not hold);
- a report in which no check passed or failed and no part judged anything **proved nothing**: ``NOTHING
  JUDGED``, exit 1, never a pass.

The word is ``NOTHING JUDGED`` when nothing was judged, else ``FAIL`` when anything fails, else ``PASS``; the
exit code is :data:`~contracts.exitcodes.FAILED` (1) unless the word is ``PASS``.

A **baseline** lists known failures: the TOML file ``codex-harness baseline`` writes (one id a line,
:mod:`contracts.report.baseline_file`), or a JSON list of objects with ``scenario``, ``target``, ``contract`` and
optionally ``name``; a previous ``checks.json`` works (its non-failures are ignored, whatever format it is).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from contracts import bounded_parse, paths
from contracts.checks.base import Check
from contracts.exitcodes import FAILED, OK, UsageError
from contracts.report.baseline_file import parse_baseline_toml
from contracts.report.model import Finding, Report

MAX_BASELINE_BYTES = 64 * 1024 * 1024  # a checks.json of thousands of scenarios is a few MB


@dataclass(frozen=True, slots=True)
class BaselineEntry:
    scenario: str
    target: str
    contract: str
    name: str | None = None  # None: every check of the contract

    def matches(self, check: Check) -> bool:
        return (check.scenario, check.target, check.contract) == (self.scenario, self.target, self.contract) and (
            self.name is None or self.name == check.name
        )

    def describe(self) -> str:
        name = f" / {self.name}" if self.name else ""
        return f"{self.scenario} [{self.target}] {self.contract}{name}"


@dataclass(slots=True)
class Verdict:
    """What decides the exit code, kept for the summary lines of every renderer."""

    failures: list[Check] = field(default_factory=list)  # fail, must, not in the baseline
    known: list[Check] = field(default_factory=list)  # fail, listed in the baseline
    stale: list[BaselineEntry] = field(default_factory=list)  # listed, now passing
    should_failures: list[Check] = field(default_factory=list)  # fail, should: a warning unless --strict
    strict_failures: list[Check] = field(default_factory=list)  # skip/warn under --strict
    failed_findings: list[Finding] = field(default_factory=list)  # what the report's parts found failing
    nothing_judged: bool = False  # no check passed or failed and no part judged anything
    strict: bool = False
    stale_fails: bool = True  # a stale baseline entry fails the run (else it is only listed)
    exit_code: int = OK

    @property
    def result(self) -> str:
        """The word of the ``RESULT:`` line: PASS, FAIL or NOTHING JUDGED."""
        if self.nothing_judged:
            return "NOTHING JUDGED"
        return "FAIL" if self.exit_code else "PASS"

    @property
    def ok(self) -> bool:
        return self.exit_code == OK

    def summary(self, checks: Sequence[Check]) -> dict[str, Any]:
        return {
            "checks": len(checks),
            "failed": len(self.failures),
            "known": len(self.known),
            "stale": [e.describe() for e in self.stale],
            "exit_code": self.exit_code,
            "result": self.result,
        }


def findings(report: Report) -> list[Finding]:
    """What the report's parts found, and for a matrix each column's own verdict."""
    out = [f for part in report.parts() for f in part.findings()]
    out += [f for step in report.neighbours for f in step.findings()]  # a release step: as validate-release
    for column in report.columns:
        v = judge(column)
        name = column.title
        out.append(Finding("pass", name) if v.ok else Finding("fail", f"{name}: {v.result}"))
    return out


def judge(
    subject: Report | Sequence[Check],
    *,
    strict: bool = False,
    baseline: Sequence[BaselineEntry] = (),
    stale_fails: bool = True,
) -> Verdict:
    """The verdict of ``subject`` (a report, or bare checks as a report of a run)."""
    report = subject if isinstance(subject, Report) else Report(checks=list(subject))
    checks = report.checks
    verdict = Verdict(strict=strict, stale_fails=stale_fails)
    # Entries by (scenario, target, contract): each check looks at its own few, so judging stays linear.
    by_key: dict[tuple[str, str, str], list[BaselineEntry]] = {}
    for entry in baseline:
        by_key.setdefault((entry.scenario, entry.target, entry.contract), []).append(entry)
    matched: dict[BaselineEntry, list[Check]] = {}
    for check in checks:
        entries = [e for e in by_key.get((check.scenario, check.target, check.contract), ()) if e.matches(check)]
        for entry in entries:
            matched.setdefault(entry, []).append(check)
        listed = bool(entries)
        if check.status == "fail":
            if listed:
                verdict.known.append(check)
            elif check.level == "should":
                verdict.should_failures.append(check)
            else:
                verdict.failures.append(check)
        elif strict and check.status in ("skip", "warn") and not listed and check.applies:
            # A skip that is not a gap (what the run cannot show by construction, nothing of it happened) is
            # not counted: Check.applies.
            verdict.strict_failures.append(check)
    for entry in dict.fromkeys(baseline):
        ran = [c for c in matched.get(entry, ()) if c.status != "skip"]
        if ran and not any(c.status == "fail" for c in ran):
            verdict.stale.append(entry)
    found = findings(report)
    verdict.failed_findings = [f for f in found if f.status == "fail"]
    # A run in which nothing passed or failed proved nothing: not a pass, whatever was skipped.
    judged = any(c.status in ("pass", "fail") for c in checks) or any(f.status != "skip" for f in found)
    verdict.nothing_judged = not judged
    bad = (
        verdict.failures
        or (stale_fails and verdict.stale)
        or verdict.strict_failures
        or (strict and verdict.should_failures)
        or verdict.failed_findings
        or verdict.nothing_judged
    )
    verdict.exit_code = FAILED if bad else OK
    return verdict


def exit_code(
    subject: Report | Sequence[Check], *, strict: bool = False, baseline: Sequence[BaselineEntry] = ()
) -> int:
    return judge(subject, strict=strict, baseline=baseline).exit_code


def load_baseline(path: str | Path) -> list[BaselineEntry]:
    """Read a baseline file; an unreadable or malformed one is a usage error naming the file."""
    p = Path(path)
    try:
        with paths.open_file(p, "baseline") as fh:  # a FIFO or /dev/zero is refused, never read
            data_bytes = fh.read(MAX_BASELINE_BYTES + 1)
        if len(data_bytes) > MAX_BASELINE_BYTES:
            raise UsageError(f"baseline {p} is larger than {MAX_BASELINE_BYTES} bytes")
        data = bounded_parse.loads_json(data_bytes)
    except OSError as exc:
        raise UsageError(f"cannot read baseline {p}: {exc.strerror}") from None
    except orjson.JSONDecodeError as exc:
        if p.suffix == ".json":
            raise UsageError(f"baseline {p} is not JSON: {exc}") from None
        try:
            text = data_bytes.decode("utf-8")
        except UnicodeDecodeError:
            raise UsageError(f"baseline {p} is neither JSON nor UTF-8 TOML") from None
        return [BaselineEntry(*entry) for entry in parse_baseline_toml(text, str(p))]
    if not isinstance(data, list):
        raise UsageError(f"baseline {p}: expected a JSON list of objects with scenario, target, contract")
    entries = []
    for i, item in enumerate(data):
        if not isinstance(item, dict) or not all(
            isinstance(item.get(k), str) for k in ("scenario", "target", "contract")
        ):
            raise UsageError(f"baseline {p}: entry {i} needs string scenario, target and contract")
        if item.get("status", "fail") != "fail":
            continue
        name = item.get("name")
        entries.append(BaselineEntry(item["scenario"], item["target"], item["contract"], name or None))
    return entries
