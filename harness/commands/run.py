"""``codex-harness run``: play scenarios against a target with the client and judge the contracts.

Default: every built-in scenario on the in-process fake. Progress while it runs, then the table
(scenario × contract). The run is one report model (:mod:`contracts.report`) and its exit code the one verdict
every command uses: 0 when no check fails (skips and warnings listed with their reasons; ``--strict`` fails on
them too), 1 otherwise or when nothing was judged; a ``--baseline`` excuses listed failures and fails on stale
entries.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

import orjson

from codex_client.sockets import TRANSPORTS
from codex_client.stderr import terminal_lines
from codex_sandbox import confine
from contracts.exitcodes import INVALID_INPUT, UsageError
from contracts.heap import collector_paused
from contracts.report import BaselineEntry, Report, checks_json, judge, load_baseline
from contracts.scenario import Scenario
from contracts.scenario_file import check_unique_names
from contracts.version import harness_version
from harness import budgets, scenario_lookup, shards, store_option
from harness import report_dir as report_dir_check
from harness.client_under_test import ClientUnderTest, CommandClient, OurClient
from harness.html import write_index_html
from harness.outside.command import add_client_arguments, client_spec, describe, jobs_from_args
from harness.outside.runner import ClientSpec
from harness.progress import Progress
from harness.report import junit_xml, render_table
from harness.report_dir import ReportDir
from harness.runner import ScenarioRun
from harness.targets import TARGET_NAMES

NAME = "run"
HELP = "run the contract suite: scenarios x target, a table of what holds, exit 1 when a contract fails"
STDERR_LINES = 10  # of a server that did not start, shown on the terminal


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--target",
        choices=TARGET_NAMES,
        action="append",
        default=None,
        help="where the server runs (default: fake; with --client-cmd fake-process); repeatable: one row per "
        "(scenario, target)",
    )
    parser.add_argument(
        "--transport",
        choices=TRANSPORTS,
        default="stdio",
        help="how our client reaches the server: stdio (default), ws (the server listens on ws://127.0.0.1:0) or "
        "unix (on a unix socket of the run); see docs/transports.md",
    )
    parser.add_argument(
        "--scenario",
        metavar="NAME|PATH",
        action="append",
        default=[],
        help="a built-in scenario name or a scenario file (repeatable; default: every built-in scenario)",
    )
    parser.add_argument("--scenario-dir", metavar="DIR", action="append", default=[], help="every scenario file of DIR")
    parser.add_argument(
        "--report",
        "--out",
        dest="report",
        metavar="DIR",
        help="write checks.json, junit.xml, each session record and index.html (the HTML report) here",
    )
    parser.add_argument(
        "--strict", action="store_true", help="should-level failures, warnings and skips fail the run too"
    )
    parser.add_argument("--baseline", metavar="FILE", help="known failures (JSON list; a previous checks.json works)")
    parser.add_argument(
        "--stale",
        choices=("fail", "warn"),
        default="fail",
        help="a baseline entry that no longer fails: fail the run (default: a baseline cannot rot) or only list it"
        " (a CI job that fails on new failures only)",
    )
    store_option.add_argument(parser)
    parser.add_argument("--codex", metavar="PATH", help="the real codex binary for --target real (else $CODEX_BIN)")
    confine.add_argument(parser)
    parser.add_argument("--quiet", action="store_true", help="no progress lines")
    parser.add_argument(
        "--shard",
        metavar="K/N",
        help="play only shard K of N of the scenarios (split by name, the same on every machine); `codex-harness "
        "report merge OUT DIR...` joins the N reports into one (docs/ci.md)",
    )
    parser.add_argument("--ascii", action="store_true", help="plain ASCII statuses in the table")
    parser.add_argument(
        "--verbose",
        "-v",
        action="store_true",
        help="every skip on its own line (scenario and reason), and what the harness killed or did not copy for "
        "passing scenarios too (by default: skips one line per reason, and only failing scenarios' notes)",
    )
    add_client_arguments(parser)
    budgets.add_arguments(parser)


def _scenarios(args: argparse.Namespace) -> list[Scenario]:
    specs: list[str] = list(args.scenario)
    for directory in args.scenario_dir:
        specs += [str(p) for p in scenario_lookup.scenario_files(directory)]
    if not specs:
        specs = scenario_lookup.builtin_names()
        if not specs:
            raise UsageError(f"no built-in scenarios found in {scenario_lookup.BUILTIN_DIR}")
        # The catalogue's websocket scenarios run with --transport ws|unix; elsewhere they are left out (said once),
        # not skipped one by one (a skip fails --strict).
        every = [scenario_lookup.resolve(spec) for spec in specs]
        kept = scenario_lookup.playable_over(every, args.transport)
        args.left_out = [s.name for s in every if s not in kept]  # said once the run is sure to go on
        return check_unique_names(kept)
    return check_unique_names([scenario_lookup.resolve(spec) for spec in specs])


def _startup_failures(runs: list[ScenarioRun]) -> None:
    """A server that did not start is said on the terminal with its stderr tail, not only in the report; not
    where the scenario expected it (its checks pass: what a scenario expects is part of its row, not a warning)."""
    for run in runs:
        failure = run.record.meta.get("startup_failure") if run.record is not None else None
        if not failure or run.status != "fail":
            continue
        print(f"codex-harness run: {run.scenario} [{run.target}]: the server did not start: {failure}", file=sys.stderr)
        tail = terminal_lines(run.record.stderr_tail if run.record is not None else "", STDERR_LINES)
        for line in tail or ["(its stderr was empty)"]:
            print(f"  stderr: {line}", file=sys.stderr)


def progress_line(run: ScenarioRun, n: int, total: int) -> str:
    """``[3/56] plain [fake] PASS 15 pass, 0 fail, 0 warn, 0 skip (0.37s)``: a scenario as it ends."""
    counts = {s: sum(c.status == s for c in run.checks) for s in ("pass", "fail", "warn", "skip")}
    should = sum(c.status == "fail" and c.level == "should" for c in run.checks)
    if run.skipped:
        what = f"skipped: {run.skipped}"
    else:
        failed = f"{counts['fail']} fail" + (f" ({should} should)" if should else "")
        what = f"{counts['pass']} pass, {failed}, {counts['warn']} warn, {counts['skip']} skip"
    width = len(str(total))
    return f"[{n:>{width}}/{total}] {run.scenario} [{run.target}] {run.status.upper():4} {what} ({run.wall_s:.2f}s)"


def run(args: argparse.Namespace) -> int:
    """With ``--store DIR``, every release lookup of the command (pins, learned profiles) reads that store."""
    with store_option.using(args):
        return _run(args)


def _check_fake_release(flag: str | None) -> None:
    """A release the fake has no profile for, from ``--release`` or the environment, is the user's error (exit 3),
    said once before anything plays, not a failed check per scenario."""
    from fake_server import profiles

    env = os.environ.get(profiles.RELEASE_ENV)
    try:
        profiles.select(flag, env)
    except profiles.UnknownRelease as exc:
        where = "--release" if flag else f"${profiles.RELEASE_ENV}"
        raise UsageError(f"{where}: {exc}") from None


def _run(args: argparse.Namespace) -> int:
    # The client's warnings are in each record's log; on the terminal they would drown the table.
    logging.getLogger("harness").addHandler(logging.NullHandler())
    started = time.monotonic()
    client = client_spec(args) if args.client_cmd is not None else None  # an outside client (harness.outside)
    jobs = jobs_from_args(args)
    declared = client.budgets if client is not None else budgets.from_args(args)
    targets: list[str] = list(dict.fromkeys(args.target or ["fake"]))
    if any(t != "real" for t in targets):
        _check_fake_release(getattr(args, "release", None))
    baseline = load_baseline(args.baseline) if args.baseline else []
    shard = shards.parse(args.shard) if args.shard else None
    try:
        scenarios = _scenarios(args)
    except scenario_lookup.ScenarioError as exc:
        print(f"codex-harness run: {exc}", file=sys.stderr)
        return INVALID_INPUT
    if shard is not None:
        scenarios = shards.pick(scenarios, [s.name for s in scenarios], *shard)
        print(f"codex-harness run: shard {shard[0]}/{shard[1]}: {len(scenarios)} scenario(s)", file=sys.stderr)
    if declared:  # the client is judged by the budgets it declares; every scenario's plan takes them
        budgets.check_run_caps(budgets.with_budgets(s, declared) for s in scenarios)
        print(f"codex-harness run: budgets declared: {budgets.describe(declared)}", file=sys.stderr)
        if client is None:
            scenarios = [budgets.with_budgets(s, declared) for s in scenarios]
    # A target that cannot run at all is said once, before anything is written or played.
    codex = Path(args.codex) if args.codex else None
    real: tuple[Path, str] | None = None
    if "real" in targets:
        from harness.targets import TargetUnavailable
        from harness.targets.real_adapter import preflight

        try:
            real = preflight(codex)
        except TargetUnavailable as exc:
            raise UsageError(f"--target real: {exc}") from None
        codex = real[0]
    left_out = getattr(args, "left_out", [])
    if left_out and not args.quiet:
        names = ", ".join(left_out)
        print(f"codex-harness run: left out over {args.transport} (websocket faults): {names}", file=sys.stderr)
    # Every path the run will write, checked before anything is played; then held and locked to the end.
    report = None
    if args.report:
        report = report_dir_check.prepare(Path(args.report), [(t, s.name) for t in targets for s in scenarios])
    shown = Progress(len(scenarios) * len(targets)) if not args.quiet else None

    def ended(run: ScenarioRun, n: int, total: int) -> None:
        if shown is not None:
            shown.ended(run.scenario, run.target, progress_line(run, n, total))

    try:
        with shown if shown is not None else contextlib.nullcontext():
            runs = _play(args, client, scenarios, targets, report, jobs, real, codex, ended, shown)
        if client is not None:
            describe(runs if args.verbose else [r for r in runs if r.status == "fail"])
        _startup_failures(runs)
        with collector_paused():  # the records are only read from here on (contracts.heap)
            code = _report(args, runs, baseline, report, declared, judged_by(args, runs, targets))
        _wall_time(runs, time.monotonic() - started, jobs if client is not None else 1)
        return code
    finally:
        if report is not None:
            report.close()


def _play(
    args: argparse.Namespace,
    client: ClientSpec | None,
    scenarios: list[Scenario],
    targets: list[str],
    report: ReportDir | None,
    jobs: int,
    real: tuple[Path, str] | None,
    codex: Path | None,
    ended: Callable[[ScenarioRun, int, int], None],
    shown: Progress | None,
) -> list[ScenarioRun]:
    under_test: ClientUnderTest = (
        CommandClient(client, jobs=jobs, real=real)
        if client is not None
        else OurClient(transport=args.transport, codex=codex)
    )
    started = shown.started if shown is not None else None
    return under_test.play(scenarios, targets, report=report, ended=ended, started=started)


def _report(
    args: argparse.Namespace,
    runs: list[ScenarioRun],
    baseline: list[BaselineEntry],
    report: ReportDir | None,
    declared: dict[str, int] | None = None,
    judged: dict[str, str] | None = None,
) -> int:
    model = Report(
        checks=[c for r in runs for c in r.checks],
        records=[r.record for r in runs if r.record is not None],
        budgets=dict(declared or {}),
        judged=dict(judged or {}),
    )
    verdict = judge(model, strict=args.strict, baseline=baseline, stale_fails=args.stale == "fail")
    print(render_table(model, verdict, ascii_only=args.ascii, verbose=args.verbose), end="")
    if report is not None:  # each file written whole through the held directory, never through a link
        report.write("run.json", orjson.dumps({**model.judged, "result": verdict.result}, option=orjson.OPT_INDENT_2))
        report.write("checks.json", checks_json(model.checks))
        for r in runs:  # each record keeps the verdict it was given: `show` repeats it, never judges differently
            if r.record is not None:
                report.write_verdict(r.target, r.scenario, checks_json(r.checks))
        times = {(r.scenario, r.target): r.wall_s for r in runs}
        report.write("junit.xml", junit_xml(model, strict=args.strict, times=times))
        print(f"report: {report.path}/checks.json, junit.xml, sessions/ ({len(model.checks)} checks)")
        page = write_index_html(report.path, model, model.records, verdict=verdict, into=report.root)
        print(f"HTML report: {page}")
    return verdict.exit_code


def judged_by(args: argparse.Namespace, runs: list[ScenarioRun], targets: list[str]) -> dict[str, str]:
    """What the run judged and by what: the client (ours, or the command given), the targets, the releases the
    server sides were (from the records: what really played), and the harness's version."""
    client = f"the command {args.client_cmd!r}" if args.client_cmd is not None else "the harness's own trio client"
    releases = sorted(
        {r.record.server_version or r.record.schema_release for r in runs if r.record is not None} - {""}
    )
    return {
        "client": client,
        "target": ", ".join(targets),
        "release": ", ".join(releases),
        "harness": harness_version(),
    }


def _wall_time(runs: list[ScenarioRun], elapsed: float, jobs: int) -> None:
    summed = sum(r.wall_s for r in runs)
    if jobs == 1 or len(runs) < 2:
        print(f"wall time {summed:.2f}s for {len(runs)} scenario run(s)", file=sys.stderr)
        return
    longest = max(runs, key=lambda r: r.wall_s)
    print(
        f"wall time {elapsed:.2f}s for {len(runs)} scenario run(s), up to {jobs} at once (the scenarios' own: "
        f"{summed:.2f}s in all, the longest {longest.wall_s:.2f}s, {longest.scenario})",
        file=sys.stderr,
    )
