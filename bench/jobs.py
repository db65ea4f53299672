"""Catalogue wall time of an outside client: one scenario at a time vs ``--jobs N``, in the same run.

Usage: ``python bench/jobs.py [--jobs N] [--clients careful,sdk] [--quick] [--json PATH]``

For each client (the careful reference client; the official Python SDK, installed on demand into its private
venv, left out with the reason when it cannot be), the catalogue ``run --client-cmd`` plays over stdio is
played twice through the same code the CLI runs (:func:`harness.outside.command.run_clients`): one scenario at
a time, then ``--jobs N``. Printed: both wall times and their ratio (the speed-up), the longest single
scenario of the sequential run, the ``--jobs`` wall time over that longest scenario (goal: <= 2, the
catalogue in about two of its longest scenario) and whether every check got the same status both ways.
``--quick``: the careful client on a part of the catalogue (seconds, not minutes).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _common import REPO, Row, arg_parser, finish

from fake_server.catalogue import builtin_names, load_builtin
from harness.outside.command import DEFAULT_JOBS, run_clients
from harness.outside.runner import ClientSpec
from harness.scenario_lookup import playable_over

BENCH = "jobs"
QUICK = ["plain", "command_approval", "delayed_completion", "scripted_methods", "hang_alive", "plain_two_turns"]


def _client(name: str) -> tuple[list[str], str | None] | str:
    """(argv, release) of a client, or why it cannot run here."""
    if name == "careful":
        return [sys.executable, str(REPO / "conformance" / "clients" / "careful.py")], None
    if name == "sdk":
        from conformance.clients.sdk import SDK_VERSION, SdkUnavailable, client_cmd

        try:
            return client_cmd(), SDK_VERSION
        except SdkUnavailable as exc:
            return f"the official SDK cannot be installed here: {exc}"
    return f"unknown client {name!r} (careful, sdk)"


def _statuses(runs: list[Any]) -> list[tuple[str, str, str, str]]:
    return [(c.scenario, c.contract, c.name, c.status) for r in runs for c in r.checks]


def measure(name: str, argv: list[str], release: str | None, names: list[str], jobs: int) -> list[Row]:
    scenarios = playable_over([load_builtin(n) for n in names], "stdio")
    spec = ClientSpec(argv, profile=release)
    t0 = time.perf_counter()
    alone = run_clients(spec, scenarios, report_dir=None, progress=None, jobs=1)
    sequential = time.perf_counter() - t0
    t0 = time.perf_counter()
    at_once = run_clients(spec, scenarios, report_dir=None, progress=None, jobs=jobs)
    parallel = time.perf_counter() - t0
    longest = max(alone, key=lambda r: r.wall_s)
    longest_jobs = max(at_once, key=lambda r: r.wall_s)
    same = _statuses(alone) == _statuses(at_once)
    differ = sorted(set(_statuses(alone)) ^ set(_statuses(at_once)))
    count = f"{len(scenarios)} scenarios"
    return [
        Row(BENCH, f"{name}: sequential", sequential, "s", note=f"{count}, one at a time"),
        Row(
            BENCH,
            f"{name}: --jobs {jobs}",
            parallel,
            "s",
            baseline=f"{name}: sequential",
            ratio=sequential / parallel if parallel else None,
            note=f"ratio: the speed-up; the scenarios' own walls sum to {sum(r.wall_s for r in at_once):.1f} s "
            f"(sequential: {sum(r.wall_s for r in alone):.1f} s); its longest {longest_jobs.wall_s:.1f} s "
            f"({longest_jobs.scenario})",
        ),
        Row(BENCH, f"{name}: longest scenario", longest.wall_s, "s", note=f"{longest.scenario}, played alone"),
        Row(
            BENCH,
            f"{name}: --jobs {jobs} / longest",
            parallel / longest.wall_s if longest.wall_s else 0.0,
            "x",
            target="<= 2",
            ok=parallel <= 2 * longest.wall_s,
            note="the catalogue's wall time in units of its longest scenario",
        ),
        Row(
            BENCH,
            f"{name}: same verdicts",
            float(same),
            "bool",
            target=">= 1",
            ok=same,
            note="every check the same status both ways" if same else f"differ: {differ[:6]}",
        ),
    ]


def main(argv: list[str] | None = None) -> int:
    parser = arg_parser(__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=DEFAULT_JOBS, help=f"scenarios at once (default {DEFAULT_JOBS})")
    parser.add_argument("--clients", default="careful,sdk", help="comma-separated: careful, sdk")
    args = parser.parse_args(argv)
    names = QUICK if args.quick else builtin_names()
    clients = ["careful"] if args.quick else [c.strip() for c in args.clients.split(",") if c.strip()]
    rows: list[Row] = []
    for name in clients:
        found = _client(name)
        if isinstance(found, str):
            rows.append(Row(BENCH, f"{name}: not measured", 0.0, "s", note=found))
            continue
        client_argv, release = found
        rows += measure(name, client_argv, release, names, args.jobs)
    return finish(rows, f"Catalogue wall time, sequential vs --jobs {args.jobs}", args.json)


if __name__ == "__main__":
    sys.exit(main())
