"""Play one scenario against an outside client and judge what the fake saw.

The client runs in a process tree of its own (:mod:`codex_sandbox.proctree`: a PID namespace, else a cgroup, else
its session, the run marker and the harness's descendants) with ``CODEX_BIN`` = the shim (also first on
``PATH``), ``FAKE_CODEX_SCENARIO`` (absolute), ``CODEX_HARNESS_PLAN``, ``CODEX_HARNESS_RESULT`` and the run
marker. It gets the run deadline (harness.budgets.run_deadline_s, the formula of docs/clients.md; or ``deadline_s``),
under the budgets it declares (:mod:`harness.budgets`); past that, or once it exited and a teardown budget of
grace passed, everything still alive in its tree is named and SIGKILLed.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
import traceback
from collections import deque
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import orjson
import trio

from codex_client.process import run_marker
from codex_sandbox import confine, interrupts, proctree, workdirs
from codex_sandbox.proctree import procfs
from contracts import safe_read
from contracts.checks import Check, client_plan, registry, run_all
from contracts.checks import client_run as client_contract
from contracts.checks.wire_index import WireIndex
from contracts.exitcodes import UsageError, reraise_interrupt
from contracts.record import SessionRecord
from contracts.safe_dir import Slot
from contracts.scenario import Scenario
from contracts.scenario_file import dump
from contracts.text import escape
from fake_server.profiles import switches_of
from fake_server.recording import RECORD_ENV, play_identity
from harness.budgets import scenario_deadline_s, with_budgets
from harness.outside.plan import adapter_plan, budgets
from harness.outside.record import (
    cut_recordings,
    disk_free,
    not_cut,
    read_recordings,
    server_facts,
    server_record,
    session_record,
)
from harness.outside.relay import RELAY_ENV
from harness.outside.result import read_result, turn_results
from harness.outside.shim import DEFAULT_PROFILE, SHIM_STARTS, read_starts, write_shim
from harness.targets.real import home_config, write_mock_config

TARGET = "fake-process"
REAL = "real"
#: The targets an outside client runs on.
TARGETS = (TARGET, REAL)
PLAN_ENV = "CODEX_HARNESS_PLAN"
RESULT_ENV = "CODEX_HARNESS_RESULT"
#: What is kept of the client's stdout and stderr each: the end of it (a test runner's summary comes last).
TAIL_BYTES = 1024 * 1024
#: How long the stdout/stderr drains may outlive the client (a leaked helper can hold the pipes).
DRAIN_AFTER_EXIT_S = 0.3
_POLL_S = 0.02
#: What is left when the kernel says the tree is not empty but a scan of /proc names nobody.
UNNAMED = "processes of the client's tree that change pid faster than /proc can be read"
#: Wire contracts run per server; the result-file ones once, on every server's wire together.
PER_SERVER = ("trace_closure", "schema", "protocol")
RESULT_CONTRACTS = ("terminal_status", "usage")
#: Below this many free bytes the disk of the run counts as full: a result file or a recording it cut is the
#: disk's doing, never the client's.
DISK_FULL_BYTES = 1024 * 1024
#: What stays judged when a recording is incomplete: what the harness saw itself and the client's result file.
_WIRE_FREE = {
    (client_contract.NAME, client_contract.DEADLINE),
    (client_contract.NAME, client_contract.NOTHING_LEFT_RUNNING),
    (client_contract.NAME, client_contract.RESULT_FILE),
    (client_contract.NAME, client_contract.RECORDING),  # a recording the client forged stays its failure
}


class ClientCannotStart(UsageError):
    """The client command is empty, not found or not executable (exit 3)."""


@dataclass(slots=True)
class ClientSpec:
    argv: list[str]
    deadline_s: float | None = None
    #: the release profile the shim answers and the fake plays; None: the scenario's ``release``, else the default
    profile: str | None = None
    #: the budgets the client declares (harness.budgets: plan names → ms); they replace the scenario's
    budgets: dict[str, int] = field(default_factory=dict)
    #: ``fake-process`` (the shim runs fake-codex) or ``real`` (the shim runs ``codex``, sealed, behind a relay)
    target: str = TARGET
    #: the real binary and its version (``real``: :func:`harness.targets.real_adapter.preflight` found them)
    codex: Path | None = None
    version: str | None = None


@dataclass(slots=True)
class ClientRun:
    """What happened to the client process."""

    started_at: float = 0.0  # time.monotonic() of the start
    ended_t: float | None = None  # seconds after the start
    exit_code: int | None = None
    deadline_hit: bool = False
    killed: list[str] = field(default_factory=list)
    killed_pids: set[int] = field(default_factory=set)
    #: what was killed whose environment is a server's (the shim's recording folder), by pid as the client's tree
    #: numbers it: a server, or a process a server started; never a helper of the client
    of_servers: dict[int, str] = field(default_factory=dict)
    left_running: list[str] = field(default_factory=list)
    stdout_tail: str = ""
    stderr_tail: str = ""
    #: how the client's tree was confined (codex_sandbox.proctree), or "not confined: why"
    confinement: str = ""
    #: processes of the client's tree that ran the real binary (or an app-server) outside the relay it was given
    bypassed: list[str] = field(default_factory=list)
    #: processes of the client's tree that ran a ``codex`` other than the shim (:class:`BypassWatch`)
    codex_not_shim: list[str] = field(default_factory=list)
    #: what was killed that is a server itself on the real target (its relay, the launcher, the binary), by the
    #: tree's pid: not something a server started
    server_parts: set[int] = field(default_factory=set)


def check_command(argv: list[str]) -> None:
    """Raise :class:`ClientCannotStart` unless ``argv[0]`` is something we can exec."""
    if not argv:
        raise ClientCannotStart("--client-cmd is empty")
    program = argv[0]
    found = shutil.which(program) if os.sep not in program else (program if os.access(program, os.X_OK) else None)
    if found is None or Path(found).is_dir():
        raise ClientCannotStart(f"--client-cmd: cannot start {program!r}: not found or not executable")


def deadline_for(scenario: Scenario, override: float | None) -> float:
    """``--client-deadline``, else what a client that keeps the scenario's budgets may take (harness.budgets)."""
    if override is not None:
        return override
    return scenario_deadline_s(scenario)


class _Tail:
    """The last :data:`TAIL_BYTES` of a stream (at most one read more held), and how much came before."""

    def __init__(self) -> None:
        self.chunks: deque[bytes] = deque()
        self.size = 0
        self.total = 0

    def add(self, data: bytes) -> None:
        self.chunks.append(data)
        self.size += len(data)
        self.total += len(data)
        while self.size - len(self.chunks[0]) >= TAIL_BYTES:
            self.size -= len(self.chunks.popleft())

    def text(self) -> str:
        # Escaped (contracts.text): the client's bytes reach client-*.txt and any check quoting them inert.
        kept = b"".join(self.chunks)[-TAIL_BYTES:]
        cut = self.total - len(kept)
        head = f"[codex-harness: {cut} earlier bytes not kept; the last {len(kept)} follow]\n" if cut else ""
        return head + escape(kept.decode("utf-8", "replace"), keep_newlines=True)


async def _drain(stream: Any, tail: _Tail, done: list[int]) -> None:
    try:
        while data := await stream.receive_some(65536):
            tail.add(data)
    except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
        pass
    finally:
        done.append(1)


def _client_env(shim: Path, scenario_file: Path, plan: Path, result: Path, marker: str, home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CODEX_HARNESS_", "FAKE_CODEX_"))}
    env.update(
        {
            "CODEX_BIN": str(shim),
            "PATH": f"{shim.parent}{os.pathsep}{env.get('PATH', '')}",
            "FAKE_CODEX_SCENARIO": str(scenario_file),
            PLAN_ENV: str(plan),
            RESULT_ENV: str(result),
            procfs.MARKER_ENV: marker,
            "CODEX_HOME": str(home),
        }
    )
    return env


async def _run_client(
    argv: list[str],
    env: dict[str, str],
    cwd: Path,
    deadline_s: float,
    grace_s: float,
    server_env: str | None = None,
    watch: BypassWatch | None = None,
) -> ClientRun:
    out = ClientRun()
    stdout, stderr = _Tail(), _Tail()
    out.started_at = time.monotonic()
    started = False
    try:
        async with (
            proctree.open_tree(
                argv,
                env=env,
                cwd=cwd,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                marker=env[procfs.MARKER_ENV],
            ) as tree,
            trio.open_nursery() as nursery,
        ):
            started = True
            out.confinement = tree.confinement.detail
            drained: list[int] = []
            nursery.start_soon(_drain, tree.stdout, stdout, drained)
            nursery.start_soon(_drain, tree.stderr, stderr, drained)
            if watch is not None:
                nursery.start_soon(watch.run, tree, out)
            await _watch(tree, out, deadline_s, grace_s, server_env, watch)
            with trio.move_on_after(DRAIN_AFTER_EXIT_S):
                while len(drained) < 2:
                    await trio.sleep(_POLL_S)
            nursery.cancel_scope.cancel()
    except OSError as exc:
        if started:
            raise
        # The command itself: the harness checked it could be executed, but it changed since.
        raise ClientCannotStart(f"--client-cmd: cannot start {argv[0]!r}: {exc.strerror or exc}") from None
    out.stdout_tail, out.stderr_tail = stdout.text(), stderr.text()
    return out


async def _watch(
    tree: proctree.ProcessTree,
    out: ClientRun,
    deadline_s: float,
    grace_s: float,
    server_env: str | None,
    watch: BypassWatch | None = None,
) -> None:
    """Until the client exits or its deadline; then, after a grace, what it left running (named and killed)."""
    with trio.move_on_after(deadline_s) as limit:
        out.exit_code = await tree.wait()
    out.deadline_hit = limit.cancelled_caught
    out.ended_t = time.monotonic() - out.started_at
    if out.deadline_hit:
        out.exit_code = None
        _kill(tree, out, server_env, watch)
        return
    # Grace: a server the client closed may still be finishing its shutdown.
    with trio.move_on_after(grace_s):
        while not tree.empty():
            await trio.sleep(_POLL_S)
    if not tree.empty():
        out.left_running = _kill(tree, out, server_env, watch)


def _kill(
    tree: proctree.ProcessTree, out: ClientRun, server_env: str | None = None, watch: BypassWatch | None = None
) -> list[str]:
    """Name what is alive in the tree, note which of it runs with a server's environment (``server_env``, the
    ``NAME=value`` the shim exports), kill all of it; the names."""
    members = tree.members()
    if server_env is not None:
        out.of_servers = {m.inner: m.described for m in members if _environment_has(m.pid, server_env)}
        if watch is not None:
            out.server_parts = {m.inner for m in members if m.inner in out.of_servers and watch.server_part(m.pid)}
    tree.kill()
    out.killed_pids = {m.inner for m in members}
    out.killed = [m.described for m in members] or [UNNAMED]
    return out.killed


def _environment_has(pid: int, entry: str) -> bool:
    """Whether ``pid``'s environment holds ``entry`` (``NAME=value``) as the process started (``/proc``; the kernel
    bounds its size). A process gone or unreadable: no."""
    try:
        data = (Path("/proc") / str(pid) / "environ").read_bytes()
    except OSError:
        return False
    return entry.encode("utf-8", "surrogateescape") in data.split(b"\0")


#: How far up a process's parents are followed (a relayed server's helpers are a few levels below its relay).
_MAX_ANCESTORS = 32


def _ancestors(pid: int) -> list[int] | None:
    """``pid``'s parents, nearest first, up to :data:`_MAX_ANCESTORS` (``/proc/PID/stat``), or None when a link of
    the chain could not be read (``pid`` or a parent ended while it was walked: the chain is not known)."""
    out: list[int] = []
    while len(out) < _MAX_ANCESTORS:
        try:
            stat = Path(f"/proc/{pid}/stat").read_bytes()
            pid = int(stat[stat.rindex(b")") + 2 :].split()[1])  # after the name (which may hold spaces): state, ppid
        except (OSError, ValueError, IndexError):
            return None
        if pid <= 1:
            break
        out.append(pid)
    return out


def run_client(
    argv: list[str],
    env: dict[str, str],
    cwd: Path,
    deadline_s: float,
    grace_s: float,
    server_env: str | None = None,
    watch: BypassWatch | None = None,
) -> ClientRun:
    """Run the client to its end or deadline in a tree of its own (:mod:`codex_sandbox.proctree`): nothing it
    started survives it. ``server_env``: the ``NAME=value`` every server (and what it starts) inherits from the
    shim, so what a server started is told from the client's own helpers. ``watch``: looks for a server started
    around the shim while the client runs."""
    return trio.run(_run_client, argv, env, cwd, deadline_s, grace_s, server_env, watch)


#: How often the client's tree is looked at for a server it started around the shim, and how many are named.
BYPASS_POLL_S = 0.1
MAX_BYPASSED = 5
_CMDLINE_BYTES = 4096
#: What a ``codex`` is called, as a program or the script an interpreter runs (the npm launcher is ``codex.js``;
#: its native binary ``codex``). Only the program and its first argument are looked at: ``--codex-bin codex``
#: further on names a path, it does not run one.
CODEX_NAMES = frozenset({"codex", "codex.js", "codex.exe"})


@dataclass(slots=True)
class BypassWatch:
    """Finds processes of the client's tree that run a ``codex`` other than the shim it was given (a client that
    resolves its own bundled ``@openai/codex``), and among them servers started around it: the real binary's
    install tree (``install_tree``, the real target) or an ``app-server`` of a ``codex``. What carries a server's
    environment entry (``relay_entry``: the shim exports it), or descends from a process that does, is behind the
    shim. Sampled every :data:`BYPASS_POLL_S` (a process that lives less long can slip by; a server is then not
    recorded either, and ``server started`` fails on that)."""

    install_tree: str | None
    relay_entry: str
    shim: str
    #: (pid, command line) already looked at: a process is looked at again once it executed something else
    seen: set[tuple[int, bytes]] = field(default_factory=set)

    async def run(self, tree: proctree.ProcessTree, out: ClientRun) -> None:
        while len(out.bypassed) < MAX_BYPASSED or len(out.codex_not_shim) < MAX_BYPASSED:
            for member in tree.members():
                kind = self.classify(member.pid)
                if kind is None:
                    continue
                codex, server = kind
                if server and member.described not in out.bypassed and len(out.bypassed) < MAX_BYPASSED:
                    out.bypassed.append(member.described)
                if codex and member.described not in out.codex_not_shim and len(out.codex_not_shim) < MAX_BYPASSED:
                    out.codex_not_shim.append(member.described)
            await trio.sleep(BYPASS_POLL_S)

    def server_part(self, pid: int) -> bool:
        """Whether ``pid`` is a relayed server itself: the relay, the confining launcher, the binary (its install
        tree); what the binary started (a command's shell) is not."""
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as fh:
                words = [w.decode("utf-8", "surrogateescape") for w in fh.read(_CMDLINE_BYTES).split(b"\0") if w]
            exe = os.readlink(f"/proc/{pid}/exe")
        except OSError:
            return False
        if any(w in ("harness.outside.relay", "harness.outside.real_relay", str(confine.INIT)) for w in words):
            return True
        if os.path.basename(exe) in confine.MECHANISMS:
            return True
        if self.install_tree is None:
            return False
        inside = [exe, *(os.path.realpath(w) for w in words if os.sep in w)]
        return any(p == self.install_tree or p.startswith(self.install_tree + os.sep) for p in inside)

    def bypasses(self, pid: int) -> bool:
        """Whether ``pid`` is a server started around the shim (looked at once per command line)."""
        kind = self.classify(pid)
        return kind is not None and kind[1]

    def classify(self, pid: int) -> tuple[bool, bool] | None:
        """(runs a ``codex`` that is not the shim, is a server started around the shim), or None when ``pid`` was
        looked at already, is gone, or is the shim's."""
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as fh:
                raw = fh.read(_CMDLINE_BYTES)
            exe = os.readlink(f"/proc/{pid}/exe")
        except OSError:
            return None
        if (pid, raw) in self.seen:
            return None
        self.seen.add((pid, raw))
        words = [a.decode("utf-8", "surrogateescape") for a in raw.split(b"\0") if a]
        shim = os.path.realpath(self.shim)
        if any(w == self.shim or (os.sep in w and os.path.realpath(w) == shim) for w in words):
            return None
        if _environment_has(pid, self.relay_entry):
            return None
        tree = self.install_tree
        inside = [exe, *(os.path.realpath(w) for w in words if os.sep in w)]
        runs_binary = tree is not None and any(p == tree or p.startswith(tree + os.sep) for p in inside)
        named = any(os.path.basename(w) in CODEX_NAMES for w in [exe, *words[:2]])
        server = runs_binary or ("app-server" in words and (named or tree is not None))
        if not (runs_binary or named or server):
            return None
        # Started by a server behind the shim (the binary's own sandbox helper runs the binary again, its
        # environment cleared): behind the relay, not around it.
        chain = _ancestors(pid)
        if chain is not None and any(_environment_has(p, self.relay_entry) for p in chain):
            return None
        if chain is None or _ancestors(pid) != chain:
            # It or a parent ended while looked at (the binary's short-lived sandbox stages under a workspace-write
            # sandbox, on a loaded machine): whose it is is unknown, so it is looked at again at the next sample,
            # where a process still alive shows its parent (or the reaper that adopted it). A server around the
            # shim lives on and is named then; one that ends within a sample can slip by, as the sampling lets it.
            self.seen.discard((pid, raw))
            return None
        return runs_binary or named, server


def _skips(record: SessionRecord, contract: str, reason: str, *, applies: bool = True) -> Check:
    level, citation = registry.level_and_citation(contract, registry.OUTSIDE_CLIENT)
    name = registry.OUTSIDE_CLIENT
    return Check(record.scenario, record.target, contract, name, "skip", reason, citation, (), level, applies)


def not_judged_outside(checks: list[Check]) -> list[Check]:
    """What our own client's contracts ask that is not an outside client's to answer (the registry says which,
    and why: :attr:`contracts.checks.registry.Rule.outside`): a skip with the reason, that ``--strict`` does
    not count."""
    out = []
    for check in checks:
        contract = registry.get(check.contract)
        why = contract.not_judged_outside(check.name) if contract is not None else None
        out.append(check if why is None else replace(check, status="skip", detail=why, at=(), applies=False))
    return out


def _never_started(record: SessionRecord, facts: dict[str, Any], unsupported: set[int]) -> int | None:
    """The first turn reported ``unsupported`` that did not start (the plan's turns matched to the run's in order,
    as ``plan followed`` matches them: contracts.checks.client_plan.started_turns), or None. The fake plays the
    scenario's turns in the order they start, so every later turn got an earlier turn's script: their truth
    (status, usage) no longer holds."""
    started = client_plan.started_turns([record])
    return min((n for n in unsupported if n not in started), default=None)


def _answered_turn_id(request: Any) -> str | None:
    answer = request.answers[0][2] if request.answers else {}
    result = answer.get("result") if isinstance(answer, dict) else None
    turn = result.get("turn") if isinstance(result, dict) else None
    turn_id = turn.get("id") if isinstance(turn, dict) else None
    return turn_id if isinstance(turn_id, str) else None


def _unsupported(checks: list[Check], facts: dict[str, Any], record: SessionRecord | None = None) -> list[Check]:
    """Turns the client reported ``unsupported`` are not judged on their status: a skip with its reason (their
    usage is judged where reported: the usage contract reads each Result's ``usage_unjudged``). When such a turn
    never reached the server (``record``: the one server's), the turns after it are not judged at all: the fake
    played them with the scripts of the turns before."""
    why = {
        int(t["turn"]): t.get("error") or "the client cannot do what the plan asks"
        for t in (facts.get("result") or {}).get("turns", [])
        if t.get("status") == "unsupported"
    }
    shifted: dict[int, str] = {}
    skipped = _never_started(record, facts, set(why)) if record is not None and why else None
    if skipped is not None:
        reason = f"turn {skipped} was reported unsupported and never started: the fake played the scenario's turns"
        reason += " in the order they started, so this turn got another's script and its truth does not hold"
        numbers = {int(t["turn"]) for t in (facts.get("result") or {}).get("turns", [])}
        shifted = {n: reason for n in numbers if n > skipped and n not in why}
    out = []
    for check in checks:
        turn = next((n for n in why if check.name.startswith(f"turn {n} ")), None)
        moved = next((n for n in shifted if check.name.startswith(f"turn {n} ")), None)
        if moved is not None:
            out.append(replace(check, status="skip", detail=f"not judged: {shifted[moved]}"))
        elif check.contract != "terminal_status" or turn is None or not check.applies:
            out.append(check)
        else:
            out.append(replace(check, status="skip", detail=f"reported unsupported: {why[turn]}"))
    return out


def judge(records: list[SessionRecord]) -> list[Check]:
    """Every check of an outside run: per server the wire contracts, once the session and result checks."""
    checks: list[Check] = []
    primary = records[0]
    facts = primary.meta["outside"]
    many = len(records) > 1
    result_state = (facts.get("result") or {}).get("state", "absent")
    if result_state == "valid":
        # The result file reports the run: judged against every server's wire together (record.session_record).
        judged = not_judged_outside(run_all(session_record(records), RESULT_CONTRACTS))
        checks += _unsupported(judged, facts, None if many else primary)
    else:
        why = {"absent": "no result file", "invalid": "the result file is invalid"}.get(
            result_state, "the result file could not be judged"
        )
        checks += [_skips(primary, c, f"{why}: reported statuses and usage are not judged") for c in RESULT_CONTRACTS]
    latency = registry.get("latency")
    checks.append(_skips(primary, "latency", str(latency.outside if latency else "not judged"), applies=False))
    forged = facts.get("recording_problems")
    if forged:
        detail = "a recording fake-codex did not write (the client's?): " + "; ".join(forged)
        checks.append(client_contract.CONTRACT.maker(primary)(client_contract.RECORDING, "fail", detail[:2000]))
    for k, record in enumerate(records):
        own = not_judged_outside(run_all(record, PER_SERVER))
        if many and k == 0:
            # What the client reported of the run is judged against every server's wire; each server's own
            # ending against its own.
            own += client_contract.session_checks(session_record(records), facts)
            own += client_contract.server_checks(record, facts)
        else:
            own += client_contract.check(record)
        if many and record.meta["outside"].get("server"):
            n = record.meta["outside"]["server"]["n"]
            own = [
                c
                if (c.contract == client_contract.NAME and k == 0 and c.name in _SESSION)
                else replace(c, name=f"server {n}: {c.name}")
                for c in own
            ]
        checks += own
    if facts.get("primary", True):
        checks.append(client_plan.check(records))
    return _no_server(_with_recording_problems(primary, _all_unsupported(checks, facts), facts), facts)


#: What stays judged of a client that started no server: what it did as a process.
_PROCESS_CHECKS = {
    (client_contract.NAME, client_contract.SERVER_STARTED),
    (client_contract.NAME, client_contract.DEADLINE),
    (client_contract.NAME, client_contract.NOTHING_LEFT_RUNNING),
    (client_contract.NAME, client_contract.SERVERS_DESCENDANTS_ENDED),
    (client_contract.NAME, client_contract.RESULT_FILE),
    (client_contract.NAME, client_contract.RECORDING),
    # what it claims in a result file stays its claim: a turn reported completed that never started still fails
    (client_contract.NAME, client_contract.REPORTED_STATUSES_AGREE),
}


def _no_server(checks: list[Check], facts: dict[str, Any]) -> list[Check]:
    """A client that started no server (a crash at import, a ``codex`` of its own) is one finding: ``server
    started`` names how it ended, its stderr's last lines and the ``codex`` it ran instead. What it was to do on
    a server (the plan, the wire's contracts, its exit status) is not judged: a skip naming that finding, never a
    pass on an empty wire nor a second failure of the same cause. A result file it wrote is still judged: what it
    claims there is a claim of its own."""
    if facts.get("servers") or any(c.contract == "runner" and c.status == "fail" for c in checks):
        return checks  # a server recorded, or the harness's own recording failed (that failure is the finding)
    server_started = (client_contract.NAME, client_contract.SERVER_STARTED)
    started = next((c for c in checks if (c.contract, c.name) == server_started), None)
    if started is not None and started.status == "fail":
        why = "not judged: the client never started a server (client / server started)"
        kept = _PROCESS_CHECKS | {(c.contract, c.name) for c in checks if c.contract in RESULT_CONTRACTS}
    elif started is not None and started.status == "skip" and client_contract.UNRECORDED in started.detail:
        # It started a server the harness did not see: neither the wire nor the turns it reports can be judged.
        why = "not judged: the client's server was never recorded (client / server started)"
        kept = _PROCESS_CHECKS - {(client_contract.NAME, client_contract.REPORTED_STATUSES_AGREE)}
    else:
        return checks
    return [
        c
        if (c.contract, c.name) in kept or c.contract == "runner"
        else replace(c, status="skip", detail=why, at=(), applies=False)
        for c in checks
    ]


def _all_unsupported(checks: list[Check], facts: dict[str, Any]) -> list[Check]:
    """A client that reported every turn of the plan ``unsupported`` played nothing of the scenario: what passed
    says nothing of it (a skip, so a run of such scenarios is NOTHING JUDGED); what failed still fails, but for
    not starting a server."""
    turns = client_plan.plan_numbers(facts)
    if not turns or not turns <= client_plan.unsupported_turns(facts):
        return checks
    why = "not judged: the client reported every turn of the plan unsupported"
    # Nothing to play needs no server either; what it did and got wrong (a leak, an invalid frame) still fails.
    moot = {(client_contract.NAME, client_contract.SERVER_STARTED)}
    return [
        replace(c, status="skip", detail=why) if c.status == "pass" or (c.contract, c.name) in moot else c
        for c in checks
    ]


def _with_recording_problems(primary: SessionRecord, checks: list[Check], facts: dict[str, Any]) -> list[Check]:
    """A recording the disk (or anything but the client) cut is the harness's failure, named as such: what the
    server saw is not judged, so no check blames the client for frames that were never written down."""
    problems = [str(p) for p in facts.get("recording_cut") or []]
    if not problems:
        return checks
    free, disk = facts.get("disk_free"), facts.get("disk")
    where = f"; {free} bytes free on the disk holding {disk}" if isinstance(free, int) else ""
    detail = "; ".join(problems[:3]) + (f" (+{len(problems) - 3} more)" if len(problems) > 3 else "") + where
    why = "not judged: the recording of what the server saw is incomplete (runner / recording)"
    out = [Check(primary.scenario, primary.target, "runner", "recording", "fail", detail, "")]
    for check in checks:
        kept = check.contract in (*RESULT_CONTRACTS, "latency") or (check.contract, check.name) in _WIRE_FREE
        if kept:
            out.append(check)
        else:
            out.append(replace(check, status="skip", detail=why))
    return out


_SESSION = (
    client_contract.SERVER_STARTED,
    client_contract.DEADLINE,
    client_contract.NOTHING_LEFT_RUNNING,
    client_contract.RESULT_FILE,
    client_contract.REPORTED_STATUSES_AGREE,
)


def build_records(
    scenario: Scenario,
    record_dir: Path,
    client: ClientRun,
    facts: dict[str, Any],
    result_path: Path,
    *,
    work_fd: int | None = None,
    target: str = TARGET,
) -> list[SessionRecord]:
    """``work_fd``: the work directory, held since before the client ran: the recordings and the result file are
    read from it, nothing the client could plant in it followed."""
    problems: list[str] = []
    servers = read_recordings(record_dir, parent_fd=work_fd, problems=problems)
    # A folder the disk cut (its recorder said so) is the disk's doing: runner / recording names it, and the
    # folder is not counted as one the client forged.
    cut, cut_folders = cut_recordings(record_dir)
    problems = not_cut(problems, cut_folders)
    if problems:  # named from the work directory, which is gone after the run
        facts["recording_problems"] = [p.replace(f"{record_dir.parent}/", "") for p in problems[:20]]
    zero = client.started_at
    read = read_result(result_path, parent_fd=work_fd)
    free = disk_free(result_path.parent)
    full = (free is not None and free < DISK_FULL_BYTES) or any("(ENOSPC)" in p or "(EDQUOT)" in p for p in cut)
    result = {"state": read.state, "problems": read.problems, "turns": read.turns, "client": read.client}
    if read.state == "invalid" and full:
        # A file cut by the full disk says nothing of the client (it may have written it whole).
        result = {"state": "not judged", "problems": [f"the disk holding it is full ({free} bytes free)"]}
    disk = str(result_path.parent.parent)  # the run's folders live in one temporary folder: name that
    facts.update(
        {
            "deadline_hit": client.deadline_hit,
            "client_exit": client.exit_code,
            "client_ended_t": client.ended_t,
            "killed": client.killed,
            "left_running": client.left_running,
            # what of it a server started itself (its environment is the shim's, and it is no server)
            "left_by_servers": _left_by_servers(client, servers),
            "confinement": client.confinement,
            "bypassed": client.bypassed,
            "codex_not_shim": client.codex_not_shim,
            # each start of the shim, --version included (harness.outside.shim.SHIM_STARTS)
            "shim_starts": read_starts(work_fd, record_dir.parent),
            "servers": [server_facts(s, zero, s.pid in client.killed_pids) for s in servers],
            "result": result,
            "recording_cut": cut,
            "disk_free": free,
            "disk": disk,
            "stdout_tail": client.stdout_tail,
            "stderr_tail": client.stderr_tail,
        }
    )
    records = []
    for k, server in enumerate(servers or [None]):
        own = dict(facts, primary=k == 0, server=facts["servers"][k] if servers else None)
        if k > 0:
            own = {key: v for key, v in own.items() if key not in ("stdout_tail", "stderr_tail", "result")}
        record = server_record(scenario, server, zero=zero, facts=own, target=target)
        if server is not None:
            record.model = [replace(e, t=round(e.t - zero, 6)) for e in server.model]
        records.append(record)
    if result["state"] == "valid":
        records[0].results = turn_results(read)
        # What the server sent for each turn is a wire fact, not the client's report.
        wire_turns = client_contract.wire_turns(WireIndex.build(session_record(records).wire))
        for turn_result in records[0].results:
            turn = wire_turns[turn_result.index] if turn_result.index < len(wire_turns) else None
            turn_result.server_status = turn["status"] if turn else None
    return records


def _left_by_servers(client: ClientRun, servers: list[Any]) -> list[str]:
    """The names among ``client.left_running`` of processes a server started (not the servers themselves)."""
    if not client.left_running or not client.of_servers:
        return []
    server_pids = {s.pid for s in servers}  # as the tree numbers them (start.json's pid is the server's own)
    left = set(client.left_running)
    own = server_pids | client.server_parts  # a relayed server is its relay, its launcher and the binary
    return [name for pid, name in client.of_servers.items() if pid not in own and name in left]


@dataclass(slots=True)
class OutsideRun:
    records: list[SessionRecord]
    checks: list[Check]
    record_dir: Path


def play_outside(scenario: Scenario, spec: ClientSpec, work_dir: Path, work_fd: int | None = None) -> OutsideRun:
    """Run the client on ``scenario`` in ``work_dir`` (kept: the recordings live there) and judge it.

    ``work_fd``: ``work_dir`` held since before the client ran (:func:`build_records`)."""
    work_dir.mkdir(parents=True, exist_ok=True)
    scenario = with_budgets(scenario, spec.budgets)  # what the client declares is what it is judged by
    if scenario.source and Path(scenario.source).is_file():
        scenario_file = Path(scenario.source).resolve()
    else:
        scenario_file = dump(scenario, work_dir / f"{scenario.name}.toml").resolve()
    record_dir = work_dir / "recording"
    plan_path = work_dir / "plan.json"
    result_path = work_dir / "result.json"
    plan = adapter_plan(scenario)
    plan_path.write_bytes(orjson.dumps(plan, option=orjson.OPT_INDENT_2))
    marker = run_marker()
    starts = work_dir / SHIM_STARTS
    if spec.target == REAL:
        shim, profile, watch = _real_shim(spec, work_dir, scenario, scenario_file, record_dir, marker)
        server_env = f"{RELAY_ENV}={record_dir}"
    else:
        profile = spec.profile or scenario.release or DEFAULT_PROFILE
        shim = write_shim(
            work_dir / "bin",
            scenario_file=scenario_file,
            record_dir=record_dir,
            marker=marker,
            profile=profile,
            starts=starts,
        )
        server_env = f"{RECORD_ENV}={record_dir}"
        # A codex the client ran that is not the shim (its own bundled one) is named, and a server of it fails.
        watch = BypassWatch(None, server_env, str(shim))
    home = work_dir / "codex-home"
    home.mkdir(exist_ok=True)
    write_mock_config(home, home_config(scenario))  # as the real target's home: the fake answers from it
    env = _client_env(shim, scenario_file, plan_path, result_path, marker, home)
    deadline = deadline_for(scenario, spec.deadline_s)
    grace = scenario.client.teardown_ms / 1000 + client_contract.SLACK_S
    # The client runs where the user runs the harness: its command line is relative to that.
    # The shim exports the recording folder to every server it starts: their processes are told by it.
    client = run_client(spec.argv, env, Path.cwd(), deadline, grace, server_env=server_env, watch=watch)
    expected_play: dict[str, str] = play_identity(scenario, profile)
    if spec.target == REAL:  # the binary's arguments reach it: one that leaves the mock changes the play
        from harness.targets.real import PROVIDER_ID

        expected_play["model_provider"] = PROVIDER_ID
    facts: dict[str, Any] = {
        "client_cmd": list(spec.argv),
        "deadline_s": deadline,
        "expected_play": expected_play,
        "profile": profile,
        "plan_turns": plan["turns"],
        "plan": {k: plan[k] for k in ("approvals", "experimental_api", "opt_out_notifications")},
        "budgets": budgets(scenario.client),
        "declared_budgets": dict(spec.budgets),
    }
    # [expect.release."X"]: the truth of the release played.
    records = build_records(
        replace(scenario, expect=scenario.expect.for_release(profile, switches_of(profile))),
        record_dir,
        client,
        facts,
        result_path,
        work_fd=work_fd,
        target=spec.target,
    )
    return OutsideRun(records, judge(records), record_dir)


def _real_shim(
    spec: ClientSpec, work_dir: Path, scenario: Scenario, scenario_file: Path, record_dir: Path, marker: str
) -> tuple[Path, str, BypassWatch]:
    """The ``codex`` of a client on the real binary (:mod:`harness.outside.real_relay`), the release it plays (the
    binary's own), and the watch for a server started around it."""
    from harness.outside.real_relay import write_real_shim

    if spec.codex is None or spec.version is None:
        raise UsageError("--target real needs --codex PATH (or $CODEX_BIN)")
    from harness.targets.real import RealTargetError, shared_run

    launcher = confine.current()
    scratch = work_dir / "real-runs"
    scratch.mkdir(exist_ok=True)
    # One run directory and one turn count for every server of the run: a client that starts a server per turn
    # resumes its thread from the run's CODEX_HOME and gets turn N of the scenario on the run's N-th turn.
    try:
        shared: str | None = str(shared_run(scratch / "run", scenario).root)
    except RealTargetError:  # each relay says why the binary cannot run this scenario, as it starts
        shared = None
    relay_spec = {
        "scenario_file": str(scenario_file),
        "record_dir": str(record_dir),
        "codex": str(spec.codex),
        "version": spec.version,
        "confinement": launcher.mechanism,
        "tool": launcher.tool,
        "scratch": str(scratch),
        "shared_run": shared,
        "turns": str(scratch / "turns"),
        "marker": marker,
    }
    shim = write_real_shim(work_dir / "bin", relay_spec, f"codex-cli {spec.version}", work_dir / SHIM_STARTS)
    install = confine.install_tree(str(spec.codex))  # the npm install: its launcher script and the native binary
    return shim, spec.version, BypassWatch(install, f"{RELAY_ENV}={record_dir}", str(shim))


def save_outside(run: OutsideRun, save_dir: Path | Slot, work_fd: int) -> Path:
    """The primary record, plus the recordings, the plan, the result file and the client's output tails.

    What the client could have planted among them is copied with the record's safe copy, from the held work
    directory: a link is never followed, a FIFO or a device never read, the bytes bounded (``not_copied``)."""
    record = run.records[0]
    facts = record.meta["outside"]
    here = (Path(name) for name in ("plan.json", "result.json", "recording"))
    return record.save(
        save_dir,
        files={
            "client-stdout.txt": facts.get("stdout_tail", "").encode("utf-8", "replace"),
            "client-stderr.txt": facts.get("stderr_tail", "").encode("utf-8", "replace"),
        },
        copies={name.name: (name, work_fd) for name in here},
    )


def run_outside_one(
    scenario: Scenario, spec: ClientSpec, *, save_dir: Path | Slot | None = None, work_root: Path | None = None
) -> Any:
    """Play and judge one scenario; a :class:`harness.runner.ScenarioRun` (never raises for the client's faults)."""
    from harness.runner import unsupported_run

    target = spec.target
    outcome = unsupported_run(scenario, target)
    if outcome.skipped:
        return outcome
    started = time.perf_counter()
    interrupts.check()
    try:
        with workdirs.work_dir(f"codex-harness-client-{scenario.name}-", work_root) as work_dir:
            work_fd = safe_read.open_dir(work_dir)  # held before the client runs: nothing planted in it is followed
            try:
                try:
                    run = play_outside(scenario, spec, work_dir, work_fd)
                except (ClientCannotStart, UsageError):  # the command or the release: the caller's usage error
                    raise
                except Exception as exc:
                    reraise_interrupt(exc)
                    detail = "".join(traceback.format_exception(exc)[-3:]).strip()
                    outcome.checks = [Check(scenario.name, target, "runner", "play", "fail", detail, "")]
                    return outcome
                outcome.record = run.records[0]
                outcome.checks = run.checks
                if save_dir is not None:
                    outcome.saved_to = save_outside(run, save_dir, work_fd)
            finally:
                os.close(work_fd)
    finally:
        outcome.wall_s = time.perf_counter() - started
    interrupts.check()  # a SIGTERM whose interrupt the run took for a verdict: no verdict, no next scenario
    return outcome
