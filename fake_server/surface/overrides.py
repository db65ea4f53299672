"""The fake's half of ``[[methods]]`` (contracts.method_overrides): scripted answers, delays and request faults.

The engine asks :func:`find` about every request before it answers it. For the first entry of the
scenario that applies to this occurrence of the method, the engine :func:`play` s the entry after its
``delay_ms`` of scripted time: the scripted result or error is written, or the entry's fault strikes
(point ``request`` of the fault registry: ``no_answer`` leaves the request unanswered, ``crash`` exits
before answering...); an entry with only a delay lets the fake answer as usual, that much later.
"""

from __future__ import annotations

from dataclasses import dataclass

from contracts.messages import NOTSET, Request
from contracts.method_overrides import LEDGER_TURN, MethodOverride
from fake_server.faults import REGISTRY, Hit
from fake_server.world import World


@dataclass(frozen=True, slots=True)
class Scripted:
    """The ``[[methods]]`` entry that takes one request, and its position in the scenario's list."""

    position: int
    entry: MethodOverride

    @property
    def delay_ms(self) -> int:
        return self.entry.delay_ms


def find(world: World, method: str) -> Scripted | None:
    """The first entry that applies to this occurrence of ``method`` (every call counts one occurrence)."""
    overrides = world.scenario.methods
    if not overrides:
        return None
    counts = world.surface.method_counts
    counts[method] = counts.get(method, 0) + 1
    return next(
        (Scripted(i, o) for i, o in enumerate(overrides) if o.name == method and o.applies(counts[method])), None
    )


def play(world: World, request: Request, scripted: Scripted) -> bool:
    """Answer ``request`` or strike as the entry says; False when the fake is to answer it as usual."""
    box, entry = world.box, scripted.entry
    if entry.fault is not None:
        # Through the ledger, as fake_server.faults.strike does for turn faults, so ``fault_not_struck``
        # knows which [[methods]] faults the run reached.
        box.fault_struck(LEDGER_TURN, scripted.position, entry.fault)
        REGISTRY[entry.fault.kind].strike(Hit(box, None, "request"), entry.fault)
    elif entry.answer == "result":
        box.respond(request.id, entry.value)
    elif entry.answer == "error":
        error = entry.value
        box.respond_error(request.id, error["code"], error["message"], error.get("data", NOTSET))
    else:
        return False
    return True
