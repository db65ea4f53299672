"""The fault registry's declarative half: points, kinds, their parameters and bounds, one table.

Every fault kind is one :class:`FaultSpec`: its default point, the points where it has an effect,
its parameters with type, default and bounds, whether only a fake can produce it, one line saying
what happens, and what the fuzzer needs (``contracts.fault_fuzz``): what the kind changes (its
effect, which the fuzzer's truth predicts), where the fuzzer places it and how it narrows the
declared bounds when it draws parameters, each narrowing with its reason. Everything else is
derived from :data:`FAULTS`: the kind list, the default points, the scenario-file and builder
validation (:func:`check_fault`), the real target's skip rule (:func:`fake_only`), the fuzzer's
strategies, placements and truth (``harness.fuzz.table``) and the tables in ``docs/scenarios.md``
(:data:`GENERATED`; a test asserts the docs hold exactly those tables). The fake's half, one strike
function per kind, is ``fake_server.faults``; it refuses to import when a kind here has no strike
function there. An entry that says nothing to the fuzzer, or contradicts itself, is refused when the
table is built (:func:`contracts.fault_fuzz.check_spec`).

It lives in ``contracts`` (not in the fake) because loading a scenario file must validate faults
without importing the fake, and the fuzzer's truth must be derived without it (layers point one way).

Adding a kind: one entry here (with its effect and placements, or ``not_fuzzed`` and why), one
``@strikes("kind")`` function in ``fake_server.faults`` (a websocket kind gives there what the
connection does, ``on_socket`` or ``on_upgrade``; an interrupt course sets a field of its
``Course``), and ``python -m contracts.faults`` to print the docs tables to paste. No other module
names a kind (tests/unit/test_fault_registry.py fails on one that does). Nothing under ``harness/fuzz``
changes, unless the kind's effect needs a course the fuzzer's walk does not know yet
(``contracts.fault_fuzz.COURSES``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from contracts import probe_refs, transport
from contracts.exitcodes import InvalidInput
from contracts.fault_fuzz import Draw, Effect, Place, check_spec, fuzz_table

MIB: Final = 1024 * 1024
#: Scripted time a scenario may ask for in one place: the in-process run's own bound (1 h, virtual).
MAX_DELAY_MS: Final = 3_600_000
#: Repetitions of one fault's output (lines, notifications, duplicates).
MAX_REPEAT: Final = 10_000
MAX_METHOD_CHARS: Final = 256
#: Occurrence numbers of a point (``n``) and of a client trigger.
MAX_OCCURRENCE: Final = 1_000_000


# --- points --------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PointSpec:
    """A point of the timeline a fault attaches to.

    ``scope``: ``session`` points are counted over the session and take their faults from the first
    ``[[turns]]`` table; ``turn`` points are counted within each turn. ``once``: the point comes at
    most once per turn (``n`` > 1 can never strike). ``counted``: how often it comes can be counted
    from the turn's scripted items (see ``contracts.scenario_rules``).
    """

    name: str
    scope: Literal["session", "turn"]
    description: str
    once: bool = False
    counted: bool = False


POINTS: Final[dict[str, PointSpec]] = {
    p.name: p
    for p in (
        PointSpec("initialize", "session", "the initialize request arrives (faults of the first turn)"),
        PointSpec("start", "turn", "right after `turn/started`", once=True),
        PointSpec("delta", "turn", "after the n-th agent message delta of the turn", counted=True),
        PointSpec("item_started", "turn", "after the n-th model item's `item/started` of the turn", counted=True),
        PointSpec("approval_pending", "turn", "once the n-th approval request of the turn is sent", counted=True),
        PointSpec("usage", "turn", "at the n-th usage update of the turn", counted=True),
        PointSpec("interrupt", "turn", "when `turn/interrupt` arrives"),
        PointSpec("end", "turn", "where the turn would end (before idle and `turn/completed`)", once=True),
        PointSpec("after_end", "turn", "after `turn/completed`", once=True),
        PointSpec(
            "request",
            "session",
            "a request of the `[[methods]]` entry's method arrives, before it is answered (only `[[methods]]`)",
        ),
    )
}
FAULT_POINTS: Final[tuple[str, ...]] = tuple(POINTS)

#: Points a turn's faults attach to (``request`` faults are declared on a ``[[methods]]`` entry).
_ALL: Final = tuple(p for p in FAULT_POINTS if p != "request")
#: Where process-level kinds act: every point, the requests of ``[[methods]]`` entries too.
_ANYWHERE: Final = FAULT_POINTS
_IN_TURN: Final = tuple(p for p in FAULT_POINTS if POINTS[p].scope == "turn")
#: Points inside the turn's program, where it can wait.
_PROGRAM: Final = ("start", "delta", "item_started", "approval_pending", "end")


# --- parameters -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Param:
    """One parameter: its type, default (None: required) and bounds (``min``/``max`` for integers and,
    for strings, their length in characters), or its ``choices``. ``why`` says what the bound protects."""

    name: str
    type: type
    default: Any
    min: int | None = None
    max: int | None = None
    choices: tuple[str, ...] = ()
    why: str = ""

    @property
    def required(self) -> bool:
        return self.default is None

    def expected(self) -> str:
        """What a valid value is, in the words an error message uses."""
        if self.type is bool:
            return "true or false"
        if self.choices:
            return "one of " + ", ".join(self.choices)
        if self.type is int:
            return f"an integer between {self.min} and {self.max}"
        return f"a string of {self.min} to {self.max} characters"

    def problem(self, value: Any) -> str | None:
        """None when ``value`` is valid, else what was expected."""
        if isinstance(value, bool) != (self.type is bool) or not isinstance(value, self.type):
            return self.expected()
        if self.choices and value not in self.choices:
            return self.expected()
        size = len(value) if isinstance(value, str) else value if self.type is int and isinstance(value, int) else None
        if size is not None and not (self.min or 0) <= size <= (size if self.max is None else self.max):
            return self.expected()
        return None

    def bounds_text(self) -> str:
        """The docs table's cell: name, default and bounds."""
        if self.type is bool:
            shown = f"`{self.name}` (bool, {str(self.default).lower()})"
        elif self.choices:
            shown = f"`{self.name}` (`{self.default}`: {', '.join(self.choices)})"
        else:
            default = "required" if self.required else f'"{self.default}"' if self.type is str else _human(self.default)
            unit = " chars" if self.type is str else ""
            shown = f"`{self.name}` ({default}; {_human(self.min)}..{_human(self.max)}{unit})"
        return shown


def _human(value: Any) -> str:
    if isinstance(value, int) and not isinstance(value, bool) and value >= MIB and value % MIB == 0:
        return f"{value // MIB} MiB"
    if isinstance(value, int) and not isinstance(value, bool) and value >= 10_000:
        return f"{value:_}"
    return str(value)


def _delay(name: str, default: int | None, why: str = "scripted time; the in-process run's own bound") -> Param:
    return Param(name, int, default, 0, MAX_DELAY_MS, why=why)


def _count(default: int, why: str = "output repeated that many times") -> Param:
    return Param("count", int, default, 1, MAX_REPEAT, why=why)


def _method(default: str) -> Param:
    return Param("method", str, default, 1, MAX_METHOD_CHARS, why="a method name")


# --- kinds ----------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class FaultSpec:
    """One fault kind: where it acts and with which parameters (for the loader and the fake), and what
    the fuzzer needs (``contracts.fault_fuzz``): ``effect`` (what it changes, for the fuzzer's truth),
    ``fuzz`` (where and how it is drawn) or ``not_fuzzed`` (why it never is), and ``slow`` (why a fast
    fuzz run leaves it out). An entry the fuzzer could not handle is refused when the table is built."""

    kind: str
    default_point: str
    points: tuple[str, ...]  # where the kind has an effect; anywhere else is refused at load
    description: str  # one line: what happens
    params: tuple[Param, ...] = ()
    fake_only: bool = True  # only a fake app-server can produce it: the real target skips the scenario
    effect: Effect | None = None
    fuzz: tuple[Place, ...] = ()
    not_fuzzed: str = ""
    slow: str = ""
    #: the transports it acts on (``run --transport``); a scenario with it is skipped on the others
    transports: tuple[str, ...] = transport.WIRE
    #: the parameter counting the agent message deltas the kind adds to its turn, which a client's counted
    #: triggers see too (``contracts.scenario_rules``); "": none
    adds_deltas: str = ""
    param_map: Mapping[str, Param] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "param_map", {p.name: p for p in self.params})
        assert self.default_point in self.points, self.kind
        assert not self.adds_deltas or self.adds_deltas in self.param_map, self.kind
        check_spec(self)

    @property
    def defaults(self) -> dict[str, Any]:
        return {p.name: p.default for p in self.params}


# What faults legitimately cause, as (contract, kind of violation): see Effect.allows.
_FRAMES_INVALID: Final = ("schema", "server_frames_invalid")
_UNANSWERED: Final = ("protocol", "unanswered_server_requests")
_USAGE_INCONSISTENT: Final = ("usage", "server_usage_inconsistent")
#: Where harmless output is drawn: the turn's start and every delta and item start the walk reaches.
_SPREAD: Final = ("start", "delta", "item_started")
_COUNT_2: Final = Draw("count", "each copy is one more frame for the client; two show the rule", max=2)
_CRASH_DRAWS: Final = (
    Draw("exit_code", "failure statuses (0 reads as a clean exit); three stand for the range", values=(1, 2, 101)),
)
_KNOWN_NAME: Final = "another name could be a method the client knows, which the truth does not model"
_SOCKETS: Final = ("ws", "unix")
_TRANSPORT_ONLY: Final = "a websocket fault; the fuzzer plays stdio"

FAULTS: Final[dict[str, FaultSpec]] = {
    s.kind: s
    for s in (
        FaultSpec(
            "delayed_completion",
            "end",
            _PROGRAM,
            "the turn waits `delay_ms` at the point (at `end`: its completion comes that much later)",
            (_delay("delay_ms", None),),
            effect=Effect("wait", delay="delay_ms"),
            fuzz=(
                Place(
                    ("end",),
                    rank=7,
                    draws=(
                        Draw(
                            "delay_ms",
                            "multiples of 10 ms keep every step off the odd turn deadlines; on a process target "
                            "the wait is real time",
                            values=(10, 100, 1000, 5000),
                            real_time=(10, 100),
                        ),
                    ),
                ),
            ),
        ),
        FaultSpec(
            "completion_after_interrupt",
            "interrupt",
            ("interrupt",),
            "`{}` now; idle + `turn/completed` after `delay_ms`, or never",
            (_delay("delay_ms", 0), Param("never", bool, False)),
            effect=Effect("late_completion", delay="delay_ms", never="never", allows=(_UNANSWERED,)),
            fuzz=(
                Place(
                    ("interrupt",),
                    rank=0,
                    draws=(
                        Draw("delay_ms", "a clean completion, far from the kill", budget=(0, 0.25)),
                        Draw("never", "this placement completes within the budget", keep=True),
                    ),
                ),
                Place(
                    ("interrupt",),
                    rank=4,
                    draws=(Draw("delay_ms", "the client must kill, far from a clean completion", budget=(2,)),),
                    ending=True,
                    why="past the budget (or never) the client kills the server: the session ends",
                ),
            ),
        ),
        FaultSpec(
            "interrupt_ignored",
            "interrupt",
            ("interrupt",),
            "the interrupt is never answered and the turn runs on",
            effect=Effect("runs_on", allows=(_UNANSWERED,)),
            fuzz=(
                Place(
                    ("interrupt",),
                    rank=6,
                    held_approval=True,
                    weight=2,
                    why="only with an approval held is the outcome certain (elsewhere the turn runs on and may "
                    "end within the budget); held approvals are rare, so it is offered twice",
                ),
            ),
        ),
        FaultSpec(
            "interrupt_delayed",
            "interrupt",
            ("interrupt",),
            "the interrupt lands `delay_ms` later (the turn runs on until then); a `turn/interrupt` arriving "
            "meanwhile is answered `{}` with it, as the real binary answers two sent back to back",
            (_delay("delay_ms", 500),),
            not_fuzzed="the turn runs on for `delay_ms` after the interrupt, which the walk does not play (the "
            "fuzzer's second cancel comes with the first, and is refused once the turn is over); `interrupt_twice` "
            "covers it",
        ),
        FaultSpec(
            "interrupt_answer_missing",
            "interrupt",
            ("interrupt",),
            "the turn is interrupted but the `{}` answer is never sent",
            effect=Effect("unanswered", server_trace="unjudged"),
            fuzz=(Place(("interrupt",), rank=3),),
        ),
        FaultSpec(
            "duplicate_usage",
            "usage",
            ("usage",),
            "the usage update is sent `count` more times",
            (_count(1, "duplicates sent"),),
            effect=Effect("mark", allows=(_USAGE_INCONSISTENT,)),
            fuzz=(Place(("usage",), rank=5, draws=(_COUNT_2,)),),
        ),
        FaultSpec(
            "replay_usage",
            "usage",
            ("usage",),
            "an earlier turn's usage update is sent again `count` times",
            (_count(1, "replays sent"),),
            effect=Effect("mark", allows=(_USAGE_INCONSISTENT,)),
            fuzz=(Place(("usage",), rank=6, draws=(_COUNT_2,)),),
        ),
        FaultSpec(
            "drop_turn_completed",
            "end",
            ("start", "delta", "item_started", "approval_pending", "usage", "interrupt", "end"),
            "idle is sent, `turn/completed` never",
            effect=Effect("no_completion", server_trace="unjudged", allows=(_UNANSWERED,)),
            fuzz=(Place(("end",), rank=15),),
        ),
        FaultSpec(
            "crash",
            "delta",
            _ANYWHERE,
            "exit with `exit_code`; `mid_line` writes half a frame first",
            (Param("exit_code", int, 1, 0, 255, why="a process exit status"), Param("mid_line", bool, False)),
            effect=Effect("gone", exit="exit_code", allows=(_FRAMES_INVALID, _UNANSWERED)),
            fuzz=(
                Place(
                    ("start", "delta", "item_started", "usage", "approval_pending", "end", "after_end", "initialize"),
                    rank=11,
                    draws=_CRASH_DRAWS,
                ),
                Place(("interrupt",), rank=5, draws=_CRASH_DRAWS),
            ),
        ),
        FaultSpec(
            "hang",
            "start",
            _ANYWHERE,
            "alive but silent from here on; ignores stdin EOF (SIGTERM and kill end it)",
            effect=Effect("silent", server_trace="unjudged", allows=(_UNANSWERED,)),
            fuzz=(Place((*_SPREAD, "end"), rank=12),),
        ),
        FaultSpec(
            "partial_line",
            "delta",
            _ANYWHERE,
            "half a frame with no newline, then alive but silent as `hang` (a reader must not wait for the rest "
            "of the line without bound)",
            effect=Effect("silent", server_trace="unjudged", allows=(_FRAMES_INVALID, _UNANSWERED)),
            fuzz=(Place(("start", "delta"), rank=17),),
            transports=("stdio",),
        ),
        FaultSpec(
            "stdout_closed",
            "start",
            _ANYWHERE,
            "stdout closes; the server keeps reading and exits 0 on EOF",
            effect=Effect("gone", server_trace="unjudged", allows=(_UNANSWERED,)),
            fuzz=(Place(("start", "delta"), rank=13),),
        ),
        FaultSpec(
            "grandchild_holds_stdout",
            "start",
            _ALL,
            "a grandchild inherits stdout and holds it up to `hold_ms` after the server exits",
            (Param("hold_ms", int, 30000, 0, 600_000, why="a real `sleep` process on fake-process"),),
            effect=Effect("mark", ends_session=True, allows=(_UNANSWERED,)),
            fuzz=(
                Place(
                    ("start",),
                    rank=16,
                    draws=(
                        Draw(
                            "hold_ms",
                            "the hold outlasts the server's exit; on a process target a real process waits it",
                            values=(1000, 5000),
                            real_time=(1000,),
                        ),
                    ),
                ),
            ),
        ),
        FaultSpec(
            "garbage_lines",
            "start",
            _ANYWHERE,
            "`count` non-JSON lines of `text` on stdout",
            (_count(3, "lines written"), Param("text", str, "this is not JSON", 0, 1024, why="one line")),
            effect=Effect("noise", allows=(_FRAMES_INVALID,)),
            fuzz=(
                Place(
                    _SPREAD,
                    rank=0,
                    draws=(
                        Draw("count", "each line is one more for the client to skip; three show the rule", max=3),
                        Draw("text", "any non-JSON text has the same effect", keep=True),
                    ),
                ),
            ),
        ),
        FaultSpec(
            "oversized_line",
            "start",
            _ALL,
            "one line of `size` bytes",
            (Param("size", int, 40 * MIB, 64, 128 * MIB, why="the line is built in memory"),),
            effect=Effect("gone", kills=True, allows=(_FRAMES_INVALID, _UNANSWERED)),
            fuzz=(
                Place(
                    ("start", "delta"),
                    rank=14,
                    draws=(
                        Draw(
                            "size",
                            "the default is over the client's 32 MiB line cap, which is what it tests; a bigger "
                            "line only costs time",
                            keep=True,
                        ),
                    ),
                ),
            ),
            slow="a 40 MiB line per example (about a fifth of a run's time); the built-in `oversized_line` "
            "scenario covers it",
        ),
        FaultSpec(
            "invalid_utf8",
            "start",
            _ALL,
            "`count` lines with invalid UTF-8",
            (_count(1, "lines written"),),
            effect=Effect("noise", allows=(_FRAMES_INVALID,)),
            fuzz=(Place(_SPREAD, rank=2, draws=(_COUNT_2,)),),
        ),
        FaultSpec(
            "stderr_flood",
            "start",
            _ALL,
            "that much stderr",
            (Param("bytes", int, MIB, 1, 64 * MIB, why="written in one step"),),
            effect=Effect("noise"),
            fuzz=(
                Place(
                    _SPREAD,
                    rank=3,
                    draws=(
                        Draw("bytes", "a little, and a pipe buffer's worth; a MiB costs time", values=(1024, 65536)),
                    ),
                ),
            ),
        ),
        FaultSpec(
            "unknown_notification",
            "start",
            _ALL,
            "`count` notifications of an unknown method",
            (_method("x/unknownNotification"), _count(1, "notifications sent")),
            effect=Effect("noise", allows=(_FRAMES_INVALID,)),
            fuzz=(Place(_SPREAD, rank=1, draws=(Draw("method", _KNOWN_NAME, keep=True), _COUNT_2)),),
        ),
        FaultSpec(
            "unknown_server_request",
            "start",
            _ALL,
            "a server request of an unknown method",
            (_method("x/unknownRequest"),),
            effect=Effect("mark", fails_turn=True, uses_decisions=True, allows=(_FRAMES_INVALID,)),
            fuzz=(Place(("start",), rank=9, draws=(Draw("method", _KNOWN_NAME, keep=True),)),),
        ),
        FaultSpec(
            "resolved_order",
            "interrupt",
            ("interrupt",),
            "where `serverRequest/resolved` goes relative to `turn/completed` at interrupt",
            (Param("order", str, "after", choices=("before", "after", "never")),),
            effect=Effect("mark", allows=(_UNANSWERED,)),
            fuzz=(Place(("interrupt",), rank=1, held_approval=True, why="it orders the held request's resolution"),),
        ),
        FaultSpec(
            "late_events",
            "after_end",
            _IN_TURN,
            "`count` deltas for the turn's last message (after the end: for the finished turn)",
            (_count(2, "deltas sent"),),
            effect=Effect("mark", allows=(_FRAMES_INVALID, ("protocol", "late_events"))),
            adds_deltas="count",
            fuzz=(Place(("after_end",), rank=8, draws=(_COUNT_2,)),),
        ),
        FaultSpec(
            "duplicate_response_id",
            "start",
            _IN_TURN,
            "the last response (at `start`: the turn/start answer) is sent again",
            effect=Effect("noise", allows=(("protocol", "unknown_response_id"),)),
            fuzz=(Place(_SPREAD, rank=4),),
        ),
        FaultSpec(
            "overload",
            "start",
            _ANYWHERE,
            "the next `count` requests get `-32001 Server overloaded; retry later.` "
            "(at `initialize`: that request too)",
            (Param("count", int, 1, 1, 1000, why="requests refused"),),
            effect=Effect("mark", server_trace="unjudged", allows=(_UNANSWERED,)),
            fuzz=(
                Place(
                    ("initialize",),
                    rank=10,
                    draws=(Draw("count", "the refused handshake fails every turn; more add nothing", keep=True),),
                    why="at the handshake the outcome is certain (every turn fails); later it refuses whichever "
                    "request the client sends next, which the walk does not model",
                ),
            ),
        ),
        FaultSpec(
            "no_answer",
            "request",
            ("request",),
            "the request is never answered (the server stays up and answers the next ones)",
            not_fuzzed="a fault of a `[[methods]]` entry's request; generated scenarios script no `[[methods]]`",
        ),
        FaultSpec(
            "slow_reader",
            "start",
            _ALL,
            "the server reads nothing for `pause_ms` (what the client writes backs up: backpressure); "
            "it still writes",
            (_delay("pause_ms", 2000, why="real time on a process target"),),
            not_fuzzed="its outcome depends on how much the client writes while it waits, which the walk does not "
            "model; `slow_reader` covers it on every transport",
        ),
        FaultSpec(
            "ws_close",
            "delta",
            _ANYWHERE,
            "the websocket connection ends here: a close frame (`frame`, code 1001) or a drop without one; the "
            "server process stays up",
            (Param("frame", bool, False),),
            not_fuzzed=_TRANSPORT_ONLY,
            transports=_SOCKETS,
        ),
        FaultSpec(
            "ws_ping_silent",
            "initialize",
            _ANYWHERE,
            "from here on the server answers no ping (the real binary answers each twice)",
            not_fuzzed=_TRANSPORT_ONLY,
            transports=_SOCKETS,
        ),
        FaultSpec(
            "ws_fragment",
            "initialize",
            _ANYWHERE,
            "from here on every message goes out in frames of `size` bytes (continuation frames)",
            (Param("size", int, 16, 1, 16 * MIB, why="bytes per frame (the real binary reads frames up to 16 MiB)"),),
            not_fuzzed=_TRANSPORT_ONLY,
            transports=_SOCKETS,
        ),
        FaultSpec(
            "ws_refuse_upgrade",
            "initialize",
            ("initialize",),
            "the websocket upgrade is answered `status` with `body`, never 101: no session starts",
            (
                Param("status", int, 503, 400, 599, why="an HTTP refusal"),
                Param("body", str, "refused by the scenario", 0, 1024, why="one line"),
            ),
            not_fuzzed=_TRANSPORT_ONLY,
            transports=_SOCKETS,
        ),
        FaultSpec(
            "trace_unclosed_tool",
            "interrupt",
            ("start", "delta", "item_started", "approval_pending", "interrupt"),
            "the server trace never ends the pending tool, yet completes the recording (the pre-fix bug)",
            effect=Effect("mark", server_trace="violation"),
            fuzz=(Place(("interrupt",), rank=2, held_approval=True, why="it leaks the held request's tool"),),
        ),
    )
}
#: kind -> {parameter: default} (None: required), in table order.
FAULT_KINDS: Final[dict[str, dict[str, Any]]] = {k: s.defaults for k, s in FAULTS.items()}
FAULT_DEFAULT_POINT: Final[dict[str, str]] = {k: s.default_point for k, s in FAULTS.items()}


def transport_problem(kinds: Any, transport: str) -> str | None:
    """Why faults of ``kinds`` cannot act over ``transport`` (None: they all can)."""
    off = sorted({k for k in kinds if k in FAULTS and transport not in FAULTS[k].transports})
    if not off:
        return None
    where = FAULTS[off[0]].transports
    on = "a websocket" if set(where) <= set(_SOCKETS) else " or ".join(where)
    return f"fault {', '.join(off)} acts on {on}: run it with --transport {' or '.join(where)}"


def fake_only(kind: str) -> bool:
    """Whether only a fake app-server can produce ``kind`` (the real target skips such scenarios)."""
    return FAULTS[kind].fake_only


# --- validation -----------------------------------------------------------------------------------


class FaultProblem(InvalidInput, ValueError):
    """A fault that is not valid: ``key`` is the parameter (or ``kind``/``at``/``n``), ``expected`` what is."""

    def __init__(self, key: str, expected: str, got: Any = None) -> None:
        super().__init__(f"{key}: expected {expected}")
        self.key, self.expected, self.got = key, expected, got


def check_fault(kind: Any, at: Any, n: Any, params: Mapping[str, Any]) -> tuple[str, str, int, dict[str, Any]]:
    """Validate one fault against the registry; returns ``(kind, point, n, params)`` or raises
    :class:`FaultProblem`. ``at`` None: the kind's default point. Unknown parameters are refused."""
    if not isinstance(kind, str) or kind not in FAULTS:
        raise FaultProblem("kind", "one of " + ", ".join(FAULT_KINDS), kind)
    spec = FAULTS[kind]
    point = spec.default_point if at is None else at
    if not isinstance(point, str) or point not in POINTS:
        raise FaultProblem("at", "one of " + ", ".join(FAULT_POINTS), point)
    if point not in spec.points:
        raise FaultProblem("at", f"a point where fault {kind} has an effect: {', '.join(spec.points)}", point)
    if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= MAX_OCCURRENCE:
        raise FaultProblem("n", f"an integer between 1 and {MAX_OCCURRENCE}", n)
    if n > 1 and POINTS[point].once:
        raise FaultProblem("n", f"1 (point {point} comes once per turn)", n)
    for name in params:
        if name not in spec.param_map:
            known = ", ".join(spec.param_map) or "none"
            raise FaultProblem(name, f"a parameter of fault {kind} (known: {known})", params[name])
    checked: dict[str, Any] = {}
    for p in spec.params:
        if p.name not in params:
            if p.required:
                raise FaultProblem(p.name, f"a value (required by fault {kind}): {p.expected()}")
            continue
        problem = p.problem(params[p.name])
        if problem is not None:
            raise FaultProblem(p.name, f"{problem} for fault {kind}", params[p.name])
        checked[p.name] = params[p.name]
    return kind, point, n, checked


# --- the docs table -------------------------------------------------------------------------------


def markdown_table() -> str:
    """The fault table of ``docs/scenarios.md``, generated (a test asserts the docs hold exactly this)."""
    lines = [
        "| kind | parameters (default; bounds) | default point | other points | what happens |",
        "|---|---|---|---|---|",
    ]
    for spec in FAULTS.values():
        params = ", ".join(p.bounds_text() for p in spec.params)
        others = [p for p in spec.points if p != spec.default_point]
        where = "all" if spec.points in (_ALL, _ANYWHERE) else ", ".join(others) or "none"
        if spec.points == _ANYWHERE:
            where = "all, `request` too"
        real = "" if spec.fake_only else " (also on the real binary)"
        lines.append(f"| `{spec.kind}` | {params} | {spec.default_point} | {where} | {spec.description}{real} |")
    return "\n".join(lines) + "\n"


def points_table() -> str:
    lines = ["| point | counted | where |", "|---|---|---|"]
    for p in POINTS.values():
        counted = "session" if p.scope == "session" else "once per turn" if p.once else "per turn"
        lines.append(f"| `{p.name}` | {counted} | {p.description} |")
    return "\n".join(lines) + "\n"


#: The generated tables and the marker lines that fence them in ``docs/scenarios.md``.
GENERATED: Final[dict[str, Callable[[], str]]] = {
    "fault-points": points_table,
    "fault-kinds": markdown_table,
    "fault-fuzz": lambda: fuzz_table(FAULTS.values()),
    "probe-bounds": probe_refs.bounds_table,  # the probe steps' bounds live with their placeholders
}


def main() -> None:
    for name, make in GENERATED.items():
        print(f"<!-- generated: {name} (python -m contracts.faults) -->")
        print(make(), end="")
        print(f"<!-- end: {name} -->\n")


#: The kinds the fuzzer draws, and those among them that take real time (``fuzz --fast`` leaves them out); here,
#: not in harness.fuzz, so the CLI names them without importing hypothesis (an extra: ``codex-harness[fuzz]``).
FUZZED_KINDS: Final[tuple[str, ...]] = tuple(spec.kind for spec in FAULTS.values() if spec.fuzz)
SLOW_KINDS: Final[tuple[str, ...]] = tuple(spec.kind for spec in FAULTS.values() if spec.fuzz and spec.slow)


if __name__ == "__main__":
    main()

