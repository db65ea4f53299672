"""``codex-harness run --client-cmd "CMD ARGS"``: the contract suite against an outside client.

``--client-cmd`` implies ``--target fake-process``; ``--target real --codex PATH`` runs it against the real
binary (:mod:`.real_relay`); both targets in one run give one row per (scenario, target). Any other target is
a usage error (exit 3), so is a command that cannot start or a binary that cannot run. The outputs are those of
any run: the table, ``--report`` (checks.json, junit.xml, one record per scenario with the recordings and the
client's output tails), exit 0/1, ``--baseline``.

``--jobs N`` plays up to N scenarios at once (:func:`run_clients`): each in its own work directory, process
tree, server and deadline, exactly as alone; the runs, the table and the report keep the catalogue's
order.
"""

from __future__ import annotations

import argparse
import functools
import os
import shlex
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TypeVar

import trio

from codex_sandbox import proctree, workdirs
from contracts.exitcodes import UsageError
from contracts.releases import default_version
from contracts.scenario import Scenario
from harness import budgets
from harness.outside.runner import TARGET, TARGETS, ClientSpec, check_command, deadline_for, run_outside_one
from harness.report_dir import ReportDir

T = TypeVar("T")


def add_client_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--client-cmd",
        metavar='"CMD ARGS"',
        help="judge this outside client instead of ours (split like a shell; --target fake-process, the default, "
        "and/or real with --codex PATH)",
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
        help="wall-clock bound per scenario for --client-cmd (default: the run deadline of docs/clients.md, from the "
        "declared budgets)",
    )
    parser.add_argument(
        "--jobs",
        metavar="N",
        type=int,
        default=None,
        help=f"--client-cmd: play up to N scenarios at once (1..{MAX_JOBS}; default: twice the cores, here "
        f"{DEFAULT_JOBS}). A scenario mostly waits (the client, the fake's pauses, a hung client's deadline): two "
        "per core overlap those waits while the processes' starts still find a core; more queue on the CPU and "
        "stretch every process's own timing. Each scenario keeps its own processes and deadline, its verdict is "
        "the one it gets alone, and the table and report keep the catalogue's order. Where process trees "
        "cannot be confined, scenarios run one at a time (docs/clients.md)",
    )


def client_spec(args: argparse.Namespace) -> ClientSpec:
    """Validate the --client-cmd options (usage errors exit 3) and set the implied target."""
    targets = list(args.target or [TARGET])
    wrong = [t for t in targets if t not in TARGETS]
    if wrong:
        raise UsageError(f"--client-cmd runs on --target {' or '.join(TARGETS)}, not {', '.join(wrong)}")
    args.target = list(dict.fromkeys(targets))
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


MAX_JOBS = 32  # each job holds a client, a fake process and their pipes: bounded like everything else


def default_jobs() -> int:
    """Scenarios played at once unless --jobs says otherwise: twice the cores this process may run on.

    A scenario mostly waits (for the client, for the fake's scripted pauses, for a hung client's deadline);
    its CPU is two interpreters starting (the client's and fake-codex) and the judging. Two per core overlap
    the waits while the starts still find a core; more queue on the CPU and stretch what every process
    times itself (bench/jobs.py measures the catalogue both ways, tests/process/test_outside_jobs.py holds the
    verdicts equal)."""
    return max(2, min(MAX_JOBS, 2 * cores()))


def cores() -> int:
    """The cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


#: How long a scenario may hold its start slot (see :func:`_run_at_once`): a client that never starts a server
#: lets the next scenario start after this.
START_GATE_S = 15.0
#: Recording folders looked at for a server's first frame (a client could make many: the gate is only timing).
_GATE_FOLDERS = 16


DEFAULT_JOBS = default_jobs()


def jobs_from_args(args: argparse.Namespace) -> int:
    """--jobs, validated (exit 3 outside 1..MAX_JOBS or without --client-cmd); the default when not given."""
    jobs = getattr(args, "jobs", None)
    if jobs is None:
        return DEFAULT_JOBS
    if getattr(args, "client_cmd", None) is None:
        raise UsageError("--jobs plays an outside client's scenarios at once: it needs --client-cmd")
    if not 1 <= jobs <= MAX_JOBS:
        raise UsageError(f"--jobs must be in 1..{MAX_JOBS}, not {jobs}")
    return int(jobs)


def run_clients(
    spec: ClientSpec,
    scenarios: Sequence[Scenario],
    *,
    report_dir: ReportDir | None,
    progress: Callable[..., None] | None,
    jobs: int = 1,
    targets: Sequence[str] = (TARGET,),
    codex: tuple[Path, str] | None = None,
    started: Callable[[str, str], None] | None = None,
) -> list:
    """Every (scenario, target), target by target, each target's scenarios in the catalogue's order; ``jobs`` > 1:
    that many at once (:func:`_run_at_once`), where the machine confines process trees (else one at a time, said
    once). ``codex``: the real binary and its version (``real``)."""
    if jobs > 1 and len(scenarios) > 1 and not proctree.confinement().confined:
        # An unconfined tree is told by the harness's descendants and the run marker, which scenarios played at
        # once share: one scenario's sweep would name and kill another's processes.
        why = proctree.confinement().detail
        print(f"codex-harness run: --jobs {jobs}: scenarios run one at a time ({why})", file=sys.stderr)
        jobs = 1
    runs: list = []
    total = len(scenarios) * len(targets)
    for target in targets:
        own = replace(spec, target=target, codex=codex[0], version=codex[1]) if codex else replace(spec, target=target)
        if jobs > 1 and len(scenarios) > 1:
            runs += trio.run(_run_at_once, own, list(scenarios), report_dir, progress, jobs, started)
            continue
        for scenario in scenarios:
            if started is not None:
                started(scenario.name, target)
            save = report_dir.slot(target, scenario.name) if report_dir is not None else None
            run = run_outside_one(scenario, own, save_dir=save)
            runs.append(run)
            if progress is not None:
                progress(run, len(runs), total)
    return runs


async def _run_at_once(
    spec: ClientSpec,
    scenarios: list[Scenario],
    report_dir: ReportDir | None,
    progress: Callable[..., None] | None,
    jobs: int,
    started: Callable[[str, str], None] | None = None,
) -> list:
    """Up to ``jobs`` scenarios at once, each in a worker thread that plays it exactly as a sequential run does
    (its own trio loop, work directory, process tree, fake process and deadline). Progress lines come as
    scenarios end (numbered by how many ended); the runs keep the catalogue's order. The scenarios with the
    longest deadline start first: a client that hangs until its deadline then overlaps everything else
    instead of starting last and adding its wait to the end.

    Starts are staggered: at most :data:`DEFAULT_JOBS` scenarios (two per core) are starting (their client
    and their server's interpreter loading, the CPU-heavy part) until their first server has a frame on the
    wire, their client ended, or :data:`START_GATE_S` passed. Without it, many clients starting at once share
    the CPU so thinly that a client which starts in a second alone has not started its server by a short
    deadline; two per core starting is what every --jobs measurement held verdicts equal at."""
    runs: list = [None] * len(scenarios)
    limiter = trio.CapacityLimiter(jobs)
    starting = trio.Semaphore(min(jobs, DEFAULT_JOBS))
    played = trio.Event()
    ended = 0
    playing = 0  # scenarios whose worker thread is running
    # A fixed order, taken by ``jobs`` workers (trio does not promise the order tasks first run in).
    order = iter(sorted(range(len(scenarios)), key=lambda k: -_deadline(scenarios[k], spec)))

    async def play(k: int) -> None:
        scenario = scenarios[k]
        save = report_dir.slot(spec.target, scenario.name) if report_dir is not None else None
        with workdirs.work_dir(f"codex-harness-jobs-{scenario.name}-") as root:
            one = functools.partial(run_outside_one, scenario, spec, save_dir=save, work_root=root)
            await starting.acquire()
            if started is not None:
                started(scenario.name, spec.target)
            done = trio.Event()
            nonlocal playing
            async with trio.open_nursery() as nursery:
                nursery.start_soon(_end_start_when_serving, root, done, starting)
                playing += 1
                try:
                    runs[k] = await trio.to_thread.run_sync(one, limiter=limiter)
                finally:
                    playing -= 1
                    done.set()

    async def worker() -> None:
        nonlocal ended
        for k in order:
            await play(k)
            ended += 1
            if progress is not None:
                progress(runs[k], ended, len(scenarios))
        if ended == len(scenarios):
            played.set()

    async def end_clients_when_interrupted() -> None:
        # A worker thread cannot be cancelled: on Ctrl-C (or any error of a sibling) every open tree is killed so
        # that each running scenario ends now, as the sequential run's would, instead of at its deadline.
        # Killed again until every thread is back (bounded): a thread that was still setting its scenario up
        # starts its tree after the first kill, and would play it to its deadline.
        try:
            await played.wait()
        except trio.Cancelled:
            with trio.CancelScope(shield=True), trio.move_on_after(proctree.STOP_S):
                while True:
                    proctree.end_all()
                    if not playing:
                        break
                    await trio.sleep(0.05)
            raise

    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(end_clients_when_interrupted)
            for _ in range(min(jobs, len(scenarios))):
                nursery.start_soon(worker)
    except BaseExceptionGroup as group:  # what a scenario raised (a usage error, exit 3), or the interrupt
        raise _first(group) from None
    return runs


async def _end_start_when_serving(root: Path, done: trio.Event, starting: trio.Semaphore) -> None:
    """Hold the start slot until a server of the scenario under ``root`` has a frame on the wire (its client
    and its interpreter loaded), the scenario ended, or :data:`START_GATE_S`; then give it back."""
    try:
        with trio.move_on_after(START_GATE_S):
            while not done.is_set() and not _serving(root):
                await trio.sleep(0.05)
    finally:
        starting.release()


class StartGate:
    """The staggered starts of :func:`_run_at_once` for plays in threads of their own (``fuzz --client-cmd
    --jobs``): at most :data:`DEFAULT_JOBS` plays are starting until a server of theirs has a frame on the wire,
    their play ended, or :data:`START_GATE_S` passed."""

    def __init__(self, slots: int = DEFAULT_JOBS) -> None:
        self._slots = threading.Semaphore(max(1, slots))

    def play(self, prefix: str, one: Callable[[Path], T]) -> T:
        """``one(root)`` in a fresh work directory ``root``, once a start slot is free."""
        with workdirs.work_dir(prefix) as root:
            self._slots.acquire()
            done = threading.Event()

            def give_back() -> None:
                try:
                    ends = time.monotonic() + START_GATE_S
                    while not done.wait(0.05) and not _serving(root) and time.monotonic() < ends:
                        pass
                finally:
                    self._slots.release()

            threading.Thread(target=give_back, name="start-gate", daemon=True).start()
            try:
                return one(root)
            finally:
                done.set()


def _serving(root: Path) -> bool:
    """Whether a recording under ``root`` (``codex-harness-client-*/recording/N-PID/wire.jsonl``) holds a frame.
    Only ``lstat``: nothing the client could have planted there is followed or read."""
    try:
        with os.scandir(root) as works:
            recordings = [Path(w.path) / "recording" for w in works if w.is_dir(follow_symlinks=False)]
        for recording in recordings[:1]:
            with os.scandir(recording) as scan:
                folders = [Path(f.path) for _, f in zip(range(_GATE_FOLDERS), scan, strict=False)]
            for folder in folders:
                try:
                    if (folder / "wire.jsonl").lstat().st_size > 0:
                        return True
                except OSError:
                    continue  # not written yet, or not a server's folder
    except OSError:
        return False  # the recording folder is not there yet
    return False


def _first(group: BaseExceptionGroup) -> BaseException:
    """The exception the caller would have seen from a sequential run: an interrupt first, else the first."""
    leaves: list[BaseException] = []
    pending: list[BaseException] = [group]
    while pending:
        exc = pending.pop(0)
        if isinstance(exc, BaseExceptionGroup):
            pending[:0] = list(exc.exceptions)
        elif not isinstance(exc, trio.Cancelled):
            leaves.append(exc)
    interrupt = [e for e in leaves if isinstance(e, KeyboardInterrupt)]
    return (interrupt or leaves or [group])[0]


def _deadline(scenario: Scenario, spec: ClientSpec) -> float:
    return deadline_for(budgets.with_budgets(scenario, spec.budgets), spec.deadline_s)


#: Lines of a client's stderr said on the terminal when it exited non-zero or started no server.
STDERR_LINES = 10
_SCENARIOS_NAMED = 6


def client_exits(runs: list) -> list[str]:
    """Lines for the terminal: a client that exited non-zero (or was killed by a signal) or started no server,
    with the end of its stderr, once per distinct way it ended (a client that dies at import says it once, with
    the scenarios it did it in, not once per scenario)."""
    from codex_client.stderr import terminal_lines
    from contracts.checks.client_run import client_end

    groups: dict[tuple[str, tuple[str, ...]], list[str]] = {}
    for run in runs:
        facts = run.record.meta.get("outside") if run.record is not None else None
        if not isinstance(facts, dict) or facts.get("deadline_hit"):  # a hang is client / deadline's
            continue
        if facts.get("recording_cut"):  # the harness's recording failed (a full disk): runner / recording says so
            continue
        code, servers = facts.get("client_exit"), bool(facts.get("servers"))
        if servers and code in (0, None):
            continue
        ended = client_end({"client_exit": code}) or "ended"
        what = ended if servers else f"{ended} without starting a server"
        tail = tuple(terminal_lines(str(facts.get("stderr_tail") or ""), STDERR_LINES))
        groups.setdefault((what, tail), []).append(f"{run.scenario} [{run.target}]")
    out = []
    for (what, tail), where in groups.items():
        named = ", ".join(where[:_SCENARIOS_NAMED]) + (
            f" (+{len(where) - _SCENARIOS_NAMED} more)" if len(where) > _SCENARIOS_NAMED else ""
        )
        out.append(f"codex-harness run: the client {what} in {len(where)} scenario run(s): {named}")
        out += [f"  stderr: {line}" for line in tail] or ["  (its stderr was empty)"]
    return out


def describe(runs: list) -> None:
    """What the harness killed, and what it would not copy into the report, per scenario, on stderr (the
    record keeps both too); a client that exited non-zero or started no server, with its stderr's end."""
    for line in client_exits(runs):
        print(line, file=sys.stderr)
    for run in runs:
        facts = run.record.meta.get("outside", {}) if run.record is not None else {}
        if facts.get("killed"):
            why = "at its deadline" if facts.get("deadline_hit") else "after the client exited"
            print(f"{run.scenario}: killed {why}: {', '.join(facts['killed'])}", file=sys.stderr)
        refused = run.record.not_copied if run.record is not None else []
        if refused:
            more = f" (and {len(refused) - 3} more, in record.json)" if len(refused) > 3 else ""
            print(f"{run.scenario}: not copied into the report: {'; '.join(refused[:3])}{more}", file=sys.stderr)
