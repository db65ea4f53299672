"""The fault table as the fuzzer reads it: placements, parameter strategies and effects, all derived.

Nothing here names a fault kind. Each :class:`~contracts.faults.FaultSpec` says where the fuzzer places
it (:class:`~contracts.fault_fuzz.Place`), how its parameters are drawn (their declared bounds, narrowed
by :class:`~contracts.fault_fuzz.Draw`) and what it changes (:class:`~contracts.fault_fuzz.Effect`);
this module turns that into what :mod:`harness.fuzz.strategies`, :mod:`~harness.fuzz.walk` and
:mod:`~harness.fuzz.truth` use. A kind the fuzzer cannot draw or model is an error here
(:class:`NotFuzzable`), never a silent default.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache
from typing import Any, Final

from hypothesis import strategies as st

from contracts.exitcodes import InvalidInput
from contracts.fault_fuzz import Draw, Effect, Place, ending
from contracts.faults import FAULTS, FUZZED_KINDS, SLOW_KINDS, FaultSpec, Param


class NotFuzzable(InvalidInput, ValueError):
    """A fault kind the fuzzer cannot draw or model (unknown, or declared ``not_fuzzed``)."""


@dataclass(frozen=True, slots=True)
class Placement:
    """One way of placing a kind (``index``: its position in the kind's ``fuzz`` tuple)."""

    kind: str
    index: int
    place: Place
    ending: bool  # placed in the last turn only, once a scenario

    @property
    def spec(self) -> FaultSpec:
        return FAULTS[self.kind]


def _placements() -> list[Placement]:
    return [
        Placement(spec.kind, i, place, ending(spec, place))
        for spec in FAULTS.values()
        for i, place in enumerate(spec.fuzz)
    ]


def _ordered(placements: Iterable[Placement]) -> tuple[Placement, ...]:
    """Simplest first (by rank, then table order), each as often as its weight: hypothesis shrinks to the front."""
    order = {kind: i for i, kind in enumerate(FAULTS)}
    ranked = sorted(placements, key=lambda p: (p.place.rank, order[p.kind], p.index))
    return tuple(p for p in ranked for _ in range(p.place.weight))


#: Kinds the fuzzer draws, in table order.
FUZZED: Final[tuple[str, ...]] = FUZZED_KINDS
#: Kinds a fast run leaves out (``FaultSpec.slow`` says why).
SLOW: Final[tuple[str, ...]] = SLOW_KINDS
#: Placements at passive points of a turn (the walk's points), simplest first.
PASSIVE: Final = _ordered(p for p in _placements() if not p.place.at_interrupt)
#: Placements at the interrupt of a turn whose cancel lands cleanly, simplest first (weights repeated).
AT_INTERRUPT: Final = _ordered(p for p in _placements() if p.place.at_interrupt)
#: Kinds the truth reads at the interrupt (a fault of another kind there is not one the fuzzer places).
INTERRUPT_KINDS: Final = frozenset(p.kind for p in AT_INTERRUPT)


def effect(kind: str) -> Effect:
    """What ``kind`` changes, or :class:`NotFuzzable` when the table does not say."""
    spec = FAULTS.get(kind)
    if spec is None:
        raise NotFuzzable(f"unknown fault kind {kind!r}")
    if spec.effect is None:
        raise NotFuzzable(f"the fuzzer cannot model fault {kind}: {spec.not_fuzzed or 'no effect declared'}")
    return spec.effect


def check_kinds(kinds: Iterable[str]) -> tuple[str, ...]:
    """``kinds`` as given, or :class:`NotFuzzable` naming those the fuzzer cannot draw, and why."""
    kinds = tuple(kinds)
    refused = [k for k in kinds if k not in FUZZED]
    if refused:
        reasons = "; ".join(f"{k}: {FAULTS[k].not_fuzzed}" if k in FAULTS else f"{k}: unknown" for k in refused)
        raise NotFuzzable(f"the fuzzer cannot draw {', '.join(refused)} ({reasons})")
    return kinds


# --- parameters -----------------------------------------------------------------------------------

#: Built once per (placement, real time, budget): hypothesis validates a strategy on first use.
_Drawn = tuple[tuple[str, Any], ...]  # (parameter, a strategy or the one value)


def params(data: st.DrawFn, placement: Placement, budget_ms: int, real_time: bool) -> dict[str, Any]:
    """The parameters of one fault at ``placement``, drawn in the table's order (``keep``: left out)."""
    out: dict[str, Any] = {}
    for name, how in _strategies(placement.kind, placement.index, real_time, budget_ms):
        out[name] = data(how) if isinstance(how, st.SearchStrategy) else how
    return out


@cache
def _strategies(kind: str, index: int, real_time: bool, budget_ms: int) -> _Drawn:
    spec = FAULTS[kind]
    draws = {d.param: d for d in spec.fuzz[index].draws}
    out: list[tuple[str, Any]] = []
    for param in spec.params:
        how = _strategy(kind, param, draws.get(param.name), real_time, budget_ms)
        if how is not None:
            out.append((param.name, how))
    return tuple(out)


def _strategy(kind: str, param: Param, draw: Draw | None, real_time: bool, budget_ms: int) -> Any:
    """A strategy (or the one value) for ``param``; None: left at its default."""
    if draw is not None and draw.keep:
        return None
    if draw is None or draw.min is not None or draw.max is not None:
        return _over_bounds(kind, param, draw)
    if real_time and draw.real_time is not None:
        values: tuple[Any, ...] = draw.real_time
    elif draw.budget:
        values = tuple(int(budget_ms * f) for f in draw.budget)
    else:
        values = draw.values
    for value in values:
        problem = param.problem(value)
        if problem is not None:  # budget multiples are checked here, the rest when the table is built
            raise NotFuzzable(f"fault {kind}: drawn {param.name}={value!r} is outside its bounds ({problem})")
    return values[0] if len(values) == 1 else st.sampled_from(values)


def _over_bounds(kind: str, param: Param, draw: Draw | None) -> Any:
    """The declared bounds (narrowed by ``draw``'s min/max) as a strategy."""
    if param.type is bool:
        return st.booleans()
    if param.choices:
        default = param.default if param.default in param.choices else param.choices[0]
        return st.sampled_from((default, *(c for c in param.choices if c != default)))
    if param.type is int:
        low = param.min if draw is None or draw.min is None else draw.min
        high = param.max if draw is None or draw.max is None else draw.max
        return low if low == high else st.integers(min_value=low, max_value=high)
    raise NotFuzzable(f"fault {kind}: no strategy for parameter {param.name} ({param.type.__name__})")
