"""The fake's half of ``[[methods]]`` (contracts.method_overrides): scripted answers, delays and request faults.

:func:`intercept` sees every request before the engine answers it. For the first entry of the
scenario that applies to this occurrence of the method it answers with the scripted result or
error, or strikes the entry's fault (point ``request`` of the fault registry: ``no_answer`` leaves
the request unanswered, ``crash`` exits before answering...), after ``delay_ms`` of scripted time;
an entry with only a delay lets the fake answer as usual, that much later.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from contracts.messages import NOTSET, Request
from contracts.method_overrides import LEDGER_TURN

if TYPE_CHECKING:
    from fake_server.engine import Engine


def _entry(engine: Engine, method: str) -> tuple[int, Any] | None:
    """The first entry that applies to this occurrence of ``method``, and its position in ``[[methods]]``."""
    overrides = engine.scenario.methods
    if not overrides:
        return None
    counts = engine.surface.method_counts
    counts[method] = counts.get(method, 0) + 1
    return next(((i, o) for i, o in enumerate(overrides) if o.name == method and o.applies(counts[method])), None)


def intercept(engine: Engine, request: Request, answer_now: Callable[[Request], None]) -> bool:
    """True when ``request`` is taken care of by a ``[[methods]]`` entry (now or later)."""
    found = _entry(engine, request.method)
    if found is None:
        return False
    position, entry = found
    box = engine.box

    def act() -> None:
        if box.silent:
            return
        if entry.fault is not None:
            _strike(engine, position, entry.fault)
        elif entry.answer == "result":
            box.respond(request.id, entry.value)
        elif entry.answer == "error":
            error = entry.value
            box.respond_error(request.id, error["code"], error["message"], error.get("data", NOTSET))
        else:
            answer_now(request)

    if entry.delay_ms:
        box.after(entry.delay_ms, act)
    else:
        act()
    return True


def _strike(engine: Engine, position: int, fault: Any) -> None:
    """Strike the entry's fault through the ledger, as :func:`fake_server.faults.strike` does for turn faults,
    so ``fault_not_struck`` knows which ``[[methods]]`` faults the run reached."""
    from fake_server.faults import REGISTRY, Hit

    engine.box.fault_struck(LEDGER_TURN, position, fault)
    REGISTRY[fault.kind].strike(Hit(engine.box, None, "request"), fault)


