"""Cancellation is bounded: cancel→Result within the interrupt budget plus the teardown bound, always;
against a server that honours the interrupt, the client's own overhead (cancel→Result minus the
server's interrupt→turn/completed, both on the wire) stays small.
"""

from __future__ import annotations

from typing import Any

from contracts.checks.base import Check, Maker, Status
from contracts.checks.registry import Contract, Rule
from contracts.checks.wire_index import WireIndex
from contracts.record import SessionRecord, TurnResult

NAME = "latency"
REFERENCE = "docs/client-rules.md §2"
#: The ids of its checks (other modules name a check by these).
TURN_N_CANCEL_TO_RESULT = "turn N cancel→Result"
TURN_N_INTERRUPT_OVERHEAD = "turn N interrupt overhead"
TURN_N_INTERRUPT_LOGGED = "turn N interrupt logged"
TEARDOWN = "teardown"
CANCELLATION = "cancellation"
#: Every check here is a bound on time the client took and ended within (a client still waiting at its deadline
#: fails ``client / deadline`` or the runner's limit, both must): over a budget but ended is a ``should``.
CONTRACT = Contract(
    NAME,
    citation=REFERENCE,
    level="should",
    checks=(
        TURN_N_CANCEL_TO_RESULT,
        TURN_N_INTERRUPT_OVERHEAD,
        TURN_N_INTERRUPT_LOGGED,
        Rule(TEARDOWN, citation="docs/client-rules.md §5"),
        CANCELLATION,
    ),
    outside="cancel→Result is on the client's own clock, not on the wire; "
    "interrupts are judged by client / interrupt -> turn/completed",
)
#: The client's own share of an interrupt (cancel→Result minus interrupt→turn/completed). The
#: acceptance bound over 30 samples is 5 ms at p99; one sample gets more room for scheduler noise.
OVERHEAD_BOUND_S = 0.050
#: Slack on the teardown bound for the scheduler between steps.
TEARDOWN_SLACK_S = 0.250


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms"


def _clock(record: SessionRecord) -> str:
    return "virtual time (MockClock), not measured: " if record.virtual_time else ""


def _server_interrupt_latency(index: WireIndex, result: TurnResult) -> tuple[float | None, str]:
    """interrupt sent → turn/completed received, when the server honoured the interrupt."""
    if result.turn_id is None:
        return None, "no turn id: the client could not interrupt"
    interrupts = index.interrupts(result.turn_id)
    if not interrupts:
        return None, "no turn/interrupt on the wire"
    first = interrupts[0]
    if any("error" in frame for _, _, frame in first.answers):
        return None, "the interrupt was answered with an error"
    completions = [(pos, e) for pos, e in index.turn_completions(result.turn_id) if pos > first.pos]
    if not completions:
        return None, "the server sent no turn/completed after the interrupt"
    return completions[0][1].t - first.t, ""


def _interrupt_frames(index: WireIndex, result: TurnResult) -> list[int]:
    """Where the cancellation shows on the wire: the first turn/interrupt and the turn/completed after it."""
    if result.turn_id is None or not (interrupts := index.interrupts(result.turn_id)):
        return []
    first = interrupts[0]
    after = [pos for pos, _ in index.turn_completions(result.turn_id) if pos > first.pos]
    return [first.pos, *after[:1]]


def _interrupt_logs(record: SessionRecord) -> dict[Any, dict[str, Any]]:
    """turn id → its first "codex turn interrupted" log record (one pass, not one per turn)."""
    out: dict[Any, dict[str, Any]] = {}
    for entry in record.log:
        if entry.get("msg") == "codex turn interrupted":
            turn_id = entry.get("turn_id")
            if isinstance(turn_id, str | None):
                out.setdefault(turn_id, entry)
    return out


def _interrupt_logged(
    make: Maker, record: SessionRecord, result: TurnResult, label: str, logs: dict[Any, dict[str, Any]]
) -> Check:
    """A clean interrupt is logged as "codex turn interrupted" with its latency, as the Go client does."""
    entry = logs.get(result.turn_id)
    if entry is None:
        return make(f"{label} interrupt logged", "warn", f'{_clock(record)}no "codex turn interrupted" log record')
    latency = entry.get("latency")
    if isinstance(latency, int | float) and not isinstance(latency, bool):
        detail = f"{_clock(record)}logged with latency {_ms(float(latency))}"
        return make(f"{label} interrupt logged", "pass", detail)
    detail = f"{_clock(record)}logged without a numeric latency: {latency!r}"
    return make(f"{label} interrupt logged", "warn", detail)


@CONTRACT.judge
def check(record: SessionRecord) -> list[Check]:
    make = CONTRACT.maker(record)
    clock = _clock(record)
    index = WireIndex.build(record.wire)
    checks: list[Check] = []
    bound = record.budgets.interrupt_s + record.budgets.teardown_s
    logs = _interrupt_logs(record)
    for result in record.results:
        if result.cancel_at is None or result.ended_at is None:
            continue  # nothing cancelled, or no time for the Result (a record that does not have it)
        label = f"turn {result.index + 1}"
        elapsed = result.ended_at - result.cancel_at
        detail = (
            f"{clock}cancel→Result {_ms(elapsed)}, bound {_ms(bound)} "
            f"(interrupt budget {_ms(record.budgets.interrupt_s)} + teardown {_ms(record.budgets.teardown_s)})"
        )
        server, why = _server_interrupt_latency(index, result)
        where = _interrupt_frames(index, result)
        if server is None:
            # Nothing to subtract: only the total bound applies (the overhead check would be meaningless).
            detail += f"; the server did not honour the interrupt ({why})"
        if elapsed < 0:
            early = f"Result before the cancel ({_ms(elapsed)})"
            checks.append(make(f"{label} cancel→Result", "fail", early, at=where))
        else:
            checks.append(make(f"{label} cancel→Result", "pass" if elapsed <= bound else "fail", detail, at=where))
        if server is None:
            continue
        overhead = elapsed - server
        detail = (
            f"{clock}client overhead {_ms(overhead)} = cancel→Result {_ms(elapsed)} "
            f"- interrupt→turn/completed {_ms(server)}, bound {_ms(OVERHEAD_BOUND_S)}"
        )
        status: Status = "pass" if overhead <= OVERHEAD_BOUND_S else "fail"
        checks.append(make(f"{label} interrupt overhead", status, detail, at=where))
        checks.append(_interrupt_logged(make, record, result, label, logs))
    if record.teardown:
        start = min(s.started_at for s in record.teardown)
        end = max(s.ended_at for s in record.teardown)
        took = end - start
        limit = record.budgets.teardown_s + TEARDOWN_SLACK_S
        steps = ", ".join(f"{s.name} {_ms(s.ended_at - s.started_at)} {s.outcome}" for s in record.teardown)
        checks.append(
            make(
                "teardown",
                "pass" if took <= limit else "fail",
                f"{clock}teardown {_ms(took)}, bound {_ms(record.budgets.teardown_s)} ({steps})",
            )
        )
    if not checks:
        checks.append(make("cancellation", "skip", "no turn was cancelled and no teardown was recorded", applies=False))
    return checks
