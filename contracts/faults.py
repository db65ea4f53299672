"""The fault registry's declarative half: points, kinds, their parameters and bounds, one table.

Every fault kind is one :class:`FaultSpec`: its default point, the points where it has an effect,
its parameters with type, default and bounds, whether only a fake can produce it, and one line
saying what happens. Everything else is derived from :data:`FAULTS`: the kind list, the default
points, the scenario-file and builder validation (:func:`check_fault`), the real target's skip
rule (:func:`fake_only`) and the table in ``docs/scenarios.md`` (:func:`markdown_table`; a test
asserts the docs hold exactly that table). The fake's half, one strike function per kind, is
``fake_server.faults``; it refuses to import when a kind here has no strike function there.

It lives in ``contracts`` (not in the fake) because loading a scenario file must validate faults
without importing the fake (layers point one way).

Adding a kind: one entry here, one ``@strikes("kind")`` function in ``fake_server.faults``, and
``python -m contracts.faults`` to print the docs table to paste.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from contracts import probe_refs

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
        size = len(value) if isinstance(value, str) else value if self.type is int else None
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
    kind: str
    default_point: str
    points: tuple[str, ...]  # where the kind has an effect; anywhere else is refused at load
    description: str  # one line: what happens
    params: tuple[Param, ...] = ()
    fake_only: bool = True  # only a fake app-server can produce it: the real target skips the scenario
    param_map: Mapping[str, Param] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "param_map", {p.name: p for p in self.params})
        assert self.default_point in self.points, self.kind

    @property
    def defaults(self) -> dict[str, Any]:
        return {p.name: p.default for p in self.params}


FAULTS: Final[dict[str, FaultSpec]] = {
    s.kind: s
    for s in (
        FaultSpec(
            "delayed_completion",
            "end",
            _PROGRAM,
            "the turn waits `delay_ms` at the point (at `end`: its completion comes that much later)",
            (_delay("delay_ms", None),),
        ),
        FaultSpec(
            "completion_after_interrupt",
            "interrupt",
            ("interrupt",),
            "`{}` now; idle + `turn/completed` after `delay_ms`, or never",
            (_delay("delay_ms", 0), Param("never", bool, False)),
        ),
        FaultSpec(
            "interrupt_ignored",
            "interrupt",
            ("interrupt",),
            "the interrupt is never answered and the turn runs on",
        ),
        FaultSpec(
            "interrupt_answer_missing",
            "interrupt",
            ("interrupt",),
            "the turn is interrupted but the `{}` answer is never sent",
        ),
        FaultSpec(
            "duplicate_usage",
            "usage",
            ("usage",),
            "the usage update is sent `count` more times",
            (_count(1, "duplicates sent"),),
        ),
        FaultSpec(
            "replay_usage",
            "usage",
            ("usage",),
            "an earlier turn's usage update is sent again `count` times",
            (_count(1, "replays sent"),),
        ),
        FaultSpec(
            "drop_turn_completed",
            "end",
            ("start", "delta", "item_started", "approval_pending", "usage", "interrupt", "end"),
            "idle is sent, `turn/completed` never",
        ),
        FaultSpec(
            "crash",
            "delta",
            _ANYWHERE,
            "exit with `exit_code`; `mid_line` writes half a frame first",
            (Param("exit_code", int, 1, 0, 255, why="a process exit status"), Param("mid_line", bool, False)),
        ),
        FaultSpec(
            "hang",
            "start",
            _ANYWHERE,
            "alive but silent from here on; ignores stdin EOF (SIGTERM and kill end it)",
        ),
        FaultSpec(
            "stdout_closed",
            "start",
            _ANYWHERE,
            "stdout closes; the server keeps reading and exits 0 on EOF",
        ),
        FaultSpec(
            "grandchild_holds_stdout",
            "start",
            _ALL,
            "a grandchild inherits stdout and holds it up to `hold_ms` after the server exits",
            (Param("hold_ms", int, 30000, 0, 600_000, why="a real `sleep` process on fake-process"),),
        ),
        FaultSpec(
            "garbage_lines",
            "start",
            _ANYWHERE,
            "`count` non-JSON lines of `text` on stdout",
            (_count(3, "lines written"), Param("text", str, "this is not JSON", 0, 1024, why="one line")),
        ),
        FaultSpec(
            "oversized_line",
            "start",
            _ALL,
            "one line of `size` bytes",
            (Param("size", int, 40 * MIB, 64, 128 * MIB, why="the line is built in memory"),),
        ),
        FaultSpec(
            "invalid_utf8",
            "start",
            _ALL,
            "`count` lines with invalid UTF-8",
            (_count(1, "lines written"),),
        ),
        FaultSpec(
            "stderr_flood",
            "start",
            _ALL,
            "that much stderr",
            (Param("bytes", int, MIB, 1, 64 * MIB, why="written in one step"),),
        ),
        FaultSpec(
            "unknown_notification",
            "start",
            _ALL,
            "`count` notifications of an unknown method",
            (_method("x/unknownNotification"), _count(1, "notifications sent")),
        ),
        FaultSpec(
            "unknown_server_request",
            "start",
            _ALL,
            "a server request of an unknown method",
            (_method("x/unknownRequest"),),
        ),
        FaultSpec(
            "resolved_order",
            "interrupt",
            ("interrupt",),
            "where `serverRequest/resolved` goes relative to `turn/completed` at interrupt",
            (Param("order", str, "after", choices=("before", "after", "never")),),
        ),
        FaultSpec(
            "late_events",
            "after_end",
            _IN_TURN,
            "`count` deltas for the turn's last message (after the end: for the finished turn)",
            (_count(2, "deltas sent"),),
        ),
        FaultSpec(
            "duplicate_response_id",
            "start",
            _IN_TURN,
            "the last response (at `start`: the turn/start answer) is sent again",
        ),
        FaultSpec(
            "overload",
            "start",
            _ANYWHERE,
            "the next `count` requests get `-32001 Server overloaded; retry later.` "
            "(at `initialize`: that request too)",
            (Param("count", int, 1, 1, 1000, why="requests refused"),),
        ),
        FaultSpec(
            "no_answer",
            "request",
            ("request",),
            "the request is never answered (the server stays up and answers the next ones)",
        ),
        FaultSpec(
            "trace_unclosed_tool",
            "interrupt",
            ("start", "delta", "item_started", "approval_pending", "interrupt"),
            "the server trace never ends the pending tool, yet completes the recording (the pre-fix bug)",
        ),
    )
}
#: kind -> {parameter: default} (None: required), in table order.
FAULT_KINDS: Final[dict[str, dict[str, Any]]] = {k: s.defaults for k, s in FAULTS.items()}
FAULT_DEFAULT_POINT: Final[dict[str, str]] = {k: s.default_point for k, s in FAULTS.items()}


def fake_only(kind: str) -> bool:
    """Whether only a fake app-server can produce ``kind`` (the real target skips such scenarios)."""
    return FAULTS[kind].fake_only


# --- validation -----------------------------------------------------------------------------------


class FaultProblem(ValueError):
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
    "probe-bounds": probe_refs.bounds_table,  # the probe steps' bounds live with their placeholders
}


def main() -> None:
    for name, make in GENERATED.items():
        print(f"<!-- generated: {name} (python -m contracts.faults) -->")
        print(make(), end="")
        print(f"<!-- end: {name} -->\n")


if __name__ == "__main__":
    main()
