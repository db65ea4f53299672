"""The ground-truth model of a generated scenario: what the fake does, in order and in virtual time.

The fuzzer never learns the truth from the client. It walks the scenario the way the fake
app-server plays it (``docs/protocol.md`` §3-4, ``fake_server/engine.py``) and applies the
documented client rules (``docs/client-rules.md`` §2-4) to get each turn's Result status, usage per
bucket and the server's verdicts. Generation uses the same walk to place faults at points that are
reached and client actions at points where the outcome does not depend on task scheduling.

Conventions of the walk, per turn (times in virtual ms from the turn/start request):

- ``turn/started`` is point ``start``; each item opens with ``item/started`` (point ``item_started``);
  a message or reasoning item sleeps ``delay_ms`` before each delta (message deltas are point
  ``delta``); a tool item needing approval sends the request (point ``approval_pending``) and the
  client answers at once; an allowed command runs ``duration_ms``.
- A model response's usage is announced after its items (a tool item first finishes), one
  ``thread/tokenUsage/updated`` per response that has usage (point ``usage``). Interrupted while
  its tool is pending or running, the response's usage is announced at the interrupt, before the
  interrupt answer; interrupted while its text streams, it never is.
- A response with a tool item calls the model again (the next scripted response, else the
  follow-up); one without ends the turn (point ``end``, then idle and ``turn/completed``).

A client action "lands" where the server next waits (a sleep, a pending approval the client
holds back, silence). Between the trigger and that wait only events that change neither status
nor usage may happen; otherwise the action races the server, and the generator does not use it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace

from contracts.fault_fuzz import COURSES, Effect
from contracts.scenario import (
    ClientAction,
    ClientPlan,
    CommandItem,
    Fault,
    FileChangeItem,
    MessageItem,
    ModelResponse,
    ReasoningItem,
    ServerConfig,
    TurnScript,
    Usage,
)
from contracts.usage import UsageBuckets
from fake_server import policy, profiles
from fake_server.turns import PENDING_FLUSH_MS
from harness.fuzz.table import effect


@dataclass(frozen=True, slots=True)
class Step:
    """One thing the server does. ``kind``:

    ``started``, ``item_started``, ``delta`` (message), ``rdelta`` (reasoning), ``item_completed``,
    ``approval`` (a request, answered at once unless the client holds it back), ``usage``,
    ``sleep`` (``ms``), ``silence`` (nothing more, ever), ``end`` (the turn would end here),
    ``completed`` (turn/completed), ``fault`` (a fault strikes; ``fault`` names it).
    ``safe``: a client action racing this step cannot change status or usage.
    """

    kind: str
    t: int
    n: int = 0  # occurrence of `kind` within the turn, 1-based, for the points faults and triggers name
    ms: int = 0
    usage: Usage | None = None
    pending: Usage | None = None  # usage the server announces if interrupted here
    approval_held: bool = False  # an approval is pending here (the client holds it back)
    fault: Fault | None = None
    safe: bool = True
    r: int = 0  # the model response the step belongs to
    origin: str = ""  # for sleeps: stream | command | fault


@dataclass(slots=True)
class Landing:
    """Where a client action lands: the server is waiting at ``step`` (index ``index``)."""

    index: int
    t: int
    usage_before: tuple[Usage, ...]
    pending: Usage | None
    approval_held: bool


@dataclass(slots=True)
class TurnTruth:
    """The walk of one turn and what it implies."""

    steps: list[Step] = field(default_factory=list)
    #: completed | failed | interrupted (approval cancel) | timeout | dead (server gone or unreadable)
    outcome: str = "completed"
    status: str = "completed"  # the client's Result status
    also: tuple[str, ...] = ()  # other statuses a correct client may report ([expect.turns] also)
    server_status: str | None = "completed"  # turn/completed status the client consumes; "none": none
    usage: tuple[Usage, ...] = ()  # usages that count for the turn
    usage_known: bool = True  # False: the truth is not certain; [expect] leaves usage unchecked
    fired: list[Fault] = field(default_factory=list)  # faults that struck, in order
    killed: bool = False  # the client must kill the server (budget expired, unreadable stdout)
    crashed: Fault | None = None
    cancel: Landing | None = None  # where the client's cancel landed, None: no cancel
    cancelled_patch: bool = False  # the server's trace of that tool is not pinned (see truth._expect)
    approvals_seen: int = 0  # approval requests that arrived (decision indices consumed)
    ends_session: bool = False

    def buckets(self) -> UsageBuckets:
        return usage_buckets(self.usage)

    def points(self, kind: str) -> list[int]:
        """The occurrences ``n`` of fault point ``kind`` that the walk reaches."""
        return [s.n for s in self.steps if s.kind == _POINT_STEP.get(kind, kind)]


_POINT_STEP = {"delta": "delta", "item_started": "item_started", "approval_pending": "approval", "usage": "usage"}


def usage_buckets(usages: tuple[Usage, ...] | list[Usage]) -> UsageBuckets:
    """Buckets of the usages a turn counts (docs/client-rules.md §4.3; cache writes are always 0 here)."""
    total = UsageBuckets()
    for u in usages:
        total = total + UsageBuckets(
            input=max(0, u.input - u.cached), cache_read=u.cached, output=u.output, reasoning=u.reasoning
        )
    return total


#: The work directory a walk places relative paths in (the generator draws only relative paths).
WORKDIR = "/RUN/workdir"


def tool_outcomes(config: ServerConfig, release: str | None = None) -> Callable[[CommandItem | FileChangeItem], str]:
    """What the fake does with each tool call of a scenario under ``config`` (our client sets no approval
    settings of its own), from the table the fake reads (:mod:`fake_server.policy`): that of the release it plays
    (``release``, the scenario's; else the default release). A release learned later may answer a setting otherwise."""
    table = (profiles.get(release) if release else profiles.default()).policy()
    settings = policy.Settings(config.approval_policy, config.sandbox)
    return lambda item: policy.outcome(table, settings, item, WORKDIR)


def _is_tool(item: object) -> bool:
    return isinstance(item, CommandItem | FileChangeItem)


class Walker:
    """Builds the steps of one turn from its model script (faults are applied afterwards).

    ``hold``: session-wide approval arrivals the client holds back (it cancels instead of answering).
    """

    def __init__(
        self,
        script: TurnScript,
        plan: ClientPlan,
        approval_offset: int,
        hold: set[int],
        outcome_of: Callable[[CommandItem | FileChangeItem], str],
    ) -> None:
        self.script, self.plan, self.offset, self.hold = script, plan, approval_offset, hold
        self.outcome_of = outcome_of
        self.steps: list[Step] = []
        self.t = 0
        self.counts: dict[str, int] = {}
        self.approvals = 0
        self.outcome = "completed"
        self.r = 0  # index of the model response being played
        self.cancelled_patch = False  # a file change answered "cancel": it never completes

    def add(self, kind: str, safe: bool = True, **kw: object) -> Step:
        n = self.counts[kind] = self.counts.get(kind, 0) + 1
        step = Step(kind, self.t, n=n, safe=safe, r=self.r, **kw)  # type: ignore[arg-type]
        self.steps.append(step)
        return step

    def sleep(self, ms: int, origin: str, pending: Usage | None = None) -> None:
        if ms > 0:
            self.steps.append(Step("sleep", self.t, ms=ms, pending=pending, origin=origin, r=self.r))
            self.t += ms

    def stream(self, kind: str, deltas: tuple[str, ...], delay: int) -> None:
        for _ in deltas:
            self.sleep(delay, "stream")
            self.add(kind)

    def walk(self) -> None:
        self.add("started")
        self.add("user_item")  # the input's userMessage item/started: counted by the client, not by fault points
        self.play_from(0)

    def resume_after_steer(self, prefix: list[Step], t: int, response: int) -> None:
        """Continue where a steer stopped the program: new user message, then the next response."""
        self.steps = list(prefix)
        self.t = t
        for step in prefix:
            if step.n:
                self.counts[step.kind] = max(self.counts.get(step.kind, 0), step.n)
        self.approvals = sum(1 for step in prefix if step.kind == "approval")
        self.r = response + 1
        self.add("user_item")
        self.play_from(response + 1)

    def play_from(self, index: int) -> None:
        while True:
            self.r = index
            response = self.script.response(index)
            if self.response(response):
                return
            if not any(_is_tool(i) for i in response.items):
                break
            index += 1
        self.add("end", safe=False)
        self.add("completed", safe=False)

    def response(self, r: ModelResponse) -> bool:
        """Plays one response; True when the turn ended inside it.

        As the fake does: items stream in order, a tool item starts (and sends its approval request)
        as it streams; once the stream is done, the tools run side by side, each from its answer
        (fake_server/turns.py ``_settle_tools``).
        """
        cut = r.end != "completed"
        items = () if r.end == "http_error" else r.items  # the request itself failed: nothing streams
        tools: list[tuple[CommandItem | FileChangeItem, str | None]] = []
        for item in items:
            if isinstance(item, MessageItem):
                self.add("item_started")
                self.stream("delta", item.deltas, item.delay_ms)
                self.add("item_completed")
            elif isinstance(item, ReasoningItem):
                self.add("item_started")
                self.stream("rdelta", item.deltas, item.delay_ms)
                self.add("item_completed")
            elif not cut:
                outcome = self.outcome_of(item)
                if outcome == "reject":
                    continue  # refused before it starts: no item, no request; the model is called again
                if outcome == "review":
                    raise ValueError("a tool call the approvals reviewer decides: the walk has no rule for it")
                self.add("item_started")
                decision: str | None = None
                if outcome == "ask":
                    arrival = self.offset + self.approvals
                    self.approvals += 1
                    held = arrival in self.hold
                    self.add("approval", safe=False, pending=r.usage, approval_held=held)
                    if held:
                        # The client holds this request back and cancels: nothing follows until the interrupt.
                        self.steps.append(Step("silence", self.t, pending=r.usage, approval_held=True, r=self.r))
                        self.outcome = "held"
                        return True
                    decision = self.plan.decision(arrival)
                tools.append((item, decision))
        if cut:
            self.add("end", safe=False)  # the fake passes its "end" point on every way out of a turn
            self.add("end_failed", safe=False)
            self.add("completed", safe=False)
            self.outcome = "failed"
            return True
        decisions = [answer or "accept" for _, answer in tools]
        if "cancel" in decisions:
            self.cancelled_patch = self.cancelled_patch or any(
                isinstance(item, FileChangeItem) and d == "cancel"
                for (item, _), d in zip(tools, decisions, strict=True)
            )
            # The model is not called again; the turn ends interrupted (approval_cancel.jsonl). The generator
            # draws a cancel only where one request is out, so nothing else runs first.
            if r.usage is not None:
                self.add("usage", safe=False, usage=r.usage)
            self.add("end", safe=False)
            self.add("completed", safe=False)
            self.outcome = "interrupted"
            return True
        # Answers come at once, and the allowed commands run side by side: the longest sets the wait.
        running = [
            item.duration_ms
            for (item, _), decision in zip(tools, decisions, strict=True)
            if isinstance(item, CommandItem) and decision in ("accept", "acceptForSession")
        ]
        self.sleep(max(running, default=0), "command", pending=r.usage)
        for _ in tools:
            self.add("item_completed")
        if r.usage is not None:
            self.add("usage", safe=False, usage=r.usage)
        return False


def point_index(steps: list[Step], fault: Fault) -> int | None:
    """Index of the step after which ``fault`` strikes (``end``: before it), None when never reached."""
    at = fault.at
    for i, s in enumerate(steps):
        if at == "start" and s.kind == "started":
            return i
        if at in _POINT_STEP and s.kind == _POINT_STEP[at] and s.n == fault.n:
            return i
        if at == "end" and s.kind == "end":
            return i - 1
        if at == "after_end" and s.kind == "completed":
            return i
    return None


def apply_fault(steps: list[Step], fault: Fault) -> list[Step]:
    """Steps with ``fault`` applied at its point (unchanged when the point is not reached), by its
    effect's course (:data:`COURSE_RULES`); a kind without a declared effect is refused."""
    declared = effect(fault.kind)  # first: a kind the table does not describe is refused even if never reached
    i = point_index(steps, fault)
    if i is None:
        return steps
    t = steps[i].t if i >= 0 else 0
    strike = Step("fault", t, fault=fault, safe=declared.course == "noise")
    return COURSE_RULES[declared.course](steps[: i + 1], strike, steps[i + 1 :], declared)


def _goes_on(before: list[Step], strike: Step, after: list[Step], effect: Effect) -> list[Step]:
    return [*before, strike, *after]


def _waits(before: list[Step], strike: Step, after: list[Step], effect: Effect) -> list[Step]:
    assert strike.fault is not None
    ms = int(strike.fault.param(effect.delay))
    shifted = [replace(s, t=s.t + ms) for s in after]
    return [*before, strike, Step("sleep", strike.t, ms=ms, origin="fault"), *shifted]


def _never_completes(before: list[Step], strike: Step, after: list[Step], effect: Effect) -> list[Step]:
    rest = [s for s in after if s.kind != "completed"]
    return [*before, strike, *rest, Step("silence", strike.t)]


def _gone(before: list[Step], strike: Step, after: list[Step], effect: Effect) -> list[Step]:
    return [*before, strike]


def _silent(before: list[Step], strike: Step, after: list[Step], effect: Effect) -> list[Step]:
    return [*before, strike, Step("silence", strike.t)]


def _at_interrupt_only(before: list[Step], strike: Step, after: list[Step], effect: Effect) -> list[Step]:
    assert strike.fault is not None
    raise ValueError(
        f"fault {strike.fault.kind} ({effect.course}) acts only at the interrupt, not at {strike.fault.at}"
    )


Rule = Callable[[list[Step], Step, list[Step], Effect], list[Step]]
#: What each course of :data:`contracts.fault_fuzz.COURSES` does to the steps after the fault's point.
COURSE_RULES: dict[str, Rule] = {
    "noise": _goes_on,
    "mark": _goes_on,
    "wait": _waits,
    "no_completion": _never_completes,
    "gone": _gone,
    "silent": _silent,
    "late_completion": _at_interrupt_only,
    "runs_on": _at_interrupt_only,
    "unanswered": _at_interrupt_only,
}


def check_rules(rules: Mapping[str, Rule]) -> None:
    """A course the table may name but the walk cannot play refuses to load (not a silent default)."""
    missing = sorted(set(COURSES) - set(rules))
    if missing:
        raise ImportError(f"the fuzz walk has no rule for course(s): {', '.join(missing)}")


check_rules(COURSE_RULES)


def trigger_index(steps: list[Step], action: ClientAction) -> int | None:
    """Index of the step whose arrival triggers ``action`` (not for ``delay``), None when never reached.

    The client counts triggers per turn as it sees them: every item/started (the input's userMessage
    included), every agentMessage delta, every approval request of the turn.

    This is a second, independent reading of the trigger rules, kept on purpose: every plan player (the
    runner our client is driven by, the fake's self-check player, the careful outside client) uses the one
    interpreter, ``contracts.triggers``, and the fuzzer checks the runner's results against this truth. An
    oracle built on the interpreter it checks would move its prediction with every bug of that interpreter
    (an action counted one moment late, a userMessage item not counted, an approval held that should be
    answered) and pass it. Only the rules are shared, as written in docs/scenarios.md; that the two readings
    agree is tested (tests/unit/test_triggers.py).
    """
    if action.at == "started":
        return next((i for i, s in enumerate(steps) if s.kind == "started"), None)
    kinds = {"delta": ("delta",), "item_started": ("user_item", "item_started"), "approval_pending": ("approval",)}
    seen = 0
    for i, s in enumerate(steps):
        if s.kind in kinds[action.at]:
            seen += 1
            if seen == action.n:
                return i
    return None


def landing_for(steps: list[Step], action: ClientAction) -> Landing | None:
    """Where ``action`` lands in ``steps``, or None when it is never triggered or would race the server.

    The engine runs the steps between two waits at once, so an action triggered by a step lands on
    the next wait; a step that changes status or usage before that wait makes it a race we refuse.
    """
    if action.do == "resume":
        return None
    if action.at == "delay":
        return landing_at_time(steps, action.delay_ms)
    if action.delay_ms:
        return None  # trigger + delay: not generated (the delay would need its own window)
    start = trigger_index(steps, action)
    if start is None:
        return None
    if action.at == "approval_pending" and not steps[start].approval_held:
        return None
    for j in range(start + 1, len(steps)):
        s = steps[j]
        if s.kind in ("sleep", "silence"):
            return _landing(steps, j)
        if not s.safe:
            return None
    return None


def landing_at_time(steps: list[Step], t: int) -> Landing | None:
    for j, s in enumerate(steps):
        if s.kind == "sleep" and s.t < t < s.t + s.ms:
            return _landing(steps, j, t)
        if s.kind == "silence" and s.t < t:
            return _landing(steps, j, t)
    return None


def _landing(steps: list[Step], j: int, t: int | None = None) -> Landing:
    usage = tuple(s.usage for s in steps[:j] if s.kind == "usage" and s.usage is not None)
    s = steps[j]
    return Landing(j, s.t if t is None else t, usage, s.pending, s.approval_held)


def steerable(s: Step, at: int | None = None) -> bool:
    """A steer landing on ``s`` (at time ``at``; None: anywhere in a delay window's middle) has one outcome.

    The fake (like the real server) holds the input until the next model request: while the model streams
    that comes :data:`~fake_server.turns.PENDING_FLUSH_MS` later, when the stream is abandoned, so the
    stream's wait must last past it; during a running command the input waits for the tool, which the
    walk does not model, so only streaming waits are steered.
    """
    if s.kind != "sleep" or s.origin != "stream":
        return False
    if at is None:
        return s.ms > 2 * PENDING_FLUSH_MS + 1  # a delay trigger lands mid-window
    return at + PENDING_FLUSH_MS < s.t + s.ms


def windows(steps: list[Step], steer: bool = False) -> list[tuple[int, int | None]]:
    """The sleep windows ``(start, end)`` of a turn (end None: silent for ever), for delay triggers.

    A steer only lands in the model's streaming waits (:func:`steerable`): a fault's wait or
    silence would make its effect depend on fault state the steer does not reset.
    """
    out: list[tuple[int, int | None]] = []
    for s in steps:
        if s.kind == "sleep" and s.ms >= 2 and (not steer or steerable(s)):
            out.append((s.t, s.t + s.ms))
        elif s.kind == "silence" and not s.approval_held and not steer:
            out.append((s.t, None))
    return out
