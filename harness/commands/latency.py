"""``codex-harness latency``: interrupt latency percentiles against a server process (never virtual time).

The measurement is a report (:mod:`contracts.report`) whose latency part decides: a sample whose turn did not
end ``aborted`` fails it (``RESULT: FAIL``, exit 1), as the one verdict function says for every command.
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

import orjson

from codex_sandbox import confine
from contracts.exitcodes import UsageError
from contracts.report import LatencyPart, Report, judge
from harness import scenario_lookup
from harness.latency import CASES, METRICS, Sample, run_case
from harness.report.documents import latency_samples_json
from harness.report.terminal import latency_lines, result_line
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
        "--report",
        "--out",
        dest="report",
        metavar="DIR",
        help="write latency.html (histograms with p50/p95/p99/max) and latency.json here",
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
        from harness.fidelity_run import select_binary

        codex = select_binary(args.codex)  # a binary that cannot run at all: exit 3 now, not per sample
    part = LatencyPart(decides=True, metrics=METRICS)
    report = Report(title=f"interrupt latency on {args.target}", latency=part)
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
        part.cases.append(result)
        if not args.json:  # each case as it is measured, not all at the end
            for line in latency_lines(LatencyPart([result]), samples=args.samples, warmups=args.warmups):
                print(line)
    verdict = judge(report)
    if args.json:
        option = orjson.OPT_INDENT_2 | orjson.OPT_SERIALIZE_NUMPY
        print(orjson.dumps(latency_samples_json(part), option=option).decode())
    if args.report:
        from harness.html.latency import write_latency_report

        path = write_latency_report(args.report, part)
        print(f"HTML report: {path}", file=sys.stderr if args.json else sys.stdout)
    if not args.json:  # stdout stays one JSON document with --json
        print(result_line(verdict))
    return verdict.exit_code
