"""``codex-harness latency``: interrupt latency percentiles against a server process (never virtual time)."""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

import orjson

from contracts.exitcodes import FAILED, OK, UsageError
from harness import confine, scenario_lookup
from harness.latency import CASES, METRICS, CaseResult, Sample, run_case, summary_line
from harness.targets import TargetUnavailable

NAME = "latency"
HELP = "measure interrupt→turn/completed and cancel→Result over fresh server processes (nearest-rank percentiles)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--target",
        choices=("fake", "fake-process", "real"),
        default="fake-process",
        help="fake-process (default) or real; the in-process fake is refused (virtual time measures nothing)",
    )
    parser.add_argument(
        "--scenario", choices=CASES, action="append", default=[], help="case to measure (repeatable; default: all)"
    )
    parser.add_argument("--samples", type=int, default=30, metavar="N", help="measured samples per case (default 30)")
    parser.add_argument("--warmups", type=int, default=3, metavar="W", help="discarded first samples (default 3)")
    parser.add_argument(
        "--settle-delay",
        type=int,
        default=100,
        metavar="MS",
        help="long_stream: cancel this long after the first delta",
    )
    parser.add_argument("--codex", metavar="PATH", help="the real codex binary for --target real (else $CODEX_BIN)")
    confine.add_argument(parser)
    parser.add_argument("--json", action="store_true", help="print the samples and summaries as JSON")
    parser.add_argument(
        "--report", metavar="DIR", help="write latency.html (histograms with p50/p95/p99/max) and latency.json here"
    )


def _progress(name: str, n: int, total: int, sample: Sample) -> None:
    what = sample.status if sample.error is None else f"{sample.status} ({sample.error})"
    print(f"  {name} {n}/{total}: {what}", file=sys.stderr, flush=True)


def run(args: argparse.Namespace) -> int:
    if args.target == "fake":
        raise UsageError("the in-process fake runs on virtual time: latency measures nothing there (use fake-process)")
    if args.samples < 1 or args.warmups < 0 or args.settle_delay < 0:
        raise UsageError("--samples must be >= 1, --warmups and --settle-delay >= 0")
    logging.getLogger("harness").addHandler(logging.NullHandler())
    cases = args.scenario or list(CASES)
    if args.report:  # checked before the samples are taken, not after
        from harness.report_dir import writable_with

        writable_with(args.report, ("latency.html", "latency.json"))
    codex = Path(args.codex) if args.codex else None
    if args.target == "real":
        from harness.commands.diff import select_binary

        codex = select_binary(args.codex)  # a binary that cannot run at all: exit 3 now, not per sample
    results: list[CaseResult] = []
    for name in cases:
        scenario = scenario_lookup.resolve(name)
        try:
            result = run_case(
                scenario,
                args.target,
                samples=args.samples,
                warmups=args.warmups,
                settle_ms=args.settle_delay,
                codex=codex,
                progress=None if args.json else _progress,
            )
        except TargetUnavailable as exc:
            raise UsageError(f"target {args.target} not available: {exc}") from None
        results.append(result)
        if not args.json:
            print(f"{name} on {args.target}: {args.samples} samples, {args.warmups} warm-ups discarded")
            for metric in METRICS:
                print(summary_line(metric, result.summary(metric)))
            bad = [s for s in result.samples + result.warmups if s.status != "aborted"]
            if bad:
                print(f"FAIL {len(bad)} sample(s) not aborted: {sorted({s.status for s in bad})}")
    if args.json:
        doc = [
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
            for r in results
        ]
        print(orjson.dumps(doc, option=orjson.OPT_INDENT_2 | orjson.OPT_SERIALIZE_NUMPY).decode())
    if args.report:
        from harness.html.latency import write_latency_report

        path = write_latency_report(args.report, results)
        print(f"HTML report: {path}", file=sys.stderr if args.json else sys.stdout)
    return OK if all(r.all_aborted for r in results) else FAILED
