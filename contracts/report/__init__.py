"""The report model every command builds, its verdict (one function: the exit code), and checks.json.

Rendering is the harness's (``harness.report``, ``harness.html``); what was judged and what it means is here.
"""

from __future__ import annotations

from contracts.report.checks_file import checks_json, read_checks_json, write_checks_json
from contracts.report.model import (
    BehaviourChange,
    Counts,
    FidelityEntry,
    FidelityPart,
    Finding,
    Group,
    LatencyPart,
    ReleasePart,
    Report,
    SchemaChanges,
    SchemaPart,
    SkipReason,
    release_report,
)
from contracts.report.verdict import BaselineEntry, Verdict, exit_code, judge, load_baseline

__all__ = [
    "BaselineEntry",
    "BehaviourChange",
    "Counts",
    "FidelityEntry",
    "FidelityPart",
    "Finding",
    "Group",
    "LatencyPart",
    "ReleasePart",
    "Report",
    "SchemaChanges",
    "SchemaPart",
    "SkipReason",
    "Verdict",
    "checks_json",
    "exit_code",
    "judge",
    "load_baseline",
    "read_checks_json",
    "release_report",
    "write_checks_json",
]
