"""The runner: plays one scenario against one target with the client and builds the session record.

The client follows the scenario's ``[client]`` part: approval decisions in order of arrival, cancel /
steer / resume actions at their triggers, the budgets and deadlines. The record keeps the wire
transcript, each turn's Result, both trace bundles, the server's exit status and stderr tail, and the
scenario's ``[expect]``; the contracts then judge it (:func:`run_one`).

Every scenario runs in its own ``trio.run``: the in-process fake under
``trio.testing.MockClock(autojump_threshold=0)`` (a 30 s scripted delay costs no wall time), the process
targets on the real clock.
"""

from __future__ import annotations

import math
import time
import traceback
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import trio
import trio.testing

from codex_client.errors import ClientError
from codex_client.events import ApprovalRequested, ItemStarted, MessageDelta, TurnEvent, TurnStarted
from codex_client.session import SessionOptions, open_session
from codex_sandbox import interrupts, workdirs
from contracts import stable_params
from contracts.checks import CONTRACT_NAMES, Check, run_all, shown
from contracts.checks import scenario as scenario_check
from contracts.exitcodes import reraise_interrupt
from contracts.faults import transport_problem
from contracts.heap import collector_paused
from contracts.jsonrpc import RpcError
from contracts.method_overrides import LEDGER_TURN
from contracts.record import MAX_OTHER_SERVER_TRACES, Budgets, ModelEntry, SessionRecord, TurnResult
from contracts.safe_dir import Slot
from contracts.scenario import ClientAction, ClientPlan, Scenario, TurnScript
from contracts.scenario_rules import SCENARIO_NAME_RULE, is_safe_name
from contracts.trace.reader import bundles_under
from contracts.triggers import ActionSchedule, Moment, held_approvals, resumes
from fake_server.profiles import switches_of
from harness.budgets import MAX_RUN_S, plan_budgets, scenario_deadline_s
from harness.probes import ProbeState, run_probes
from harness.report_dir import ReportDir
from harness.targets import TARGET_NAMES, TargetRun, TargetUnavailable, open_target

if TYPE_CHECKING:
    from fake_server.profiles import Profile

#: Wall-clock bound of one scenario on a process target (the scenario's own budgets are far below).
PROCESS_RUN_LIMIT_S = 120.0
#: Virtual-time bound of one scenario in process: a hung fake or client ends as a failed run, not a hang. It is
#: the cap of a run under declared budgets too (harness.budgets.MAX_RUN_S): a declared budget never needs more.
VIRTUAL_RUN_LIMIT_S = 3600.0
RUNNER_CONTRACT = "runner"
WORKDIR = "/RUN/workdir"

#: A cancel trigger the latency probe installs instead of the scenario's actions.
CancelTrigger = Callable[[TurnEvent], bool]


@dataclass(slots=True)
class ScenarioRun:
    """One (scenario, target): its checks, its record (None when skipped or when the run broke)."""

    scenario: str
    target: str
    checks: list[Check] = field(default_factory=list)
    record: SessionRecord | None = None
    skipped: str | None = None
    wall_s: float = 0.0
    saved_to: Path | None = None

    @property
    def status(self) -> str:
        """What was judged (the progress line's word): a scenario whose judged checks all passed is a pass,
        whatever it also skipped; ``skip`` only when nothing was judged; ``should`` when its only failures are
        recommendations (contracts.checks.shown)."""
        return shown(self.checks)


# --- playing one scenario ---------------------------------------------------------------------------


def session_options(plan: ClientPlan, client_trace_dir: Path | None) -> SessionOptions:
    return SessionOptions(
        experimental_api=plan.experimental_api,
        opt_out_notifications=tuple(plan.opt_out),
        request_timeout=plan.request_timeout_ms / 1000,
        interrupt_budget=plan.interrupt_budget_ms / 1000,
        teardown_timeout=plan.teardown_ms / 1000,
        turn_timeout=plan.turn_timeout_ms / 1000,
        startup_timeout=plan.startup_timeout_ms / 1000,
        trace_dir=client_trace_dir,
        initialize=False,  # the runner initializes inside the block so a failed handshake still has a record
    )


def scenario_budgets(plan: ClientPlan) -> Budgets:
    return Budgets(
        interrupt_s=plan.interrupt_budget_ms / 1000,
        teardown_s=plan.teardown_ms / 1000,
        request_s=plan.request_timeout_ms / 1000,
    )


#: How long an approval request waits for the other approvals its model response asks for. The real
#: binary asks for them one after the other; on a loaded machine an answer sent before the next request
#: makes it report an extra ``active`` / ``waitingOnApproval`` flip that the scenario did not mean.
SIBLING_APPROVAL_WAIT_S = 5.0


class PlanPolicy:
    """The plan's approval decisions, by the request's ordinal among the session's approval requests.

    An approval that a ``cancel`` action targets (``at = "approval_pending"``) is held unanswered: the
    scenario means the user cancels *while* it is pending, so answering it first would test nothing.
    The client's own approval deadline still bounds the wait.

    Approvals one model response asks for together (``turns``: the scenario's scripts) are answered once
    they are all pending ("ask at once"), bounded by :data:`SIBLING_APPROVAL_WAIT_S`.
    """

    def __init__(self, plan: ClientPlan, turns: Sequence[TurnScript] = ()) -> None:
        self.plan = plan
        self.turns = tuple(turns)
        self.turn = 0  # 1-based number of the running turn
        self.in_turn = 0  # approvals seen in the running turn
        self._arrived = trio.Event()

    def start_turn(self, number: int) -> None:
        self.turn, self.in_turn = number, 0

    def held(self, n: int) -> bool:
        return n in held_approvals(self.plan.actions_for(self.turn))

    def siblings_end(self, n: int) -> int:
        """How many approvals of this turn are asked up to the end of the response that asks the ``n``-th."""
        if not 0 < self.turn <= len(self.turns):
            return n
        end = 0
        for response in self.turns[self.turn - 1].responses:
            if response.end == "completed":  # a cut or failed response starts no tool
                end += sum(1 for item in response.items if getattr(item, "approval", False))
            if end >= n:
                return end
        return n

    async def __call__(self, request: Any) -> str:
        self.in_turn += 1
        arrived, self._arrived = self._arrived, trio.Event()
        arrived.set()
        if self.held(self.in_turn):
            await trio.sleep_forever()
        end = self.siblings_end(self.in_turn)
        with trio.move_on_after(SIBLING_APPROVAL_WAIT_S):
            while self.in_turn < end:
                await self._arrived.wait()
        if self.plan.approval_delay_ms:  # the user takes a while: input can arrive while the approval is pending
            await trio.sleep(self.plan.approval_delay_ms / 1000)
        return self.plan.decision(request.index)


def approval_policy(plan: ClientPlan, turns: Sequence[TurnScript] = ()) -> PlanPolicy:
    return PlanPolicy(plan, turns)


_MOMENTS: dict[type, Moment] = {
    TurnStarted: "started",
    MessageDelta: "delta",
    ItemStarted: "item_started",
    ApprovalRequested: "approval_pending",
}


def moment_of(event: TurnEvent) -> Moment | None:
    """The plan moment a client event is (see :mod:`contracts.triggers`), None for the others."""
    return _MOMENTS.get(type(event))


class _Timers:
    """Rings the turn's waiting actions when the plan's interpreter says they are due (trio does the waiting)."""

    def __init__(self, schedule: ActionSchedule[ClientAction], ring: Callable[[ClientAction], None]) -> None:
        self.schedule, self.ring = schedule, ring
        self._changed = trio.Event()

    def changed(self) -> None:
        """The schedule may wait for an earlier time now."""
        self._changed.set()

    async def run(self) -> None:
        while True:
            wake = self.schedule.next_wake()
            with trio.move_on_at(math.inf if wake is None else wake) as due:
                await self._changed.wait()
            if not due.cancelled_caught:
                self._changed = trio.Event()
                continue
            for action in self.schedule.wake(trio.current_time()):
                self.ring(action)


async def play_turn(
    session: Any,
    text: str,
    actions: Sequence[ClientAction],
    cancel_trigger: tuple[CancelTrigger, float] | None = None,
) -> TurnResult | None:
    """One turn, acting on its events as the plan says (:mod:`contracts.triggers`); returns the Result (None
    only if the client gave none). ``cancel_trigger``: the latency probe's own cancel, after a delay."""
    turn = session.turn(text)
    schedule: ActionSchedule[ClientAction] = ActionSchedule(actions)
    with trio.CancelScope() as caller:  # cancelling the caller's scope is how a user cancels

        async def act(action: ClientAction | None, delay_s: float = 0.0) -> None:
            if delay_s > 0:
                await trio.sleep(delay_s)
            if action is None or action.do == "cancel":
                caller.cancel()
            elif action.do == "steer":
                try:
                    await turn.steer(action.text)
                except (ClientError, RpcError) as exc:
                    session.note(f"runner: steer failed: {exc}")

        async with turn, trio.open_nursery() as nursery:

            def fire(action: ClientAction) -> None:
                nursery.start_soon(act, action)

            def ring(action: ClientAction) -> None:  # on time: a cancel at once, a steer as its own task
                if action.do == "cancel":
                    caller.cancel()
                else:
                    fire(action)

            timers = _Timers(schedule, ring) if schedule.waits else None
            if timers is not None:
                nursery.start_soon(timers.run)
            for action in schedule.start(trio.current_time()):
                fire(action)
            async for event in turn:
                moment = moment_of(event)
                if moment is not None:
                    for action in schedule.observe(moment, now=trio.current_time(), n=getattr(event, "n", None)):
                        fire(action)
                    if timers is not None:
                        timers.changed()
                if cancel_trigger is not None and cancel_trigger[0](event):
                    nursery.start_soon(act, None, cancel_trigger[1])
                    cancel_trigger = None
            schedule.end()
            nursery.cancel_scope.cancel()  # actions still waiting for a later trigger are moot
    return turn.result


async def _play_session(
    session: Any,
    scenario: Scenario,
    cancel_trigger: tuple[CancelTrigger, float] | None,
    record: SessionRecord,
    policy: Any = None,
    cwd: str | None = None,
) -> None:
    plan = scenario.client
    probes = ProbeState(cwd=cwd)
    probe_thread = await run_probes(session, plan, "start", None, probes)
    thread_id = ""
    if plan.handshake:
        try:
            await session.initialize()
            thread_id = await session.start_thread(cwd=WORKDIR)
        except (ClientError, RpcError) as exc:
            # A failed handshake or thread start ends every turn of the task as failed (docs/client-rules.md §3).
            record.meta["startup_failure"] = f"{type(exc).__name__}: {exc}"
            failed_at = session.now()  # on the wire's clock, so the Result is drawn where it happened
            for i in range(len(scenario.turns)):
                session.results.append(
                    TurnResult(index=i, status="failed", error=f"startup failed: {exc}", ended_at=failed_at)
                )
            return
    probe_thread = await run_probes(session, plan, "thread", thread_id or probe_thread, probes)
    for i, script in enumerate(scenario.turns if plan.play_turns else ()):
        actions = plan.actions_for(i + 1)
        if resumes(actions):
            try:
                thread_id = await session.resume_thread(thread_id, cwd=WORKDIR)
            except (ClientError, RpcError) as exc:
                session.note(f"runner: thread/resume failed: {exc}")
        if isinstance(policy, PlanPolicy):
            policy.start_turn(i + 1)
        probe = cancel_trigger if i == 0 else None
        await play_turn(session, script.input, actions, probe)
    await run_probes(session, plan, "end", thread_id or probe_thread, probes)


#: How long the end of a real-time session waits for ``serverRequest/resolved`` of requests still open.
RESOLVED_SETTLE_S = 0.5
_RESOLVED_POLL_S = 0.01


def _unresolved_requests(session: Any) -> set[Any]:
    asked: set[Any] = set()
    resolved: set[Any] = set()
    for entry in session.wire:
        frame = entry.frame
        if entry.dir != "s2c" or not isinstance(frame, dict) or "method" not in frame:
            continue
        if "id" in frame:
            asked.add(frame["id"])
        elif frame["method"] == "serverRequest/resolved" and isinstance(frame.get("params"), dict):
            resolved.add(frame["params"].get("requestId"))
    return asked - resolved


async def _settle_resolved(session: Any, process: Any) -> None:
    """The real server writes ``serverRequest/resolved`` for an interrupted approval just after ``turn/completed``;
    closing stdin at once can beat it on a loaded machine and lose it from the record. Bounded, and only
    while the server runs and something is unresolved (a fake that never resolves costs the bound)."""
    with trio.move_on_after(RESOLVED_SETTLE_S):
        while (process is None or process.exit_code is None) and _unresolved_requests(session):
            await trio.sleep(_RESOLVED_POLL_S)


def scenario_faults(scenario: Scenario) -> list[dict[str, Any]]:
    """The scenario's scripted faults, for the report to mark where each struck (turn is 0-based).

    A ``[[methods]]`` entry's fault is listed with the ledger's turn for such faults, its position among
    the entries (``index``), its method and the entry's ``n`` (0: every request of the method)."""
    turns = [
        {"turn": i, "kind": f.kind, "at": f.at, "n": f.n, "params": dict(f.params)}
        for i, turn in enumerate(scenario.turns)
        for f in turn.faults
    ]
    methods = [
        {
            "turn": LEDGER_TURN,
            "index": i,
            "method": o.name,
            "kind": o.fault.kind,
            "at": o.fault.at,
            "n": o.n,
            "params": dict(o.fault.params),
        }
        for i, o in enumerate(scenario.methods)
        if o.fault is not None
    ]
    return turns + methods


async def _play_async(
    scenario: Scenario,
    target: str,
    work_dir: Path,
    codex: Path | None,
    cancel_trigger: tuple[CancelTrigger, float] | None,
    limit_s: float,
    release: str | Profile | None = None,
    transport: str = "stdio",
) -> SessionRecord:
    # With play_turns = false the [[turns]] only script the model side: the client starts (and owes a Result to) none.
    planned = len(scenario.turns) if scenario.client.play_turns else 0
    # The budgets the client ran with, the turn's included (record.budgets holds the ones the checks judge by).
    meta = {
        "scenario_turns": planned,
        "faults": scenario_faults(scenario),
        "budgets": plan_budgets(scenario.client),
        "approval_turns": scenario.approval_turns,
    }
    record = SessionRecord(scenario.name, target, scenario.expect, meta=meta)
    client_trace = work_dir / "client-trace"
    options = session_options(scenario.client, client_trace)
    policy = approval_policy(scenario.client)  # one argument: tests swap in a policy of their own
    if isinstance(policy, PlanPolicy):
        policy.turns = tuple(scenario.turns)
    run: TargetRun | None = None
    with trio.move_on_after(limit_s) as limit:
        async with open_target(
            target, scenario, work_dir=work_dir, codex=codex, release=release, transport=transport
        ) as run:
            record.meta["started_at"] = trio.current_time()  # t = 0 of a transcript (record)
            record.virtual_time = run.virtual_time
            record.schema_release = run.schema_release
            record.server_version = run.server_version
            # [expect.switch.NAME] by the release's learned switches, then [expect.release."X"]
            switches = run.switches if run.switches is not None else switches_of(run.server_version)
            record.expect = scenario.expect.for_release(run.server_version, switches)
            record.meta.update(run.meta)
            if not options.experimental_api and any(a.do == "resume" for a in scenario.client.actions):
                # a field the release gates behind experimentalApi is not sent by a client that did not opt in
                taken = stable_params.takes_without_opt_in(run.schema_release, "thread/resume", "excludeTurns")
                options = replace(options, resume_exclude_turns=taken)
            session = None
            escaped: list[str] = []
            try:
                async with open_session(run.transport, options, policy=policy) as session:
                    cwd = str(run.workdir) if run.workdir is not None else None
                    await _play_session(session, scenario, cancel_trigger, record, policy, cwd)
                    if not run.virtual_time:
                        await _settle_resolved(session, run.transport.process)
            except Exception as exc:  # the client let an exception escape: a finding, recorded
                reraise_interrupt(exc)
                escaped.append("".join(traceback.format_exception_only(exc)).strip())
            finally:
                # Also when the run limit cancels the session: the record keeps what happened so far.
                if session is not None:
                    startup = record.meta.get("startup_failure")
                    session.fill_record(record)
                    # Contracts judge against the budgets the scenario asked for, not the ones the client reports.
                    record.budgets = scenario_budgets(scenario.client)
                    if startup:
                        record.meta["startup_failure"] = startup
                record.client_errors.extend(escaped)
    if limit.cancelled_caught:
        record.client_errors.append(f"runner: the scenario did not finish within {limit_s:g} s")
    if run is not None:
        bundles = bundles_under(run.trace_root) if run.trace_root is not None else []
        record.server_trace = bundles[0] if bundles else None
        record.other_server_traces = bundles[1 : 1 + MAX_OTHER_SERVER_TRACES]
        if len(bundles) > 1 + MAX_OTHER_SERVER_TRACES:
            record.meta["other_server_traces_left_out"] = len(bundles) - 1 - MAX_OTHER_SERVER_TRACES
        if run.faults_struck is not None:
            record.meta["faults_struck"] = [list(x) for x in run.faults_struck()]
        if run.model_traffic:
            record.model = [ModelEntry.from_json(e) for e in run.model_traffic]
    if record.client_trace is None and (client_trace / "manifest.json").exists():
        record.client_trace = client_trace
    return record


def play(
    scenario: Scenario,
    target: str,
    *,
    work_dir: Path,
    codex: Path | None = None,
    cancel_trigger: tuple[CancelTrigger, float] | None = None,
    release: str | Profile | None = None,
    transport: str = "stdio",
) -> SessionRecord:
    """Play ``scenario`` on ``target`` in a fresh ``trio.run``; traces go under ``work_dir``.

    ``release``: the release profile a fake target plays, before ``$FAKE_CODEX_RELEASE`` and the scenario's
    (``diff`` makes the fake play the binary's release); the real target ignores it. ``transport``: how the
    client reaches the server (:func:`harness.targets.open_target`)."""
    if target not in TARGET_NAMES:
        raise TargetUnavailable(f"unknown target {target!r} (known: {', '.join(TARGET_NAMES)})")
    work_dir.mkdir(parents=True, exist_ok=True)
    if target == "fake":  # virtual time: the backstop is already the cap of a run (harness.budgets.MAX_RUN_S)
        clock = trio.testing.MockClock(autojump_threshold=0)
        limit = VIRTUAL_RUN_LIMIT_S
        return trio.run(
            _play_async, scenario, target, work_dir, codex, cancel_trigger, limit, release, transport, clock=clock
        )
    # A process runs on the wall clock: the limit follows the budgets the client keeps (a declared 10-minute
    # turn: harness.budgets), up to the cap of a run; a scenario whose own budgets promise more ends at it.
    limit = max(PROCESS_RUN_LIMIT_S, min(scenario_deadline_s(scenario), MAX_RUN_S))
    return trio.run(_play_async, scenario, target, work_dir, codex, cancel_trigger, limit, release, transport)


def skipped_checks(scenario: str, target: str, reason: str, *, applies: bool = True) -> list[Check]:
    """One skip per contract, so checks.json holds every (scenario, target, contract). ``applies=False``: the
    scenario is not one for this target (a fake-only fault on the real binary), not a gap --strict counts."""
    return [Check(scenario, target, c, "scenario", "skip", reason, "", (), "must", applies) for c in CONTRACT_NAMES]


def unsupported_run(scenario: Scenario, target: str) -> ScenarioRun:
    """The run to fill in: already complete (skipped, one skip per contract) when ``target`` cannot play it."""
    outcome = ScenarioRun(scenario.name, target)
    supported, reason = scenario.supports(target)
    if not supported:
        outcome.skipped = reason
        outcome.checks = skipped_checks(scenario.name, target, reason, applies=False)
    return outcome


def run_one(
    scenario: Scenario,
    target: str,
    *,
    codex: Path | None = None,
    save_dir: Path | Slot | None = None,
    work_root: Path | None = None,
    contracts: tuple[str, ...] = CONTRACT_NAMES,
    release: str | None = None,
    transport: str = "stdio",
) -> ScenarioRun:
    """Play and judge one (scenario, target). Never raises for a scenario: a broken run is a failed check.

    ``release``: the release profile a fake target plays (:func:`play`). ``save_dir``: where the record is
    swapped in whole (a report's :class:`Slot`, or a directory); a record that cannot be written (a full disk)
    is a :class:`~contracts.safe_dir.WriteError`, exit 3."""
    outcome = unsupported_run(scenario, target)
    why = transport_problem({f.kind for f in scenario.faults}, transport)
    if why and not outcome.skipped:
        outcome.skipped = why
        outcome.checks = skipped_checks(scenario.name, target, why)
    if outcome.skipped:
        return outcome
    if not is_safe_name(scenario.name):  # built in Python, past the loader: it names files and folders
        detail = f"scenario name {scenario.name!r} is not a safe slug ({SCENARIO_NAME_RULE})"
        named = (scenario_check.NAME, scenario_check.SCENARIO_NAME)
        outcome.checks = [Check(scenario.name, target, *named, "fail", detail, "")]
        return outcome
    started = time.perf_counter()
    interrupts.check()
    try:
        with workdirs.work_dir(f"codex-harness-{scenario.name}-", work_root) as work_dir:
            _play_and_judge(outcome, scenario, target, work_dir, codex, save_dir, contracts, release, transport)
    finally:
        outcome.wall_s = time.perf_counter() - started
    interrupts.check()  # a SIGTERM whose interrupt the run took for a verdict: no verdict, no next scenario
    return outcome


def _play_and_judge(
    outcome: ScenarioRun,
    scenario: Scenario,
    target: str,
    work_dir: Path,
    codex: Path | None,
    save_dir: Path | Slot | None,
    contracts: tuple[str, ...],
    release: str | None,
    transport: str = "stdio",
) -> None:
    try:
        with collector_paused():  # no full collections while the record grows (contracts.heap)
            record = play(
                scenario, target, work_dir=work_dir / "run", codex=codex, release=release, transport=transport
            )
    except TargetUnavailable as exc:
        outcome.skipped = f"target {target} not available: {exc}"
        outcome.checks = skipped_checks(scenario.name, target, outcome.skipped)
        return
    except Exception as exc:
        reraise_interrupt(exc)  # an interrupt Python turned into another exception (an import's class creation)
        detail = "".join(traceback.format_exception(exc)[-3:]).strip()
        outcome.checks = [Check(scenario.name, target, RUNNER_CONTRACT, "play", "fail", detail, "")]
        return
    if save_dir is not None:
        with collector_paused():
            outcome.saved_to = record.save(save_dir)
        with collector_paused():  # judge what was saved: the report's record is the judged one
            record = SessionRecord.load(outcome.saved_to)
    outcome.record = record
    # The scenario check yields only a failure (a fault the run never reached), never blamed on the client.
    outcome.checks = run_all(record, contracts) + scenario_check.check(record)


def run_many(
    scenarios: Iterable[Scenario],
    targets: Iterable[str],
    *,
    codex: Path | None = None,
    report_dir: Path | ReportDir | None = None,
    progress: Callable[[ScenarioRun, int, int], None] | None = None,
    transport: str = "stdio",
    started: Callable[[str, str], None] | None = None,
) -> list[ScenarioRun]:
    """Every (scenario, target); ``report_dir``: the records go to its ``sessions/<target>/<scenario>/`` (a path
    is prepared and locked here, for this call). ``transport``: how our client reaches each server. ``started``
    is told each (scenario, target) as it starts, ``progress`` as it ends."""
    pairs = [(s, t) for t in targets for s in scenarios]
    if isinstance(report_dir, Path):
        from harness.report_dir import prepare

        with prepare(report_dir, [(t, s.name) for s, t in pairs]) as report:
            return _run_pairs(pairs, codex, report, progress, transport, started)
    return _run_pairs(pairs, codex, report_dir, progress, transport, started)


def _run_pairs(
    pairs: Sequence[tuple[Scenario, str]],
    codex: Path | None,
    report: ReportDir | None,
    progress: Callable[[ScenarioRun, int, int], None] | None,
    transport: str = "stdio",
    started: Callable[[str, str], None] | None = None,
) -> list[ScenarioRun]:
    runs = []
    for n, (scenario, target) in enumerate(pairs, 1):
        if started is not None:
            started(scenario.name, target)
        save = report.slot(target, scenario.name) if report is not None else None
        run = run_one(scenario, target, codex=codex, save_dir=save, transport=transport)
        runs.append(run)
        if progress is not None:
            progress(run, n, len(pairs))
    return runs


def without_cancels(scenario: Scenario) -> Scenario:
    """The scenario without its own cancel actions (the latency probe places its own)."""
    actions = tuple(a for a in scenario.client.actions if a.do != "cancel")
    return replace(scenario, client=replace(scenario.client, actions=actions))
