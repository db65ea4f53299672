"""The report as JSON documents: ``report.json`` (validate-release), ``matrix.json``, ``latency.json`` and
``latency --json``. Each keeps every key it has always had; ``result`` (the ``RESULT:`` word) is added."""

from __future__ import annotations

from typing import Any

from contracts.report import LatencyPart, Report, Verdict, judge
from contracts.report.latency import METRICS
from harness.report.releases import headline, matrix_rows, verdict_word


def release_json(report: Report, verdict: Verdict | None = None) -> dict[str, Any]:
    verdict = verdict or judge(report)
    release, schema = report.release, report.schema
    assert release is not None
    failed = report.of_status("fail")
    counts = report.counts
    fidelity = report.fidelity
    return {
        "version": release.version,
        "codex": release.codex,
        "verdict": verdict_word(verdict, report),
        "headline": headline(report, verdict),
        "result": verdict.result,
        "schema": schema.to_json() if schema is not None else None,
        "contracts": {
            "checks": counts.total,
            "passed": counts.passed,
            "failed": [c.to_dict() for c in failed],
            "skipped": counts.skipped,
        },
        "profile": {"release": release.profile, "note": release.profile_note},
        "fidelity": [f.data for f in fidelity.entries] if fidelity is not None else [],
        "latency": report.latency.rows() if report.latency is not None else [],
        "wall_s": round(report.wall_s, 1),
    }


def matrix_json(matrix: Report, verdict: Verdict | None = None) -> dict[str, Any]:
    verdict = verdict or judge(matrix)
    return {
        "command": matrix.command,
        "releases": [c.version() for c in matrix.columns],
        "ok": verdict.ok,
        "result": verdict.result,
        "verdict": verdict_word(verdict, matrix),
        "headline": headline(matrix, verdict),
        "wall_s": round(matrix.wall_s, 1),
        "neighbours": [n.to_json() for n in matrix.neighbours],
        "table": [{"row": label, "cells": cells} for label, cells in matrix_rows(matrix)],
        "reports": [release_json(c) for c in matrix.columns],
    }


def latency_samples_json(part: LatencyPart) -> list[dict[str, Any]]:
    """What ``latency --json`` prints: per case the summaries and every sample with its status."""
    return [
        {
            "scenario": r.scenario,
            "target": r.target,
            "summaries": [r.summary(m) for m in METRICS],
            "samples": [
                {
                    "status": s.status,
                    "interrupt_to_completed_ms": s.interrupt_to_completed_ms,
                    "cancel_to_result_ms": s.cancel_to_result_ms,
                    "client_overhead_ms": s.client_overhead_ms,
                    "error": s.error,
                }
                for s in r.samples
            ],
            "warmups": len(r.warmups),
            "all_aborted": r.all_aborted,
        }
        for r in part.cases
    ]


def latency_file_json(part: LatencyPart) -> list[dict[str, Any]]:
    """``latency.json`` beside latency.html: per case the summaries and each metric's values."""
    return [
        {
            "scenario": r.scenario,
            "target": r.target,
            "summaries": [r.summary(m) for m in METRICS],
            "samples": {m: [s.metric(m) for s in r.samples] for m in METRICS},
        }
        for r in part.cases
    ]
