"""Deriving a generated scenario's ``[expect]`` from its steps, by the documented rules.

:func:`derive` walks every turn (:mod:`harness.fuzz.walk`), applies the faults that strike and
the client's cancel where it lands, then writes the truth as literal values:

- status (docs/client-rules.md §3): ``turn/completed`` completed → completed (failed when an
  unsupported server request was answered with an error in the turn, completed allowed too), failed → failed,
  interrupted → aborted; a client cancel → aborted whatever the server does; the turn deadline →
  timeout; the server gone or unreadable mid-turn → failed;
- usage (§8): the sum of the usage of every model response announced for the turn (first
  ``last``, then deltas of ``total`` add up to exactly that); duplicates and replays add nothing;
  a cancelled turn keeps what was announced before the interrupt answer;
- where the truth is not certain, it is left unchecked (``usage``/``server_status`` None, trace
  ``none``) rather than guessed.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from contracts.exitcodes import InvalidInput
from contracts.expect import Allowance, Expect, ExpectTurn
from contracts.scenario import ClientAction, ClientPlan, Fault, ServerConfig, TurnScript, Usage, default_approval_policy
from fake_server.turns import PENDING_FLUSH_MS
from harness.fuzz.table import INTERRUPT_KINDS, effect
from harness.fuzz.walk import (
    Landing,
    Step,
    TurnTruth,
    Walker,
    apply_fault,
    landing_at_time,
    landing_for,
    point_index,
    steerable,
    tool_outcomes,
    trigger_index,
)


class RacyScenario(InvalidInput, ValueError):
    """A client action whose outcome depends on task scheduling: the generator must not produce it."""


@dataclass(slots=True)
class SessionTruth:
    turns: list[TurnTruth] = field(default_factory=list)
    expect: Expect = field(default_factory=Expect)
    fired: list[Fault] = field(default_factory=list)


def _cancel(plan: ClientPlan, turn: int) -> ClientAction | None:
    return next((a for a in plan.actions_for(turn) if a.do == "cancel"), None)


def _held(action: ClientAction | None, offset: int) -> set[int]:
    if action is not None and action.at == "approval_pending" and not action.delay_ms:
        return {offset + action.n - 1}
    return set()


def _order(steps: list[Step], faults: list[Fault]) -> list[Fault]:
    """Non-interrupt faults in timeline order (a fault whose point is not reached sorts last)."""
    placed = [(f, point_index(steps, f)) for f in faults if f.at not in ("interrupt", "initialize")]
    big = len(steps) + 1
    return [f for f, i in sorted(placed, key=lambda p: big if p[1] is None else p[1])]


def _apply_all(steps: list[Step], faults: list[Fault]) -> list[Step]:
    for fault in _order(steps, faults):
        steps = apply_fault(steps, fault)
    return steps


def _first(plan: ClientPlan, turn: int, do: str) -> ClientAction | None:
    return next((a for a in plan.actions_for(turn) if a.do == do), None)


def end_time(steps: list[Step]) -> int | None:
    """When the turn ends on its own (turn/completed or the server gone), None when it never does."""
    for s in steps:
        if s.kind == "completed":
            return s.t
        if s.kind == "fault" and s.fault is not None and _gone(s.fault):
            return s.t
        if s.kind == "silence":
            return None
    return steps[-1].t if steps else 0


def config_for(turns: tuple[TurnScript, ...] | list[TurnScript], config: ServerConfig | None) -> ServerConfig:
    """``config``, or the one a scenario of ``turns`` that names none gets (the loader's default policy)."""
    return config if config is not None else ServerConfig(approval_policy=default_approval_policy(turns))


def walk_turn(
    script: TurnScript,
    plan: ClientPlan,
    turn: int,
    approval_offset: int,
    config: ServerConfig | None = None,
    release: str | None = None,
) -> TurnTruth:
    """The steps of turn ``turn`` (1-based) with its faults and client actions applied, and its truth.

    ``config``: the scenario's server settings, which decide what each tool call does (asked, run, refused),
    as the table of ``release`` (the one the fake plays; None: the default release) says; by default the
    settings of a scenario holding only this turn.

    Raises :class:`RacyScenario` for a client action (or the turn deadline) that races the server.
    """
    cancel = _first(plan, turn, "cancel")
    steer = _first(plan, turn, "steer")
    hold = _held(cancel, approval_offset)
    outcome_of = tool_outcomes(config_for((script,), config), release)
    walker = Walker(script, plan, approval_offset, hold, outcome_of)
    walker.walk()
    faults = list(script.faults)
    steps = _apply_all(walker.steps, faults)
    if steer is not None:
        landing = landing_for(steps, steer)
        if landing is None and _triggered(steps, steer):
            raise RacyScenario(f"turn {turn}: steer at {steer.at} {steer.n} races the server")
        if landing is not None:
            wait = steps[landing.index]
            if not steerable(wait, landing.t):
                raise RacyScenario(f"turn {turn}: steer lands where its input would wait (not mid-stream)")
            prefix = steps[: landing.index]
            struck = [s.fault for s in prefix if s.kind == "fault"]
            walker = Walker(script, plan, approval_offset, hold, outcome_of)
            # The stream is abandoned when the pending input's model request begins (fake_server.turns).
            walker.resume_after_steer(prefix, landing.t + PENDING_FLUSH_MS, wait.r)
            steps = _apply_all(walker.steps, [f for f in faults if not any(f is g for g in struck)])
    truth = TurnTruth(steps=steps, approvals_seen=walker.approvals, outcome=walker.outcome)
    truth.cancelled_patch = walker.cancelled_patch
    truth.fired = [s.fault for s in steps if s.kind == "fault" and s.fault is not None]
    deadline = plan.turn_timeout_ms
    landing, status = None, "aborted"
    if cancel is not None:
        landing = landing_for(steps, cancel)
        if landing is None and _triggered(steps, cancel):
            raise RacyScenario(f"turn {turn}: cancel at {cancel.at} {cancel.n} races the server")
        if landing is not None and landing.t >= deadline:
            landing = None
    end = end_time(steps)
    if landing is None and (end is None or end >= deadline):
        if end == deadline:
            raise RacyScenario(f"turn {turn}: the turn deadline races the end of the turn")
        landing, status = landing_at_time(steps, deadline), "timeout"
        if landing is None:
            raise RacyScenario(f"turn {turn}: the turn deadline falls on a step")
    if landing is not None:
        _judge_cancel(truth, script, landing, plan.interrupt_budget_ms, status)
        if any(_gone(f) for f in truth.fired if f.at in ("interrupt", "usage")):
            # The server exited (or closed its stdout) after the cancel, before it confirmed the turn ended: the
            # turn ended with the server mid-turn, `failed` (docs/client-rules.md §3), as right as the cancel's status.
            truth.also = (*truth.also, "failed")
        if any(effect(f.kind).fails_turn for f in truth.fired) and truth.status != "failed":
            # As in _judge: a client may fail the turn for the unknown server request that struck before the
            # cancel or the deadline, whatever else ended it.
            truth.also = ("failed",)
    else:
        _judge(truth)
    return truth


def _triggered(steps: list[Step], action: ClientAction) -> bool:
    if action.at == "delay":
        end = end_time(steps)
        return end is None or action.delay_ms <= end
    return trigger_index(steps, action) is not None


def _usages(steps: list[Step]) -> tuple[Usage, ...]:
    return tuple(s.usage for s in steps if s.kind == "usage" and s.usage is not None)


def _gone(fault: Fault) -> bool:
    """The server cannot be read after ``fault`` (it exits, closes stdout, writes an unreadable line)."""
    return effect(fault.kind).course == "gone"


def _server_lost(truth: TurnTruth, fault: Fault) -> None:
    """``fault`` made the server unreadable: it exited with a status, or the client must kill it."""
    declared = effect(fault.kind)
    truth.ends_session = True
    if declared.exit:
        truth.crashed = fault
    if declared.kills:
        truth.killed = True


def _judge(truth: TurnTruth) -> None:
    """A turn that ends without the client cancelling it."""
    steps = truth.steps
    truth.usage = _usages(steps)
    fired = [effect(f.kind) for f in truth.fired]
    completed_at = next((i for i, s in enumerate(steps) if s.kind == "completed"), None)
    fatal = next(((i, s.fault) for i, s in enumerate(steps) if s.kind == "fault" and s.fault and _gone(s.fault)), None)
    if fatal is not None:
        i, fault = fatal
        _server_lost(truth, fault)
        if completed_at is None or completed_at > i:
            truth.status, truth.server_status, truth.outcome = "failed", "none", "dead"
            return
    if any(e.ends_session for e in fired):
        truth.ends_session = True
    outcome = truth.outcome
    if outcome == "completed":
        truth.status, truth.server_status = "completed", "completed"
    elif outcome == "failed":
        truth.status, truth.server_status = "failed", "failed"
    elif outcome == "interrupted":
        truth.status, truth.server_status = "aborted", "interrupted"
    if any(e.fails_turn for e in fired) and truth.status == "completed":
        # Failing the turn after answering an unknown server request with an error is our client's rule
        # (docs/client.md); a client that lets it complete as the server says is as correct.
        truth.status, truth.also = "failed", ("completed",)
    elif any(e.fails_turn for e in fired) and truth.status != "failed":
        # As a completed turn: failing it for the unknown server request is as right as what ended it (an
        # approval answered "cancel").
        truth.also = ("failed",)


def _judge_cancel(truth: TurnTruth, script: TurnScript, landing: Landing, budget_ms: int, status: str) -> None:
    """A turn the client cancels (``aborted``) or whose deadline passes (``timeout``) at ``landing``."""
    truth.cancel = landing
    truth.status = status
    steps = truth.steps
    before = steps[: landing.index]
    # Faults after the landing point never strike.
    truth.fired = [s.fault for s in before if s.kind == "fault" and s.fault is not None]
    # Approval requests after the landing never arrive: they take no decision of the plan.
    truth.approvals_seen = sum(1 for s in before if s.kind == "approval")
    interrupt = next((f for f in script.faults if f.at == "interrupt" and f.kind in INTERRUPT_KINDS), None)
    course = effect(interrupt.kind).course if interrupt is not None else None
    usage = landing.usage_before
    waiting = steps[landing.index]
    if waiting.kind == "silence" and not waiting.approval_held:
        # Hung, or past its end without turn/completed: nothing answers the interrupt; the budget kills.
        truth.usage, truth.server_status = usage, "none"
        truth.killed = truth.ends_session = True
        return
    pending = (landing.pending,) if landing.pending else ()
    # Gone, or running on past it, the server does not end the turn at the interrupt.
    ends_turn = course not in ("gone", "runs_on")
    if pending and ends_turn:
        # The usage announced at the interrupt is the turn's next "usage" point: its faults strike there.
        n = sum(1 for s in before if s.kind == "usage") + 1
        at_usage = [f for f in script.faults if f.at == "usage" and f.n == n]
        truth.fired += at_usage
        lost = next((f for f in at_usage if _gone(f)), None)
        if lost is not None:
            # Dead right after that frame: no interrupt answer, no turn/completed, nothing after.
            truth.usage, truth.server_status = usage + pending, "none"
            _server_lost(truth, lost)
            return
    if ends_turn:
        # The interrupt ends the turn: its "after_end" faults strike right after (fake_server.turns.interrupt).
        for fault in script.faults:
            if fault.at == "after_end":
                truth.fired.append(fault)
                if _gone(fault):
                    _server_lost(truth, fault)
    if interrupt is None:
        truth.usage, truth.server_status = usage + pending, "interrupted"
        return
    truth.fired.append(interrupt)
    _interrupt_outcome(truth, interrupt, usage, pending, budget_ms)


def _interrupt_outcome(
    truth: TurnTruth, interrupt: Fault, usage: tuple[Usage, ...], pending: tuple[Usage, ...], budget_ms: int
) -> None:
    """What the interrupt fault's course makes of the interrupt (``usage``: announced before it)."""
    declared = effect(interrupt.kind)
    course = declared.course
    if course == "gone":
        truth.usage, truth.server_status = usage, "none"
        _server_lost(truth, interrupt)
    elif course == "runs_on":
        truth.usage, truth.server_status = usage, "none"
        truth.killed = truth.ends_session = True
    elif course == "late_completion":
        truth.usage = usage + pending
        # The generator keeps the delay far from the budget, so kill vs. clean completion is certain.
        late = bool(interrupt.param(declared.never)) or int(interrupt.param(declared.delay)) >= budget_ms
        truth.server_status = "none" if late else "interrupted"
        truth.killed = truth.ends_session = late
    elif course == "unanswered":
        truth.usage, truth.server_status = usage + pending, "interrupted"
        truth.ends_session = True
    elif course in ("noise", "mark"):  # the completion is clean
        truth.usage, truth.server_status = usage + pending, "interrupted"
    else:
        raise ValueError(f"fault {interrupt.kind}: the truth has no rule for course {course} at the interrupt")


def derive(
    turns: tuple[TurnScript, ...], plan: ClientPlan, config: ServerConfig | None = None, release: str | None = None
) -> SessionTruth:
    """The truth of a scenario made of ``turns`` played by a client following ``plan``, under the server settings
    ``config`` (by default the loader's for those turns), on the fake's profile of ``release`` (None: the default).

    Raises :class:`RacyScenario` when a client action races the server (a generator bug).
    """
    session = SessionTruth()
    offset = 0
    initialize = next((f for f in turns[0].faults if f.at == "initialize"), None) if turns else None
    for number, script in enumerate(turns, start=1):
        if initialize is not None:
            # A failed handshake fails every turn of the task (docs/client-rules.md §3).
            truth = TurnTruth(status="failed", server_status="none", outcome="dead")
            truth.fired = [initialize] if number == 1 else []
            if _gone(initialize):
                _server_lost(truth, initialize)
            truth.ends_session = True
            session.turns.append(truth)
            continue
        truth = walk_turn(script, plan, number, offset, config_for(turns, config), release)
        offset += truth.approvals_seen
        session.turns.append(truth)
    session.fired = [f for t in session.turns for f in t.fired]
    session.expect = _expect(session, plan)
    return session


def _expect(session: SessionTruth, plan: ClientPlan) -> Expect:
    turns = tuple(
        ExpectTurn(t.status, t.buckets() if t.usage_known else None, t.server_status, t.also)  # type: ignore[arg-type]
        for t in session.turns
    )
    fired = session.fired
    kinds = {f.kind for f in fired}
    traces = {effect(k).server_trace for k in kinds}
    crash = next((t.crashed for t in session.turns if t.crashed is not None), None)
    killed = any(t.killed for t in session.turns)
    if "violation" in traces:
        server_trace = "violation"
    elif crash is not None or killed:
        server_trace = "unclosed"
    elif "unjudged" in traces or any(t.cancelled_patch for t in session.turns):
        # A file change answered "cancel" never completes in the fake; whether its tool stays open in the
        # server's trace is not pinned against the real binary yet: not judged. Nor is the fake's shutdown
        # after a fault whose effect says so.
        server_trace = "none"
    else:
        server_trace = "closed"
    return Expect(
        turns=turns,
        server_trace=server_trace,  # type: ignore[arg-type]
        client_trace="closed",
        server_exit=int(crash.param(effect(crash.kind).exit)) if crash is not None else None,
        allow=_allowances(session),
        notes={"generated_by": "harness.fuzz", "faults": sorted(kinds)},
    )


def _allowances(session: SessionTruth) -> tuple[Allowance, ...]:
    """What the faults that struck legitimately cause (``Effect.allows``), each naming its faults."""
    out: dict[tuple[str, str], list[str]] = {}
    for fault in session.fired:
        for contract, what in effect(fault.kind).allows:
            out.setdefault((contract, what), []).append(fault.kind)
    return tuple(
        Allowance(contract, what, None, "fault " + ", ".join(sorted(set(kinds))))
        for (contract, what), kinds in sorted(out.items())
    )
