"""``codex-harness fuzz``: hypothesis-generated scenarios (model steps x faults x client actions) against the
client, judged by the contracts against truth derived from each scenario's steps.

Prints the examples run, examples per second, the fault and action coverage, and any failure with the
shrunk scenario file and its failing checks; exit 1 on a failure.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from contracts import paths
from contracts.exitcodes import UsageError
from contracts.faults import FAULTS, FUZZED_KINDS, SLOW_KINDS

NAME = "fuzz"
HELP = "fuzz the client with generated fault scenarios; a failure is shrunk to a replayable scenario file"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--examples", type=int, default=1000, metavar="N", help="examples to generate (default 1000)")
    parser.add_argument("--seed", type=int, default=0, metavar="S", help="hypothesis seed (default 0)")
    parser.add_argument(
        "--report", "--out", dest="out", metavar="DIR", help="where a failing scenario and its checks are written"
    )
    parser.add_argument(
        "--target", choices=("fake", "fake-process"), default="fake", help="in-process fake (default) or fake-codex"
    )
    slow = "; ".join(f"{k}: {FAULTS[k].slow}" for k in SLOW_KINDS)
    parser.add_argument("--fast", action="store_true", help=f"skip the slow faults ({slow})")
    parser.add_argument("--no-shrink", action="store_true", help="report the first failure as found")
    parser.add_argument("--quiet", action="store_true", help="no progress lines")


def _progress(report: Any) -> None:  # a harness.fuzz.driver.FuzzReport
    print(f"  ... {report.examples} examples, {report.rate:.1f}/s", file=sys.stderr, flush=True)


def run(args: argparse.Namespace) -> int:
    if args.examples < 1:
        raise UsageError("--examples must be at least 1")
    out = Path(args.out) if args.out else None
    if out is not None:  # checked now, not when a failure must be written after minutes of fuzzing
        paths.require_writable_dir(out, "--report")
    try:  # hypothesis is an extra (codex-harness[fuzz]): imported only by the command that needs it
        from harness.fuzz.driver import fuzz
    except ModuleNotFoundError as exc:
        if exc.name != "hypothesis":
            raise
        raise UsageError("fuzz needs hypothesis: pip install 'codex-harness[fuzz]'") from None
    kinds = tuple(k for k in FUZZED_KINDS if k not in SLOW_KINDS) if args.fast else FUZZED_KINDS
    report = fuzz(
        args.examples,
        seed_value=args.seed,
        out=out,
        target=args.target,
        fault_kinds=kinds,
        shrink=not args.no_shrink,
        progress=None if args.quiet else _progress,
    )
    print(report.text())
    return 0 if report.failure is None else 1
