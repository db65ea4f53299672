"""Whether the scenario itself held: every scripted fault struck (``fault_not_struck``).

A fault whose point the run never reached (``crash at delta n=3`` on a turn cut short by an earlier
fault, an interrupt fault in a turn the client never interrupts) tested nothing; the run says so as a
failing ``scenario`` check, never as a finding about the client. Judged from the record alone: the
runner notes the scenario's faults (``meta.faults``, in scenario order) and, on targets that can tell
(the fakes), which struck (``meta.faults_struck``: ``[turn, index within the turn, lines the server had
written, lines it had read]``; older records have the first two only). A ``[[methods]]`` entry's fault
(point ``request``) is noted with turn ``LEDGER_TURN`` and its position among the entries: one on a
method the client never calls fails the check too.

Not one of :data:`contracts.checks.CONTRACT_NAMES`: it yields a check only when it fails, so a run whose
scenario held has exactly the contracts' checks.
"""

from __future__ import annotations

from typing import Any

from contracts.checks.base import Check
from contracts.checks.registry import Contract
from contracts.method_overrides import LEDGER_TURN
from contracts.record import SessionRecord

NAME = "scenario"
REFERENCE = "docs/scenarios.md (Faults)"
#: The ids of its checks (other modules name a check by these).
FAULT_NOT_STRUCK = "fault_not_struck"
SCENARIO_NAME = "name"
#: ``name``: a scenario whose name is not a safe slug (the runner's, before anything is played).
CONTRACT = Contract(NAME, citation=REFERENCE, checks=(FAULT_NOT_STRUCK, SCENARIO_NAME), suite="scenario")


def scripted_faults(record: SessionRecord) -> list[tuple[int, int, dict[str, Any]]]:
    """(turn, index within the turn, fault) for each fault the runner noted; a fault with its own
    ``index`` (a ``[[methods]]`` entry's: its position among the entries) keeps it."""
    seen: dict[int, int] = {}
    out = []
    for fault in record.meta.get("faults") or []:
        if not isinstance(fault, dict) or not isinstance(fault.get("turn"), int):
            continue
        turn = fault["turn"]
        index = seen.get(turn, 0)
        seen[turn] = index + 1
        if isinstance(fault.get("index"), int):
            index = fault["index"]
        out.append((turn, index, fault))
    return out


def _where(turn: int, fault: dict[str, Any]) -> str:
    if turn == LEDGER_TURN:
        n = fault.get("n")
        which = "every request" if n == 0 else f"request n={n}"
        return f"[[methods]] {fault.get('method')}: {fault.get('kind')} at {which}"
    return f"turn {turn + 1}: {fault.get('kind')} at {fault.get('at')} n={fault.get('n')}"


def struck_faults(struck_list: list[Any]) -> dict[tuple[int, int], tuple[int, int] | None]:
    """``meta.faults_struck`` read: (turn, index) → (lines the server had written, lines it had read) when
    struck, None for a record from before the ledger counted lines."""
    out: dict[tuple[int, int], tuple[int, int] | None] = {}
    for x in struck_list:
        if isinstance(x, list | tuple) and len(x) in (2, 4) and all(isinstance(v, int) for v in x):
            out.setdefault((x[0], x[1]), (x[2], x[3]) if len(x) == 4 else None)
    return out


@CONTRACT.judge
def check(record: SessionRecord) -> list[Check]:
    struck_list = record.meta.get("faults_struck")
    if not isinstance(struck_list, list):
        return []  # the target cannot tell (real binary) or the record predates the ledger
    struck = struck_faults(struck_list)
    missed = [
        _where(turn, f)
        for turn, index, f in scripted_faults(record)
        if (turn, index) not in struck
    ]
    if not missed:
        return []
    make = CONTRACT.maker(record)
    detail = (
        f"{len(missed)} scripted fault(s) never struck, the run never reached their point: {'; '.join(missed)}"
        " (a scenario error, not a finding about the client)"
    )
    return [make("fault_not_struck", "fail", detail[:2000])]
