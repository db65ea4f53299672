"""``codex-harness run --client-cmd "CMD ARGS"``: the contract suite against an outside client.

``--client-cmd`` implies ``--target fake-process``; any other target is a usage error (exit 3), so is a
command that cannot start. The outputs are those of any run: the table, ``--report`` (checks.json,
junit.xml, one record per scenario with the fake's recordings and the client's output tails), exit 0/1,
``--baseline``.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from collections.abc import Callable, Sequence

from contracts.exitcodes import UsageError
from contracts.releases import default_version
from contracts.scenario import Scenario
from harness import budgets
from harness.outside.runner import TARGET, ClientSpec, check_command, run_outside_one
from harness.report_dir import ReportDir


def add_client_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--client-cmd",
        metavar='"CMD ARGS"',
        help="judge this outside client instead of ours (split like a shell; implies --target fake-process)",
    )
    try:  # the release seam: --release may already be there for every target
        parser.add_argument(
            "--release",
            metavar="X",
            help="the release profile the fake plays for --client-cmd (default: the scenario's, else "
            f"{default_version()})",
        )
    except argparse.ArgumentError:
        pass
    parser.add_argument(
        "--client-deadline",
        metavar="SECONDS",
        type=float,
        help="wall-clock bound per scenario for --client-cmd (default: per turn its turn timeout and interrupt "
        "budget, then the teardown, + 10 s, under the declared budgets)",
    )


def client_spec(args: argparse.Namespace) -> ClientSpec:
    """Validate the --client-cmd options (usage errors exit 3) and set the implied target."""
    if args.target not in (None, TARGET):
        raise UsageError(f"--client-cmd runs on --target {TARGET} only, not {args.target}")
    args.target = TARGET
    try:
        argv = shlex.split(args.client_cmd)
    except ValueError as exc:
        raise UsageError(f"--client-cmd: {exc}") from None
    check_command(argv)
    deadline = args.client_deadline
    if deadline is not None and not 0 < deadline <= budgets.MAX_RUN_S:  # a run is capped at 60 min
        raise UsageError(f"--client-deadline must be in (0, {budgets.MAX_RUN_S:g}] seconds, not {deadline:g}")
    release = getattr(args, "release", None)
    if release is not None:
        from fake_server import profiles

        profiles.get(release)  # an unknown release is a usage error that lists the profiles
    return ClientSpec(argv, deadline, release, budgets.from_args(args))


def run_clients(
    spec: ClientSpec,
    scenarios: Sequence[Scenario],
    *,
    report_dir: ReportDir | None,
    progress: Callable[..., None] | None,
) -> list:
    runs = []
    for n, scenario in enumerate(scenarios, 1):
        save = report_dir.slot(TARGET, scenario.name) if report_dir is not None else None
        run = run_outside_one(scenario, spec, save_dir=save)
        runs.append(run)
        if progress is not None:
            progress(run, n, len(scenarios))
    return runs


def describe(runs: list) -> None:
    """What the harness killed, and what it would not copy into the report, per scenario, on stderr (the
    record keeps both too)."""
    for run in runs:
        facts = run.record.meta.get("outside", {}) if run.record is not None else {}
        if facts.get("killed"):
            why = "at its deadline" if facts.get("deadline_hit") else "after the client exited"
            print(f"{run.scenario}: killed {why}: {', '.join(facts['killed'])}", file=sys.stderr)
        refused = run.record.not_copied if run.record is not None else []
        if refused:
            more = f" (and {len(refused) - 3} more, in record.json)" if len(refused) > 3 else ""
            print(f"{run.scenario}: not copied into the report: {'; '.join(refused[:3])}{more}", file=sys.stderr)

