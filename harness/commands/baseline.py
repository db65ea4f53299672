"""``codex-harness baseline REPORT_DIR``: a run's failing checks as a baseline a reviewer can read.

It reads the report folder's ``checks.json`` (or a ``checks.json`` given itself) and prints the TOML baseline
(:mod:`contracts.report.baseline_file`): one id a line, each failure's level and detail as a comment above it.
``run --baseline FILE`` reads it.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from contracts.exitcodes import OK, UsageError
from contracts.report.baseline_file import baseline_toml
from contracts.report.checks_file import read_checks_json

NAME = "baseline"
HELP = "print a run's failing checks as a reviewable TOML baseline (for run --baseline)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("report", metavar="REPORT_DIR", help="a run's --report folder (or its checks.json)")


def run(args: argparse.Namespace) -> int:
    path = Path(args.report)
    source = path / "checks.json" if path.is_dir() else path
    try:
        checks = read_checks_json(source)
    except OSError as exc:
        raise UsageError(f"cannot read {source}: {exc.strerror or exc}") from None
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise UsageError(f"{source} is not a run's checks.json: {exc}") from None
    print(baseline_toml(checks), end="")
    return OK
