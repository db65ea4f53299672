"""Hypothesis strategies for whole scenarios: model steps, faults, client actions and their truth.

Public and meant for users testing their own clients::

    from hypothesis import given
    from harness.fuzz.strategies import scenarios

    @given(scenarios())
    def test_my_client(scenario): ...

Every strategy builds values of :mod:`contracts.scenario`, so a drawn scenario dumps to a TOML
file (:func:`contracts.scenario_file.dumps`) that ``codex-harness run --scenario FILE`` plays.
The ``[expect]`` of a drawn scenario is derived from its steps by :mod:`harness.fuzz.truth`, never
by running a client. Client actions are placed only where their outcome does not depend on task
scheduling (see :mod:`harness.fuzz.walk`), so the truth is exact.

Shapes shrink well: lists of steps, small integers, and ``sampled_from`` lists whose first
element is the simplest choice.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any, TypeVar

from hypothesis import reject
from hypothesis import strategies as st

from contracts.scenario import (
    DECISIONS,
    DEFAULT_INPUT,
    ClientAction,
    ClientPlan,
    CommandItem,
    Fault,
    FileChangeItem,
    MessageItem,
    ModelItem,
    ModelResponse,
    ReasoningItem,
    Scenario,
    ServerConfig,
    TurnScript,
    Usage,
    default_approval_policy,
)
from contracts.scenario_file import split_text
from harness.fuzz.table import AT_INTERRUPT, FUZZED, PASSIVE, Placement, check_kinds, effect, params
from harness.fuzz.truth import RacyScenario, SessionTruth, derive, walk_turn
from harness.fuzz.walk import Step, TurnTruth, landing_for, steerable, windows

T = TypeVar("T")

__all__ = [
    "client_budgets",
    "command_items",
    "file_change_items",
    "message_items",
    "model_responses",
    "reasoning_items",
    "scenarios",
    "turn_scripts",
    "usages",
]

# Strategies built once: hypothesis validates a strategy on first use, which dominates small draws.
_TEXT = st.sampled_from(("Hello!", "Hello from the model.", "a", "Done, the tests pass. é", "x" * 40))
#: A legal agent message over 64 KiB (its item/completed is one frame that size, and so is a delta of it in fewer
#: than two chunks): a client's line cap is for hostile lines far beyond it (large_message_1mib plays 1 MiB).
LARGE_TEXT = "large frame 0123" * 5000
#: Whether a message is that large: its own draw (one in four), so that it comes whatever else the turn holds.
_LARGE = st.sampled_from((False, False, False, True))
_LARGE_TEXT = st.just(LARGE_TEXT)
_CHUNKS = st.integers(1, 6)
_DELAYS = st.sampled_from((0, 10, 100, 1000))
_DURATIONS = st.sampled_from((0, 50, 1000, 30000))
_BOOL = st.booleans()
_COMMANDS = st.sampled_from(("echo hi", "ls", "sleep 30", "cat x.txt"))
_OUTPUTS = st.sampled_from(("", "hi\n"))
_EXIT = st.sampled_from((0, 1))
_PATHS = st.sampled_from(("hello.txt", "src/a.py"))
_ENDS = st.sampled_from(("completed", "completed", "http_error", "failed", "disconnect"))
_INPUTS = st.sampled_from((DEFAULT_INPUT, "Run the tests"))
_DECISION = st.sampled_from(DECISIONS)
_WHAT = st.sampled_from(("none", "cancel", "steer", "cancel_on_approval", "cancel_on_approval"))
_TWO = st.sampled_from((False, False, False, False, True))
#: Kinds a passive point can carry, simplest first (hypothesis shrinks towards the front): from the table.
PASSIVE_FAULTS: tuple[str, ...] = tuple(dict.fromkeys(p.kind for p in PASSIVE))
#: Kinds placed only at the interrupt, so they need a client cancel in their turn: from the table.
INTERRUPT_FAULTS: frozenset[str] = frozenset(p.kind for p in AT_INTERRUPT) - frozenset(PASSIVE_FAULTS)


@st.composite
def usages(draw: st.DrawFn) -> Usage:
    """Usage of one model response (cached <= input, reasoning <= output)."""
    inp = draw(st.integers(0, 400))
    out = draw(st.integers(0, 200))
    return Usage(input=inp, cached=draw(st.integers(0, inp)), output=out, reasoning=draw(st.integers(0, out)))


def _streamed(draw: st.DrawFn, texts: st.SearchStrategy[str] = _TEXT) -> tuple[str, tuple[str, ...], int]:
    text = draw(texts)
    chunks = draw(_CHUNKS)
    return text, split_text(text, chunks), draw(_DELAYS)


@st.composite
def message_items(draw: st.DrawFn) -> MessageItem:
    text, deltas, delay = _streamed(draw, _LARGE_TEXT if draw(_LARGE) else _TEXT)
    return MessageItem(text, deltas, delay)


@st.composite
def reasoning_items(draw: st.DrawFn) -> ReasoningItem:
    text, deltas, delay = _streamed(draw)
    return ReasoningItem(text, deltas, delay)


@st.composite
def command_items(draw: st.DrawFn) -> CommandItem:
    """A command: approved or not, quick or long-running."""
    return CommandItem(
        command=draw(_COMMANDS),
        approval=draw(_BOOL),
        output=draw(_OUTPUTS),
        exit_code=draw(_EXIT),
        duration_ms=draw(_DURATIONS),
    )


@st.composite
def file_change_items(draw: st.DrawFn) -> FileChangeItem:
    return FileChangeItem(path=draw(_PATHS), content="hello\n", approval=draw(_BOOL))


_TEXT_ITEMS = st.lists(st.one_of(message_items(), reasoning_items()), max_size=2)
_TOOL = st.one_of(command_items(), file_change_items())
_MAYBE_USAGE = st.one_of(st.none(), usages())


@st.composite
def model_responses(draw: st.DrawFn, last: bool = True, errors: bool = True) -> ModelResponse:
    """One model response: text and reasoning first, at most one tool call last (as a model emits them).

    A response that is not ``last`` in its turn calls a tool, so the model is asked again.
    """
    items: list[ModelItem] = list(draw(_TEXT_ITEMS))
    if not last or draw(_BOOL):
        tool = draw(_TOOL)
        items.append(tool)
        if draw(_TWO):
            # Two approvals at once: both requests are out before either is answered.
            items[-1] = replace(tool, approval=True)
            items.append(replace(draw(_TOOL), approval=True))
    end = "completed"
    if last and errors and not any(isinstance(i, CommandItem | FileChangeItem) for i in items):
        end = draw(_ENDS)
    usage = draw(_MAYBE_USAGE) if end == "completed" else None
    return ModelResponse(items=tuple(items), usage=usage, end=end)  # type: ignore[arg-type]


@st.composite
def turn_scripts(draw: st.DrawFn, max_responses: int = 3, errors: bool = True) -> TurnScript:
    """A turn's model side: 0 responses (the default reply) or a chain of tool calls and a last reply."""
    count = draw(st.integers(0, max_responses))
    responses = tuple(draw(model_responses(last=i == count - 1, errors=errors)) for i in range(count))
    return TurnScript(input=draw(_INPUTS), responses=responses)


@st.composite
def client_budgets(draw: st.DrawFn) -> dict[str, int]:
    return {
        "interrupt_budget_ms": draw(st.sampled_from((2000, 500, 150))),
        # Odd deadlines never fall on a step (steps are multiples of 5 ms): the deadline never races.
        "turn_timeout_ms": draw(st.sampled_from((60001, 20001))),
        "teardown_ms": draw(st.sampled_from((3000, 1000))),
    }


#: The budgets of a plan on the real clock (a process target): short, so that an example a client hangs in ends
#: soon (its deadline follows them, harness.fuzz.outside.example_deadline_s), yet far above what the fake takes to
#: answer a request (milliseconds) or to start (a second or two on a loaded machine).
REAL_TIME_BUDGETS: dict[str, int] = {
    "interrupt_budget_ms": 2000,
    "turn_timeout_ms": 5001,
    "request_timeout_ms": 5000,
    "startup_timeout_ms": 10000,
}


# --- faults ------------------------------------------------------------------------------------


#: Counted points and the walk's step that counts them.
_COUNTED = {"delta": "delta", "item_started": "item_started", "usage": "usage", "approval_pending": "approval"}


def _points(steps: list[Step], placement: Placement, first_turn: bool) -> list[tuple[str, int]]:
    """The points of a walked turn where ``placement`` may attach (reached, outcome certain), in its order."""
    ends = any(s.kind == "end" for s in steps)
    out: list[tuple[str, int]] = []
    for point in placement.place.where:
        if point == "start":
            out.append(("start", 1))
        elif point in _COUNTED:
            out += [(point, s.n) for s in steps if s.kind == _COUNTED[point]]
        elif point in ("end", "after_end"):
            out += [(point, 1)] if ends else []
        elif point == "initialize":
            out += [("initialize", 1)] if first_turn else []
        else:
            raise ValueError(f"fault {placement.kind}: the fuzzer cannot place at {point}")
    return out


def _pick(draw: st.DrawFn, options: Sequence[T]) -> T:
    """``sampled_from`` for a list computed per example, without building a strategy each time."""
    return options[draw(st.integers(0, len(options) - 1))]


#: Whether a turn that another follows gets a fault after its end of its own draw (one in three).
_AT_BOUNDARY = st.sampled_from((False, False, True))


def _passive_faults(
    draw: st.DrawFn,
    steps: list[Step],
    allowed: tuple[Placement, ...],
    first: bool,
    max_faults: int,
    real_time: bool = False,
    followed: bool = False,
) -> list[tuple[Fault, Placement]]:
    """Up to ``max_faults`` faults at the points of a walked turn. ``followed``: another turn comes after this one.

    The boundary between two turns is where a client must tell one turn's frames from the next's (a late delta of
    turn 1 is not turn 2's text), and a turn followed by another that ends on its own is a rare shape among the
    draws (two turns, no ending fault in the first): such a turn gets an after-end placement of its own draw, in
    the table's order and weights, not only the after-end share of the drawn count.
    """
    placed: list[tuple[Fault, Placement]] = []
    used: set[tuple[str, int]] = set()
    count = draw(st.integers(0, max_faults))
    boundary = [p for p in allowed if "after_end" in p.place.where] if followed else []
    if boundary and any(s.kind == "end" for s in steps) and draw(_AT_BOUNDARY):
        placement = _pick(draw, boundary)
        used.add(("after_end", 1))
        placed.append((Fault(placement.kind, "after_end", 1, params(draw, placement, 2000, real_time)), placement))
        count -= 1
    for _ in range(count):
        placement = _pick(draw, allowed)
        points = [p for p in _points(steps, placement, first) if p not in used]
        if not points:
            continue
        at, n = _pick(draw, points)
        used.add((at, n))
        placed.append((Fault(placement.kind, at, n, params(draw, placement, 2000, real_time)), placement))
        if placement.ending:
            allowed = tuple(p for p in allowed if not p.ending)
    return placed


# --- client actions ----------------------------------------------------------------------------

_TRIGGER_STEP = {"started": "started", "delta": "delta", "item_started": "item_started"}


def _triggers(steps: list[Step], do: str, real_time: bool = False) -> list[ClientAction]:
    """Actions of kind ``do`` that land on a wait of the walked turn (no race with the server).

    A steer lands only on the model's streaming waits (walk.steerable), never on a fault's.
    On real time (a process target) only waits without end are safe: a held approval, silence.
    """
    if real_time:
        if do == "steer":
            return []
        held = [a for a in _triggers(steps, do) if a.at == "approval_pending"]
        silent = [s.t for s in steps if s.kind == "silence" and not s.approval_held]
        return held + [ClientAction(turn=1, do="cancel", at="delay", delay_ms=t + 1000) for t in silent[:1]]
    out: list[ClientAction] = []
    steer = do == "steer"
    counted = {"started": ("started",), "delta": ("delta",), "item_started": ("user_item", "item_started")}
    for at, kinds in counted.items():
        n = 0
        for s in steps:
            if s.kind not in kinds:
                continue
            n += 1
            action = ClientAction(turn=1, do=do, at=at, n=1 if at == "started" else n)  # type: ignore[arg-type]
            landing = landing_for(steps, action)
            if landing is None:
                continue
            wait = steps[landing.index]
            if steer and not steerable(wait, landing.t):
                continue
            out.append(action)
    if not steer:
        # Held back, the approval is where the interrupt lands, unless a fault strikes at the same point first.
        out += [
            ClientAction(turn=1, do="cancel", at="approval_pending", n=s.n)
            for i, s in enumerate(steps)
            if s.kind == "approval" and (i + 1 == len(steps) or steps[i + 1].safe)
        ]
    for start, end in windows(steps, steer=steer):
        t = start + (end - start) // 2 if end is not None else start + 1000
        out.append(ClientAction(turn=1, do=do, at="delay", delay_ms=t))  # type: ignore[arg-type]
    return out


#: On the real clock, the wait a cancel at a streaming trigger lands in: far longer than a client takes to read
#: one frame and send one request, even on a loaded machine, so the cancel lands there every time.
REAL_TIME_WAIT_MS = 2000


def _slow_first_stream(script: TurnScript) -> TurnScript:
    """``script`` whose first model item, when it streams (a message, reasoning), waits :data:`REAL_TIME_WAIT_MS`
    before each delta: the turn is still streaming when a cancel sent at `started`, the item's start or a delta
    reaches the server (the fixed catalogue's ``cancel_at_started`` waits 200 ms a delta, on the real clock too)."""
    if not script.responses or not script.responses[0].items:
        return script
    first = script.responses[0].items[0]
    if not isinstance(first, MessageItem | ReasoningItem) or not first.deltas:
        return script
    response = replace(
        script.responses[0], items=(replace(first, delay_ms=REAL_TIME_WAIT_MS), *script.responses[0].items[1:])
    )
    return replace(script, responses=(response, *script.responses[1:]))


def _lands_on_slow_stream(steps: list[Step], action: ClientAction) -> bool:
    """Whether ``action`` (a trigger, not a delay) lands in a streaming wait of :data:`REAL_TIME_WAIT_MS`."""
    if action.at not in _TRIGGER_STEP:
        return False
    landing = landing_for(steps, action)
    if landing is None:
        return False
    wait = steps[landing.index]
    return wait.kind == "sleep" and wait.origin == "stream" and wait.ms >= REAL_TIME_WAIT_MS


_TWICE_CANCEL = st.sampled_from((False, True))


def _twice(draw: st.DrawFn, chosen: tuple[ClientAction, ...], scripts: list[TurnScript]) -> tuple[ClientAction, ...]:
    """The actions, a turn's cancel sometimes asked twice at once (a user pressing cancel twice).

    Both are due at the same moment, so the outcome is the first's: the interrupt ends the turn once, and the
    second is answered with it or refused once the turn is over (a client may send both, or one; the plan
    check asks for one). Not where a fault strikes at the interrupt: the second request would find the turn
    still running (the fault's course) and land an interrupt of its own.
    """
    out: list[ClientAction] = []
    for action in chosen:
        out.append(action)
        script = scripts[action.turn - 1]
        if action.do == "cancel" and not any(f.at == "interrupt" for f in script.faults) and draw(_TWICE_CANCEL):
            out.append(action)
    return tuple(out)


def _interrupt_faults(truth: TurnTruth, last: bool, ending_left: bool) -> list[Placement]:
    """Placements that may attach to this turn's interrupt (the cancel or the deadline), certain in outcome."""
    landing = truth.cancel
    if landing is None or (truth.steps[landing.index].kind == "silence" and not landing.approval_held):
        return []
    return [
        p
        for p in AT_INTERRUPT
        if (landing.approval_held or not p.place.held_approval) and (not p.ending or (last and ending_left))
    ]


def reached_only(
    turns: tuple[TurnScript, ...],
    plan: ClientPlan,
    truth: SessionTruth,
    config: ServerConfig | None = None,
    release: str | None = None,
) -> tuple[tuple[TurnScript, ...], SessionTruth]:
    """The turns keeping only the faults the walk says strike, and their truth.

    Passive faults are placed before the client's actions, on the plain walk: a cancel (or the turn
    deadline) landing earlier, an earlier fatal fault, or a failed handshake cuts their point off.
    Such a fault tests nothing, and the run reports it as a scenario error (``fault_not_struck``),
    so the generator leaves it out. A fault that never strikes changes nothing before the place
    where the turn stops, so the truth of the rest is the same (derived again to keep it exact).
    """
    kept = tuple(
        replace(script, faults=tuple(f for f in script.faults if any(f is g for g in walked.fired)))
        for script, walked in zip(turns, truth.turns, strict=True)
    )
    if all(len(a.faults) == len(b.faults) for a, b in zip(kept, turns, strict=True)):
        return turns, truth
    return kept, derive(kept, plan, config, release)


def _walk(
    script: TurnScript, plan: ClientPlan, turn: int, offset: int, config: ServerConfig, release: str | None
) -> TurnTruth:
    """:func:`walk_turn`, dropping the example (not failing it) in the unexpected case of a race."""
    try:
        return walk_turn(script, plan, turn, offset, config, release)
    except RacyScenario:
        reject()


def _quick(script: TurnScript) -> TurnScript:
    """The script with every wait cut to at most 10 ms (streaming) / 50 ms (commands), for real time."""

    def item(i: ModelItem) -> ModelItem:
        if isinstance(i, MessageItem | ReasoningItem):
            return replace(i, delay_ms=min(i.delay_ms, 10))
        if isinstance(i, CommandItem):
            return replace(i, duration_ms=min(i.duration_ms, 50))
        return i

    responses = tuple(replace(r, items=tuple(item(i) for i in r.items)) for r in script.responses)
    return replace(script, responses=responses)


def scenarios(
    max_turns: int = 2,
    faults: bool = True,
    actions: bool = True,
    fault_kinds: tuple[str, ...] = FUZZED,
    max_faults: int = 2,
    name: str = "fuzz",
    real_time: bool = False,
    release: str | None = None,
) -> st.SearchStrategy[Scenario]:
    """A whole scenario with its ``[expect]``.

    ``fault_kinds`` restricts the faults drawn (for example to what a target can produce); a kind the
    fuzzer cannot draw (``FaultSpec.not_fuzzed``, or unknown) is refused with :class:`~harness.fuzz.table.NotFuzzable`;
    ``faults=False`` / ``actions=False`` draw model steps only / no client actions.
    ``real_time=True`` draws for a target on the real clock (``fake-process``): short waits, and client
    actions only where no timing can race (a held approval, a silent server).
    ``release``: the release profile the fake will play (None: the default release). Its table says what each tool
    call does under the drawn settings, so the walk and the fake agree; the scenario names it.
    """
    return _scenarios(max_turns, faults, actions, check_kinds(fault_kinds), max_faults, name, real_time, release)


@st.composite
def _scenarios(
    draw: st.DrawFn,
    max_turns: int,
    faults: bool,
    actions: bool,
    fault_kinds: tuple[str, ...],
    max_faults: int,
    name: str,
    real_time: bool,
    release: str | None,
) -> Scenario:
    count = draw(st.integers(1, max_turns))
    scripts = [draw(turn_scripts()) for _ in range(count)]
    if real_time:
        scripts = [_quick(t) for t in scripts]
    needs_approval = sum(1 for t in scripts for r in t.responses for i in r.items if getattr(i, "approval", False))
    # The server settings are fixed by the model side: every walk below plays the tool calls as the fake will.
    config = ServerConfig(approval_policy=default_approval_policy(scripts))
    decisions: tuple[str, ...] = ()
    default = "accept"
    if needs_approval:
        if draw(st.booleans()):
            decisions = tuple(draw(st.lists(_DECISION, min_size=1, max_size=needs_approval)))
        else:
            default = draw(_DECISION)
    budgets: dict[str, Any] = REAL_TIME_BUDGETS if real_time else draw(client_budgets())  # plan fields by name
    plan = ClientPlan(approval=default, approvals=decisions, **budgets)
    two_at_once = any(
        sum(1 for i in r.items if getattr(i, "approval", False)) > 1 for t in scripts for r in t.responses
    )
    if two_at_once:
        # With two requests out, the answers' order is the client's scheduling: a "cancel" among them would
        # make what runs before the turn ends depend on it. Other decisions commute.
        plan = replace(
            plan,
            approval="decline" if plan.approval == "cancel" else plan.approval,
            approvals=tuple("decline" if d == "cancel" else d for d in plan.approvals),
        )
    budget = plan.interrupt_budget_ms

    # Passive faults, placed on points the plain walk reaches.
    passive = tuple(p for p in PASSIVE if p.kind in fault_kinds)
    ending_used = False
    offset = 0
    for i in range(count):
        last = i == count - 1
        walked = _walk(scripts[i], plan, i + 1, offset, config, release)
        offset += walked.approvals_seen
        if not faults or not passive:
            continue
        allowed = tuple(p for p in passive if (last and not ending_used) or not p.ending)
        if not allowed:
            continue
        placed = _passive_faults(draw, walked.steps, allowed, i == 0, max_faults, real_time, followed=not last)
        if any(effect(f.kind).uses_decisions for f, _ in placed):
            # Its answer may take a decision index in some runners: keep decisions uniform.
            plan = replace(plan, approvals=())
        ending_used = ending_used or any(p.ending for _, p in placed)
        scripts[i] = replace(scripts[i], faults=tuple(f for f, _ in placed))

    # Client actions, placed on waits of the walk with the faults in.
    chosen: list[ClientAction] = []
    if actions:
        offset = 0
        for i in range(count):
            # Earlier turns' actions are in the plan: a cancel there changes which decisions this turn gets.
            walked = _walk(scripts[i], plan, i + 1, offset, config, release)
            if i > 0 and draw(_BOOL):
                chosen.append(ClientAction(turn=i + 1, do="resume"))
            what = draw(_WHAT)
            options = (
                [] if what == "none" else _triggers(walked.steps, "steer" if what == "steer" else "cancel", real_time)
            )
            if two_at_once:
                options = [a for a in options if a.at != "approval_pending"]  # the other request would race
            if what == "cancel_on_approval":
                # Held approvals are where interrupt faults bite hardest: give them their own weight.
                options = [a for a in options if a.at == "approval_pending"]
            # On the real clock a turn with no held approval has nothing for that share (most turns): it goes to a
            # cancel at a streaming trigger instead, so a cancel (and a cancel asked twice) is drawn in most turns
            # that stream, not only in the few with an approval.
            unheld = what == "cancel_on_approval" and not options
            if real_time and (what == "steer" or unheld or (what == "cancel" and draw(_BOOL))):
                # A cancel at a streaming trigger (`started`, an item, a delta), made certain on the real clock; it
                # takes the steer's share too, which the real clock never draws. The trigger's kind is drawn first,
                # then its occurrence: `started` (one) is as likely as the deltas (many).
                slowed = _slow_first_stream(scripts[i])
                steps = _walk(slowed, plan, i + 1, offset, config, release).steps
                streaming = [a for a in _triggers(steps, "cancel") if _lands_on_slow_stream(steps, a)]
                kinds = list(dict.fromkeys(a.at for a in streaming))
                if kinds:
                    at = _pick(draw, kinds)
                    scripts[i], options = slowed, [a for a in streaming if a.at == at]
            if options:
                chosen.append(replace(_pick(draw, options), turn=i + 1))
            plan = replace(plan, actions=tuple(chosen))
            offset += _walk(scripts[i], plan, i + 1, offset, config, release).approvals_seen
    plan = replace(plan, actions=tuple(chosen))

    # Faults at the interrupt, for turns whose cancel lands cleanly.
    if faults:
        offset = 0
        for i in range(count):
            walked = _walk(scripts[i], plan, i + 1, offset, config, release)
            offset += walked.approvals_seen
            placements = _interrupt_faults(walked, i == count - 1, not ending_used)
            if any(f.at == "after_end" for f in scripts[i].faults):
                placements = []  # both would strike at the interrupt: their order is the fake's business
            placements = [p for p in placements if p.kind in fault_kinds]
            # A held approval is rare and is where most interrupt faults apply: always give it one there.
            if not placements or (walked.cancel is not None and not walked.cancel.approval_held and not draw(_BOOL)):
                continue
            placement = _pick(draw, placements)
            fault = Fault(placement.kind, "interrupt", 1, params(draw, placement, budget, real_time))
            ending_used = ending_used or placement.ending
            scripts[i] = replace(scripts[i], faults=(*scripts[i].faults, fault))

    if actions:
        plan = replace(plan, actions=_twice(draw, plan.actions, scripts))

    turns = tuple(scripts)
    try:
        truth = derive(turns, plan, config, release)
        turns, truth = reached_only(turns, plan, truth, config, release)
    except RacyScenario:
        # A combination the walk cannot judge exactly (should not happen: the placement above avoids
        # races); dropping it keeps the truth exact. tests/unit/test_fuzz_strategies.py bounds how often.
        reject()
    kinds_text = ", ".join(sorted({f.kind for t in turns for f in t.faults})) or "no faults"
    return Scenario(
        name=name,
        description=f"generated: {count} turn(s), {kinds_text}",
        turns=turns,
        client=plan,
        expect=truth.expect,
        config=config,
        release=release,
    )


__all__ += ["INTERRUPT_FAULTS", "PASSIVE_FAULTS"]
