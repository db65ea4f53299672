"""What the fuzzer needs of a fault kind, as data: what it changes (:class:`Effect`), where it is drawn
(:class:`Place`) and how its parameters are drawn from their declared bounds (:class:`Draw`).

Every :class:`~contracts.faults.FaultSpec` carries these beside its points and bounds, so the fault table
is the one home of a kind: the loader validates by it, the fake strikes by it (``fake_server.faults``),
and the fuzzer (``harness.fuzz``) generates, walks and judges by it with no per-kind code.

The effect is a small closed vocabulary (:data:`COURSES`) rather than a function, because the fuzzer
predicts a kind's effect on its own model of the timeline (``harness.fuzz.walk``), which the fake must
not import, and because data can be checked: :func:`check_spec` refuses, when the table is built, a kind
that says nothing to the fuzzer, a placement where the kind has no effect, or a draw outside the bounds
the loader enforces. A kind whose effect needs a new word adds it here and teaches the fuzzer's walk
(``harness.fuzz.walk.COURSE_RULES``, checked against :data:`COURSES` when it is imported).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal, Protocol, get_args

from contracts.exitcodes import InternalError

#: What a fault does to the course of its turn, in the fuzzer's model:
#:
#: - ``noise``: harmless lines (or stderr) around the wire; the turn goes on, and a client action racing
#:   the strike cannot change the turn's status or usage;
#: - ``mark``: frames or server state the turn's course does not depend on (duplicates, replays, a server
#:   request, refused requests, a flag for the trace); the turn goes on; at the interrupt the turn ends
#:   interrupted as usual;
#: - ``wait``: the turn waits the ``delay`` parameter's milliseconds at the point;
#: - ``no_completion``: the turn ends (idle) but ``turn/completed`` never comes;
#: - ``gone``: the server cannot be read from here on (it exits, closes stdout or writes an unreadable
#:   line); at the interrupt: nothing answers it;
#: - ``silent``: the server lives but says nothing more;
#: - at the interrupt only: ``late_completion``: answered now, ``turn/completed`` after the ``delay``
#:   parameter (or ``never``); ``runs_on``: never answered, the turn goes on; ``unanswered``: the turn
#:   ends interrupted but the interrupt request is never answered.
Course = Literal["noise", "mark", "wait", "no_completion", "gone", "silent", "late_completion", "runs_on", "unanswered"]
COURSES: Final[tuple[str, ...]] = get_args(Course)
#: Courses after which the session cannot carry on past the fault's turn.
ENDING_COURSES: Final = frozenset({"no_completion", "gone", "silent", "runs_on", "unanswered"})
#: Courses that mean something only when the interrupt arrives.
INTERRUPT_COURSES: Final = frozenset({"late_completion", "runs_on", "unanswered"})
#: Points the fuzzer's walk can find in a turn it models (``request`` belongs to ``[[methods]]``).
PLACEABLE: Final = ("start", "delta", "item_started", "usage", "approval_pending", "end", "after_end", "initialize")
ServerTrace = Literal["judged", "unjudged", "violation"]


@dataclass(frozen=True, slots=True)
class Effect:
    """What a fault changes, for the fuzzer's truth (``harness.fuzz.walk`` and ``truth``).

    ``delay``/``never``/``exit`` name the parameters the course reads. ``kills``: the client must kill
    the server (it cannot read it any more). ``fails_turn``: the client answers the fault's server request
    with an error, which fails a turn that would complete (docs/client-rules.md §3). ``ends_session``: the
    session cannot carry on past the turn, whatever the course. ``server_trace``: ``unjudged`` when the
    fake's shutdown after the fault is not pinned against the real binary (the server trace is not
    judged), ``violation`` when the fault breaks the server trace on purpose. ``allows``: what the fault
    legitimately causes, as (contract, kind of violation), counts left open (the fuzzer judges the client;
    exact counts of the fake's noise belong to the fake's tests). ``uses_decisions``: a client may answer
    the fault's request through its approval policy, taking a decision of the plan, so the fuzzer keeps
    the plan's decisions uniform.
    """

    course: Course
    delay: str = ""
    never: str = ""
    exit: str = ""
    kills: bool = False
    fails_turn: bool = False
    ends_session: bool = False
    server_trace: ServerTrace = "judged"
    allows: tuple[tuple[str, str], ...] = ()
    uses_decisions: bool = False

    @property
    def ending(self) -> bool:
        """The session cannot carry on past the fault's turn."""
        return self.ends_session or self.course in ENDING_COURSES


@dataclass(frozen=True, slots=True)
class Draw:
    """How the fuzzer draws one parameter, narrower than its declared bounds, and ``why``.

    A parameter without a :class:`Draw` is drawn over its whole declared bounds (``st.integers(min_value=
    param.min, max_value=param.max)``, booleans, the choices with the default first). Here: ``min``/``max``
    narrow the integer range; ``values`` are the values drawn (the first is the simplest, where hypothesis
    shrinks to); ``budget`` are multiples of the client's interrupt budget (what a value must stay far
    from); ``real_time`` the values on the real clock (a process target); ``keep``: left at its default
    (not written). A single value is not drawn.
    """

    param: str
    why: str
    min: int | None = None
    max: int | None = None
    values: tuple[Any, ...] = ()
    budget: tuple[float, ...] = ()
    real_time: tuple[Any, ...] | None = None
    keep: bool = False


@dataclass(frozen=True, slots=True)
class Place:
    """One way the fuzzer places a kind: at the points ``where`` its walk reaches (in this order: hypothesis
    shrinks a choice towards the front), or at the interrupt (``where == ("interrupt",)``: a turn whose
    cancel lands cleanly).

    ``rank``: where the kind stands among the others drawn at such points, simplest first (hypothesis
    shrinks towards the front). ``draws``: narrowed parameters. ``ending``: placed in the last turn only,
    once a scenario (None: the effect's :attr:`Effect.ending`; set it when the draws decide, with ``why``).
    ``held_approval``: at the interrupt only while an approval is pending (held back by the client).
    ``weight``: how many times the choice is offered (a rare placement weighed up so it is reached).
    """

    where: tuple[str, ...]
    rank: int
    draws: tuple[Draw, ...] = ()
    ending: bool | None = None
    held_approval: bool = False
    weight: int = 1
    why: str = ""

    @property
    def at_interrupt(self) -> bool:
        return self.where == ("interrupt",)


class Param(Protocol):
    """What the checks read of a parameter (``contracts.faults.Param``; named here, not imported: the table
    imports this module to check its entries as it is built)."""

    @property
    def name(self) -> str: ...
    @property
    def type(self) -> type: ...
    @property
    def min(self) -> int | None: ...
    @property
    def max(self) -> int | None: ...
    @property
    def choices(self) -> tuple[str, ...]: ...
    @property
    def required(self) -> bool: ...
    def problem(self, value: Any) -> str | None: ...


class FaultSpec(Protocol):
    """What the checks read of a fault kind's entry (``contracts.faults.FaultSpec``)."""

    @property
    def kind(self) -> str: ...
    @property
    def points(self) -> tuple[str, ...]: ...
    @property
    def params(self) -> tuple[Param, ...]: ...
    @property
    def param_map(self) -> Mapping[str, Param]: ...
    @property
    def effect(self) -> Effect | None: ...
    @property
    def fuzz(self) -> tuple[Place, ...]: ...
    @property
    def not_fuzzed(self) -> str: ...
    @property
    def slow(self) -> str: ...


class FaultTableError(InternalError, ValueError):
    """A fault kind whose fuzz description contradicts its own entry (or says nothing to the fuzzer)."""


def ending(spec: FaultSpec, place: Place) -> bool:
    """Whether ``place`` puts ``spec``'s kind last (the session cannot carry on past it)."""
    assert spec.effect is not None
    return spec.effect.ending if place.ending is None else place.ending


def check_spec(spec: FaultSpec) -> None:
    """Refuse an entry the fuzzer could not handle exactly: raises :class:`FaultTableError`."""
    kind = spec.kind
    if not spec.fuzz and not spec.not_fuzzed:
        raise FaultTableError(f"fault {kind}: no fuzz placement and no not_fuzzed reason")
    if spec.fuzz and spec.not_fuzzed:
        raise FaultTableError(f"fault {kind}: both fuzz placements and a not_fuzzed reason")
    if spec.fuzz and spec.effect is None:
        raise FaultTableError(f"fault {kind}: placed by the fuzzer but no effect says what it changes")
    effect = spec.effect
    if effect is not None:
        for name in (effect.delay, effect.never, effect.exit):
            if name and name not in spec.param_map:
                raise FaultTableError(f"fault {kind}: the effect reads parameter {name!r}, which it does not have")
        if effect.course == "wait" and not effect.delay:
            raise FaultTableError(f"fault {kind}: a wait names its delay parameter")
        if effect.course == "late_completion" and not (effect.delay and effect.never):
            raise FaultTableError(f"fault {kind}: a late completion names its delay and never parameters")
    for place in spec.fuzz:
        _check_place(spec, place)


def _check_place(spec: FaultSpec, place: Place) -> None:
    kind, effect = spec.kind, spec.effect
    assert effect is not None
    if not place.where:
        raise FaultTableError(f"fault {kind}: a placement with no point")
    outside = [p for p in place.where if p not in spec.points]
    if outside:
        raise FaultTableError(f"fault {kind}: placed at {', '.join(outside)}, where it has no effect")
    if not place.at_interrupt:
        unknown = [p for p in place.where if p not in PLACEABLE]
        if unknown:
            raise FaultTableError(f"fault {kind}: the fuzzer's walk cannot place at {', '.join(unknown)}")
        if effect.course in INTERRUPT_COURSES:
            raise FaultTableError(f"fault {kind}: course {effect.course} means something only at the interrupt")
    if place.held_approval and not place.at_interrupt:
        raise FaultTableError(f"fault {kind}: held_approval applies to the interrupt only")
    if place.weight < 1:
        raise FaultTableError(f"fault {kind}: weight must be at least 1")
    if place.ending is not None and not place.why:
        raise FaultTableError(f"fault {kind}: a placement that sets ending says why")
    if place.ending is False and effect.ending:
        raise FaultTableError(f"fault {kind}: its effect ends the session; a placement cannot say otherwise")
    names = [d.param for d in place.draws]
    if len(set(names)) != len(names):
        raise FaultTableError(f"fault {kind}: a parameter drawn twice")
    for draw in place.draws:
        param = spec.param_map.get(draw.param)
        if param is None:
            raise FaultTableError(f"fault {kind}: draws parameter {draw.param!r}, which it does not have")
        _check_draw(kind, param, draw)
    for param in spec.params:
        if param.type is str and not param.choices and param.name not in names:
            raise FaultTableError(f"fault {kind}: string parameter {param.name!r} needs a declared draw")
        if param.required and any(d.param == param.name and d.keep for d in place.draws):
            raise FaultTableError(f"fault {kind}: required parameter {param.name!r} cannot keep its default")


def _check_draw(kind: str, param: Param, draw: Draw) -> None:
    where = f"fault {kind}: draw of {param.name}"
    if not draw.why:
        raise FaultTableError(f"{where} says why it narrows the bounds")
    ways = sum((draw.keep, bool(draw.values), bool(draw.budget), draw.min is not None or draw.max is not None))
    if ways != 1:
        raise FaultTableError(f"{where}: exactly one of keep, values, budget or min/max")
    if (draw.min is not None or draw.max is not None) and param.type is not int:
        raise FaultTableError(f"{where}: min/max narrow an integer")
    if draw.budget and param.type is not int:
        raise FaultTableError(f"{where}: budget multiples are integers")
    if draw.real_time is not None and not draw.real_time:
        raise FaultTableError(f"{where}: real_time lists at least one value")
    values = list(draw.values) + list(draw.real_time or ())
    low = param.min if draw.min is None else draw.min
    high = param.max if draw.max is None else draw.max
    if param.type is int:
        values += [v for v in (low, high) if v is not None]
        if low is not None and high is not None and low > high:
            raise FaultTableError(f"{where}: an empty range")
    for value in values:
        problem = param.problem(value)
        if problem is not None:
            raise FaultTableError(f"{where}: {value!r} is outside the declared bounds ({problem})")


# --- the docs table -------------------------------------------------------------------------------


def _effect_text(effect: Effect) -> str:
    named = [f"`{n}`" for n in (effect.delay, effect.never) if n]
    parts = [f"{effect.course} ({', '.join(named)})" if named else effect.course]
    if effect.exit:
        parts.append(f"exits with `{effect.exit}`")
    if effect.kills:
        parts.append("the client must kill")
    if effect.fails_turn:
        parts.append("fails a completed turn")
    if effect.ends_session:
        parts.append("ends the session")
    if effect.server_trace != "judged":
        parts.append("server trace " + ("not judged" if effect.server_trace == "unjudged" else "broken"))
    return "; ".join(parts)


def _place_text(spec: FaultSpec, place: Place) -> str:
    text = ", ".join(place.where)
    notes = [n for n, on in (("held approval", place.held_approval), ("last turn", ending(spec, place))) if on]
    if place.weight > 1:
        notes.append(f"×{place.weight}")
    return text + (f" ({', '.join(notes)})" if notes else "")


def _draw_text(param: Param, draw: Draw | None) -> str:
    if draw is None:
        return f"`{param.name}` over its bounds"
    if draw.keep:
        how = "its default"
    elif draw.values:
        how = ", ".join(str(v) for v in draw.values)
        if draw.real_time is not None:
            how += " (real time: " + ", ".join(str(v) for v in draw.real_time) + ")"
    elif draw.budget:
        how = ", ".join(f"{f:g}" for f in draw.budget) + " × the interrupt budget"
    else:
        how = f"{param.min if draw.min is None else draw.min}..{param.max if draw.max is None else draw.max}"
    return f"`{param.name}` {how}: {draw.why}"


def _draws_text(spec: FaultSpec, place: Place) -> str:
    draws = {d.param: d for d in place.draws}
    return "; ".join(_draw_text(p, draws.get(p.name)) for p in spec.params) or "no parameters"


def fuzz_table(specs: Iterable[FaultSpec]) -> str:
    """The fuzz table of ``docs/scenarios.md``: per kind, its effect, placements and how its parameters are drawn."""
    lines = [
        "| kind | effect (what the fuzzer predicts) | placed at | parameters drawn (narrowed: why) |",
        "|---|---|---|---|",
    ]
    for spec in specs:
        if not spec.fuzz:
            lines.append(f"| `{spec.kind}` | not fuzzed: {spec.not_fuzzed} | | |")
            continue
        assert spec.effect is not None
        places = "; ".join(_place_text(spec, p) for p in spec.fuzz)
        texts = [_draws_text(spec, p) for p in spec.fuzz]
        if len(set(texts)) == 1:
            draws = texts[0]
        else:
            draws = " / ".join(f"{_place_text(spec, p)}: {t}" for p, t in zip(spec.fuzz, texts, strict=True))
        if spec.slow:
            draws += f" (`--fast` leaves it out: {spec.slow})"
        lines.append(f"| `{spec.kind}` | {_effect_text(spec.effect)} | {places} | {draws} |")
    return "\n".join(lines) + "\n"
