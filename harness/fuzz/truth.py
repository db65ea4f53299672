"""Deriving a generated scenario's ``[expect]`` from its steps, by the documented rules.

:func:`derive` walks every turn (:mod:`harness.fuzz.timeline`), applies the faults that strike and
the client's cancel where it lands, then writes the truth as literal values:

- status (client-behaviour.md §7): ``turn/completed`` completed → completed (failed when an
  unsupported server request was answered with an error in the turn), failed → failed,
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

from contracts.expect import Allowance, Expect, ExpectTurn
from fake_server.scenario import ClientAction, ClientPlan, Fault, TurnScript, Usage
from harness.fuzz.timeline import (
    INTERRUPT_FAULTS,
    Landing,
    Step,
    TurnTruth,
    Walker,
    apply_fault,
    landing_for,
    point_index,
)


class RacyScenario(ValueError):
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


def _order(steps: list[Step], faults: tuple[Fault, ...]) -> list[Fault]:
    """Non-interrupt faults in timeline order (a fault whose point is not reached sorts last)."""
    placed = [(f, point_index(steps, f)) for f in faults if f.at not in ("interrupt", "initialize")]
    big = len(steps) + 1
    return [f for f, i in sorted(placed, key=lambda p: big if p[1] is None else p[1])]


def walk_turn(script: TurnScript, plan: ClientPlan, turn: int, approval_offset: int) -> TurnTruth:
    """The steps of turn ``turn`` (1-based) with its faults applied, and its truth."""
    action = _cancel(plan, turn)
    walker = Walker(script, plan, approval_offset, _held(action, approval_offset))
    walker.walk()
    steps = walker.steps
    truth = TurnTruth(approvals_seen=walker.approvals)
    for fault in _order(steps, script.faults):
        if point_index(steps, fault) is not None:
            truth.fired.append(fault)
        steps = apply_fault(steps, fault)
    truth.steps = steps
    truth.outcome = walker.outcome
    landing = None
    if action is not None:
        landing = landing_for(steps, action)
        if landing is None and _triggered(steps, action):
            raise RacyScenario(f"turn {turn}: cancel at {action.at} {action.n} races the server")
    _judge(truth, script, landing, plan.interrupt_budget_ms)
    return truth


def _triggered(steps: list[Step], action: ClientAction) -> bool:
    if action.at == "delay":
        end = steps[-1].t if steps else 0
        return any(s.kind == "silence" for s in steps) or action.delay_ms <= end
    kind = {"started": "started", "delta": "delta", "item_started": "item_started", "approval_pending": "approval"}[
        action.at
    ]
    return any(s.kind == kind and (kind == "started" or s.n == action.n) for s in steps)


def _usages(steps: list[Step]) -> tuple[Usage, ...]:
    return tuple(s.usage for s in steps if s.kind == "usage" and s.usage is not None)


def _judge(truth: TurnTruth, script: TurnScript, landing: Landing | None, budget_ms: int) -> None:
    steps = truth.steps
    strikes = [s.fault for s in steps if s.kind == "fault" and s.fault is not None]
    kinds = {f.kind for f in strikes}
    if "late_events" in kinds or "replay_usage" in kinds or "overload" in kinds:
        truth.usage_known = False
    if landing is not None:
        _judge_cancel(truth, script, landing, budget_ms)
        return
    truth.usage = _usages(steps)
    completed_at = next((i for i, s in enumerate(steps) if s.kind == "completed"), None)
    fatal = next(
        (
            (i, s.fault)
            for i, s in enumerate(steps)
            if s.kind == "fault" and s.fault and s.fault.kind in ("crash", "stdout_closed", "oversized_line")
        ),
        None,
    )
    if fatal is not None:
        i, fault = fatal
        truth.ends_session = True
        if fault.kind == "crash":
            truth.crashed = fault
        if fault.kind == "oversized_line":
            truth.killed = True
        if completed_at is None or completed_at > i:
            truth.status, truth.server_status, truth.outcome = "failed", "none", "dead"
            return
    if "hang" in kinds or "grandchild_holds_stdout" in kinds:
        truth.status, truth.server_status, truth.outcome = "timeout", "none", "timeout"
        truth.ends_session = truth.killed = True
        if "grandchild_holds_stdout" in kinds:
            truth.server_status = None
        return
    if "drop_turn_completed" in kinds:
        # The deadline passes; whether the server then answers the interrupt with a completion is not pinned.
        truth.status, truth.server_status, truth.outcome = "timeout", None, "timeout"
        truth.ends_session = True
        return
    outcome = truth.outcome
    if outcome == "completed":
        truth.status, truth.server_status = "completed", "completed"
    elif outcome == "failed":
        truth.status, truth.server_status = "failed", "failed"
    elif outcome == "interrupted":
        truth.status, truth.server_status = "aborted", "interrupted"
    if "unknown_server_request" in kinds and truth.status == "completed":
        truth.status = "failed"


def _judge_cancel(truth: TurnTruth, script: TurnScript, landing: Landing, budget_ms: int) -> None:
    truth.cancel = landing
    truth.status = "aborted"
    steps = truth.steps
    before = steps[: landing.index]
    kinds_before = {s.fault.kind for s in before if s.kind == "fault" and s.fault is not None}
    # Faults that struck after the landing point never happened.
    truth.fired = [f for f in truth.fired if f.kind in kinds_before]
    interrupt = next((f for f in script.faults if f.at == "interrupt" and f.kind in INTERRUPT_FAULTS | {"crash"}), None)
    usage = landing.usage_before
    waiting = steps[landing.index]
    if waiting.kind == "silence" and not waiting.approval_held:
        # Hung, or past its end without turn/completed: the interrupt gets no clean completion.
        truth.usage = usage
        truth.server_status = None
        truth.killed = truth.ends_session = True
        if "hang" in kinds_before or "grandchild_holds_stdout" in kinds_before:
            truth.server_status = "none"
        if interrupt is not None:
            truth.fired.append(interrupt)
        return
    if interrupt is None:
        truth.usage = usage + ((landing.pending,) if landing.pending else ())
        truth.server_status = "interrupted"
        return
    truth.fired.append(interrupt)
    kind = interrupt.kind
    pending = (landing.pending,) if landing.pending else ()
    if kind == "crash":
        truth.usage, truth.server_status, truth.crashed = usage, "none", interrupt
        truth.ends_session = True
    elif kind == "interrupt_ignored":
        truth.usage, truth.server_status = usage, "none"
        truth.killed = truth.ends_session = True
    elif kind == "completion_after_interrupt":
        truth.usage = usage + pending
        if interrupt.param("never"):
            truth.server_status = "none"
            truth.killed = truth.ends_session = True
        else:
            # The generator keeps the delay far from the budget, so kill vs. clean completion is certain.
            late = int(interrupt.param("delay_ms")) >= budget_ms
            truth.server_status = "none" if late else "interrupted"
            truth.killed = truth.ends_session = late
    elif kind == "interrupt_answer_missing":
        truth.usage, truth.server_status = usage + pending, "interrupted"
        truth.ends_session = True
    else:  # resolved_order, trace_unclosed_tool: the completion is clean
        truth.usage, truth.server_status = usage + pending, "interrupted"


def derive(turns: tuple[TurnScript, ...], plan: ClientPlan) -> SessionTruth:
    """The truth of a scenario made of ``turns`` played by a client following ``plan``.

    Raises :class:`RacyScenario` when a client action races the server (a generator bug).
    """
    session = SessionTruth()
    offset = 0
    initialize = next((f for f in turns[0].faults if f.at == "initialize"), None) if turns else None
    for number, script in enumerate(turns, start=1):
        if initialize is not None and initialize.kind == "crash":
            truth = TurnTruth(status="failed", server_status="none", outcome="dead", crashed=initialize)
            truth.fired = [initialize] if number == 1 else []
            truth.ends_session = True
            session.turns.append(truth)
            continue
        truth = walk_turn(script, plan, number, offset)
        offset += truth.approvals_seen
        session.turns.append(truth)
    session.fired = [f for t in session.turns for f in t.fired]
    session.expect = _expect(session, plan)
    return session


def _expect(session: SessionTruth, plan: ClientPlan) -> Expect:
    turns = tuple(
        ExpectTurn(t.status, t.buckets() if t.usage_known else None, t.server_status)  # type: ignore[arg-type]
        for t in session.turns
    )
    fired = session.fired
    kinds = {f.kind for f in fired}
    crash = next((t.crashed for t in session.turns if t.crashed is not None), None)
    killed = any(t.killed for t in session.turns)
    if "trace_unclosed_tool" in kinds:
        server_trace = "violation"
    elif crash is not None or killed:
        server_trace = "unclosed"
    elif kinds & {"stdout_closed", "drop_turn_completed", "interrupt_answer_missing"}:
        server_trace = "none"  # the fake's shutdown after these is not pinned: not judged
    else:
        server_trace = "closed"
    return Expect(
        turns=turns,
        server_trace=server_trace,  # type: ignore[arg-type]
        client_trace="closed",
        server_exit=int(crash.param("exit_code")) if crash is not None else None,
        allow=_allowances(session),
        notes={"generated_by": "harness.fuzz", "faults": sorted(kinds)},
    )


#: What each fault legitimately causes, as (contract, kind of violation). Counts are left open:
#: the fuzzer judges the client, and exact counts of the fake's own noise belong to the fake's tests.
_ALLOW: dict[str, tuple[tuple[str, str], ...]] = {
    "garbage_lines": (("schema", "server_frames_invalid"),),
    "invalid_utf8": (("schema", "server_frames_invalid"),),
    "oversized_line": (("schema", "server_frames_invalid"),),
    "unknown_notification": (("schema", "server_frames_invalid"),),
    "unknown_server_request": (("schema", "server_frames_invalid"),),
    "crash": (("schema", "server_frames_invalid"), ("protocol", "unanswered_server_requests")),
    "duplicate_response_id": (("protocol", "unknown_response_id"),),
    "duplicate_usage": (("usage", "server_usage_inconsistent"),),
    "replay_usage": (("usage", "server_usage_inconsistent"),),
    "late_events": (("schema", "server_frames_invalid"), ("protocol", "late_events")),
    "resolved_order": (("protocol", "unanswered_server_requests"),),
    "interrupt_ignored": (("protocol", "unanswered_server_requests"),),
    "completion_after_interrupt": (("protocol", "unanswered_server_requests"),),
    "hang": (("protocol", "unanswered_server_requests"),),
    "stdout_closed": (("protocol", "unanswered_server_requests"),),
    "grandchild_holds_stdout": (("protocol", "unanswered_server_requests"),),
    "drop_turn_completed": (("protocol", "unanswered_server_requests"),),
    "overload": (("protocol", "unanswered_server_requests"),),
}


def _allowances(session: SessionTruth) -> tuple[Allowance, ...]:
    out: dict[tuple[str, str], list[str]] = {}
    for fault in session.fired:
        for contract, what in _ALLOW.get(fault.kind, ()):
            out.setdefault((contract, what), []).append(fault.kind)
    return tuple(
        Allowance(contract, what, None, "fault " + ", ".join(sorted(set(kinds))))
        for (contract, what), kinds in sorted(out.items())
    )
