"""``codex-harness fuzz``: hypothesis-generated scenarios (model steps x faults x client actions) against the
client, judged by the contracts against truth derived from each scenario's steps.

Prints the examples run, examples per second, the fault and action coverage, and any failure with the
shrunk scenario file and its failing checks; exit 1 on a failure.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path
from typing import Any

from contracts import paths
from contracts.exitcodes import UsageError
from contracts.faults import FAULTS, FUZZED_KINDS, SLOW_KINDS
from contracts.report import load_baseline
from harness import budgets, shards

NAME = "fuzz"
HELP = "fuzz the client with generated fault scenarios; a failure is shrunk to a replayable scenario file"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--examples", type=int, default=1000, metavar="N", help="examples to generate (default 1000)")
    parser.add_argument("--seed", type=int, default=0, metavar="S", help="hypothesis seed (default 0)")
    parser.add_argument(
        "--report", "--out", dest="out", metavar="DIR", help="where a failing scenario and its checks are written"
    )
    parser.add_argument(
        "--target",
        choices=("fake", "fake-process"),
        default=None,
        help="in-process fake (default) or fake-codex; with --client-cmd always fake-process",
    )
    parser.add_argument(
        "--client-cmd",
        metavar='"CMD ARGS"',
        help="fuzz this outside client instead of ours: each example played as run --client-cmd plays a scenario "
        "(docs/clients.md), a failed must check is a finding",
    )
    parser.add_argument("--client-deadline", metavar="SECONDS", type=float, help="as run --client-deadline")
    parser.add_argument(
        "--release",
        metavar="X",
        help="the release profile the fake plays for --client-cmd: examples are drawn and judged on its approval "
        "table, and name it",
    )
    parser.add_argument("--baseline", metavar="FILE", help="known findings (as run --baseline): not reported again")
    parser.add_argument(
        "--database",
        metavar="DIR",
        help="hypothesis's example database: failures found by earlier campaigns are replayed first, new ones "
        "saved (keep DIR in your CI cache; docs/ci.md)",
    )
    parser.add_argument(
        "--database-ro",
        metavar="DIR",
        action="append",
        default=[],
        help="a shared database read but never written (repeatable; e.g. the main branch's findings)",
    )
    parser.add_argument(
        "--jobs",
        metavar="N",
        type=int,
        default=None,
        help="--client-cmd: play up to N examples at once (default 1): N hypothesis campaigns in one, each seeded "
        "as --shard K/N seeds shard K and given examples/N, starts staggered as run --jobs staggers them; the first "
        "failure is shrunk alone (docs/clients.md)",
    )
    parser.add_argument("--max-time", metavar="SECONDS", type=float, help="stop playing examples after this long")
    parser.add_argument("--shard", metavar="K/N", help="shard K of N of the campaign: its own seed and examples/N")
    budgets.add_arguments(parser)
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
    if args.max_time is not None and not 0 < args.max_time <= budgets.MAX_RUN_S:
        raise UsageError(f"--max-time must be in (0, {budgets.MAX_RUN_S:g}] seconds")
    try:  # hypothesis is an extra (codex-harness[fuzz]): imported only by the command that needs it
        from harness.fuzz.driver import fuzz
    except ModuleNotFoundError as exc:
        if exc.name != "hypothesis":
            raise
        raise UsageError("fuzz needs hypothesis: pip install 'codex-harness[fuzz]'") from None
    examples, seed_value = args.examples, args.seed
    if args.shard:
        k, n = shards.parse(args.shard)
        examples, seed_value = max(1, -(-examples // n)), args.seed * shards.MAX_SHARDS + k
    kinds = tuple(k for k in FUZZED_KINDS if k not in SLOW_KINDS) if args.fast else FUZZED_KINDS
    play = None
    target = args.target or "fake"
    jobs = _jobs(args)
    if args.client_cmd is not None:
        if args.target == "fake":
            raise UsageError("--client-cmd fuzzes on fake-process (an outside client runs fake-codex)")
        from harness.fuzz.outside import outside_player
        from harness.outside.command import StartGate, client_spec

        args.target = None
        spec = client_spec(args)
        target = spec.target
        baseline = load_baseline(args.baseline) if args.baseline else []
        play = outside_player(spec, baseline, gate=StartGate() if jobs > 1 else None)
    elif args.baseline:
        raise UsageError("--baseline goes with --client-cmd (our own client has no known findings)")
    elif args.release:
        # Our client's examples are judged on the server's own trace as well, which the fuzzer's truth follows for
        # the default release alone (an older release's switches change it); an outside client's never are.
        raise UsageError("--release goes with --client-cmd (our own client is fuzzed on the default release)")
    report = fuzz(
        examples,
        seed_value=seed_value,
        out=out,
        target=target,
        fault_kinds=kinds,
        play=play,
        shrink=not args.no_shrink,
        progress=None if args.quiet else _progress,
        database=_database(args),
        max_time_s=args.max_time,
        jobs=jobs,
        replay=_replay(args),
        release=getattr(args, "release", None),
    )
    if play is not None and report.failure is not None and report.failure.scenario is not None:
        if not report.failure.flaky and not report.failure.error and not play(report.failure.scenario, target).failures:
            report.failure.flaky = True  # the shrunk scenario did not fail again: a flaky client is a finding too
    print(report.text())
    return 0 if report.failure is None else 1


def _replay(args: argparse.Namespace) -> str:
    """What the reproduce line adds after ``codex-harness run`` for an outside client: its command and every
    option that shaped how its examples were played (a failure under an older release's profile, or a budget,
    may not come back without them)."""
    if args.client_cmd is None:
        return ""
    words = ["--client-cmd", args.client_cmd]
    if args.release:
        words += ["--release", args.release]
    for budget in args.budget:
        words += ["--budget", budget]
    if args.budgets:
        words += ["--budgets", args.budgets]
    if args.client_deadline is not None:
        words += ["--client-deadline", f"{args.client_deadline:g}"]
    return shlex.join(words)


def _jobs(args: argparse.Namespace) -> int:
    """--jobs, validated (exit 3 outside 1..MAX_LANES or without --client-cmd); 1 where process trees cannot be
    confined (an unconfined tree is told by the harness's descendants, which examples played at once share)."""
    from harness.fuzz.driver import MAX_LANES

    if args.jobs is None:
        return 1
    if args.client_cmd is None:
        raise UsageError("--jobs plays an outside client's examples at once: it needs --client-cmd")
    if not 1 <= args.jobs <= MAX_LANES:
        raise UsageError(f"--jobs must be in 1..{MAX_LANES}, not {args.jobs}")
    if args.jobs > 1:
        from codex_sandbox import proctree

        if not proctree.confinement().confined:
            why = proctree.confinement().detail
            print(f"codex-harness fuzz: --jobs {args.jobs}: examples play one at a time ({why})", file=sys.stderr)
            return 1
    return int(args.jobs)


def _database(args: argparse.Namespace) -> Any:
    """hypothesis's own example database (never a store of ours): DIR read and written, each --database-ro read."""
    if not args.database and not args.database_ro:
        return None
    from hypothesis.database import (
        DirectoryBasedExampleDatabase,
        ExampleDatabase,
        MultiplexedDatabase,
        ReadOnlyDatabase,
    )

    for where in [args.database, *args.database_ro]:
        if where and Path(where).exists() and (Path(where).is_symlink() or not Path(where).is_dir()):
            raise UsageError(f"--database {where}: not a directory")
    parts: list[ExampleDatabase] = [DirectoryBasedExampleDatabase(args.database)] if args.database else []
    parts += [ReadOnlyDatabase(DirectoryBasedExampleDatabase(d)) for d in args.database_ro]
    return parts[0] if len(parts) == 1 else MultiplexedDatabase(*parts)
