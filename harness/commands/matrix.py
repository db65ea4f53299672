"""``codex-harness matrix --codex PATH --codex PATH…``: several codex releases side by side, one table.

Each binary gets what ``validate-release`` gives it (its schema pinned or compared with the shipped pin, the
model-level built-in scenarios on the real binary with the contracts, the fidelity diff of each against the
fake playing that release's profile, the interrupt latency cases); the releases become the columns, oldest
first, with the wire-schema changes between neighbours. Writes ``matrix.md``, ``matrix.json`` and
``matrix.html`` into ``--out`` and prints the Markdown.

The matrix is one report model (:mod:`contracts.report`): a column per release, each a validate-release
report, and the release steps between neighbours (:mod:`harness.release_step`: the schema by client impact,
the behaviour changes real against real); its verdict is the one function every command uses. Exit 0 when every
release holds its contracts and matches its fake profile and no step has a breaking schema change (as
``validate-release`` judges one; exhaustive-match risks and behaviour changes are facts to read), 1 otherwise, 3
for usage errors (fewer than two binaries, one that does not run, two of the same release, no writable store).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from codex_sandbox import confine
from contracts import schema_store
from contracts.exitcodes import UsageError
from harness.release_step import (  # noqa: F401 (the matrix's own names, as before)
    behaviour_changes,
    matrix_report,
    neighbours,
    write_matrix,
)

NAME = "matrix"
HELP = "validate several codex releases and print them side by side (schema changes, contracts, fidelity, latency)"
MIN_BINARIES = 2
MAX_BINARIES = 8


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--codex", metavar="PATH", action="append", default=[], help="a codex binary (repeat: at least two)"
    )
    parser.add_argument(
        "--report",
        "--out",
        dest="out",
        metavar="DIR",
        type=Path,
        default=Path("release-matrix"),
        help="where the files go (--out: the same)",
    )
    parser.add_argument(
        "--latency-samples", type=int, default=10, metavar="N", help="samples per latency case (0 skips them)"
    )
    parser.add_argument("--scenario", metavar="NAME", action="append", default=[], help="only these scenarios")
    parser.add_argument("--store", metavar="DIR", type=Path, help="your schema store (as validate-release)")
    confine.add_argument(parser)


def run(args: argparse.Namespace) -> int:
    from harness.release_validation import progress_line, select_scenarios, validate
    from harness.schema_pin import user_store_to_write
    from harness.targets import TargetUnavailable
    from harness.targets.real_adapter import preflight

    if not MIN_BINARIES <= len(args.codex) <= MAX_BINARIES:
        raise UsageError(f"matrix needs between {MIN_BINARIES} and {MAX_BINARIES} --codex PATH, got {len(args.codex)}")
    if args.latency_samples < 0:
        raise UsageError("--latency-samples must be >= 0")
    binaries: dict[str, Path] = {}
    given: dict[str, str] = {}  # the path as the user wrote it, for the table
    for spec in args.codex:
        try:
            binary, version = preflight(Path(spec), require_pinned_schema=False)
        except TargetUnavailable as exc:
            raise UsageError(str(exc)) from None
        if version in binaries:
            raise UsageError(f"{spec} and {binaries[version]} are both codex-cli {version}")
        binaries[version] = binary
        given[version] = spec
    versions = sorted(binaries, key=schema_store.version_key)
    root = user_store_to_write(args.store)
    scenarios = select_scenarios(args.scenario)
    from harness.report_dir import writable_with

    writable_with(args.out, ("matrix.md", "matrix.json", "matrix.html"), "--report")  # before the work, not after it
    started = time.perf_counter()
    reports = []
    with schema_store.using_user_store(root):
        for n, version in enumerate(versions):
            progress_line(f"== codex-cli {version}")
            samples = args.latency_samples
            previous = versions[n - 1] if n else None  # each column's schema against the column before it
            report = validate(
                binaries[version], version, root, scenarios=scenarios, latency_samples=samples, baseline=previous
            )
            if report.release is not None:
                report.release.codex = given[version]
            reports.append(report)
        matrix = matrix_report(reports, neighbours(versions, reports))
    matrix.command = "codex-harness matrix " + " ".join(f"--codex {c}" for c in args.codex)
    matrix.wall_s = time.perf_counter() - started
    return write_matrix(matrix, args.out)
