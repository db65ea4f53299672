"""The Result's usage equals ``[expect]`` per bucket (under duplicates, replays, cancellation and late
usage), and its buckets are consistent (reasoning inside output, counted once; nothing negative).

When ``[expect]`` declares no usage for a turn, the documented accounting is replayed over the
wire and a disagreement is a warning: derived truth is weaker than declared truth. A Result without a turn
id (an outside client that keeps none) is the turn started at its position on the wire. A Result whose usage
was not reported (``usage_unjudged``) is a skip naming why, never zeros.
"""

from __future__ import annotations

from dataclasses import fields
from typing import Any

from contracts.checks.base import Check
from contracts.checks.client_run import wire_turns
from contracts.checks.registry import Contract, Rule
from contracts.checks.terminal_status import completed_after_cancel
from contracts.checks.wire_index import WireIndex
from contracts.record import SessionRecord
from contracts.usage import UsageBuckets

NAME = "usage"
REFERENCE = "docs/client-rules.md §4"
CONTRACT = Contract(
    NAME,
    citation=REFERENCE,
    checks=(
        Rule("turn N buckets consistent", citation="docs/client-rules.md §4.3"),
        "turn N usage",
        # Informational: reasoning is a part of output, and [expect] declaring none is not a rule a client breaks.
        Rule("turn N reasoning", level="should", citation="docs/client-rules.md §4.3"),
        # The server's own numbers (cached > input, reasoning > output): a finding about the target, never the client.
        Rule("server usage consistent", level="should", citation="docs/protocol.md §4"),
        "usage",
    ),
)
BILLED = ("input", "cache_read", "cache_write", "output")
_WIRE = ("inputTokens", "cachedInputTokens", "cacheWriteInputTokens", "outputTokens", "reasoningOutputTokens")


def _show(b: UsageBuckets) -> str:
    text = ", ".join(f"{name} {getattr(b, name)}" for name in BILLED)
    return text + (f" (reasoning {b.reasoning})" if b.reasoning else "")


def _differences(got: UsageBuckets, expected: UsageBuckets) -> list[str]:
    diffs = [
        f"{n} {getattr(got, n)} != {getattr(expected, n)}" for n in BILLED if getattr(got, n) != getattr(expected, n)
    ]
    if expected.reasoning and got.reasoning != expected.reasoning:
        diffs.append(f"reasoning {got.reasoning} != {expected.reasoning}")
    return diffs


def _breakdown(value: Any) -> dict[str, int] | None:
    if not isinstance(value, dict):
        return None
    return {k: int(value.get(k) or 0) for k in _WIRE if isinstance(value.get(k, 0), int | float | type(None))}


def wire_usage(index: WireIndex, turn_id: str) -> UsageBuckets | None:
    """The turn's usage by the documented rule: first ``last``, then non-negative deltas of ``total``."""
    accepted: list[tuple[dict[str, int], dict[str, int]]] = []
    for _, entry in index.turn_frames("s2c", "thread/tokenUsage/updated", turn_id):
        params = entry.frame.get("params") if isinstance(entry.frame, dict) else None
        if not isinstance(params, dict):
            continue
        usage = params.get("tokenUsage")
        if not isinstance(usage, dict):
            continue
        last, total = _breakdown(usage.get("last")), _breakdown(usage.get("total"))
        if last is None or total is None:
            continue
        accepted.append((last, total))
    if not accepted:
        return None
    counted = dict(accepted[0][0])
    previous = accepted[0][1]
    for _, total in accepted[1:]:
        for key in _WIRE:
            # a field that went down is a counter reset: its new value counts
            diff = total[key] - previous[key]
            counted[key] += diff if diff >= 0 else total[key]
        previous = total
    return UsageBuckets.from_breakdown(counted)


def _turn_by_order(turns: list[dict[str, Any]], index: int) -> str | None:
    turn_id = turns[index]["id"] if 0 <= index < len(turns) else None
    return turn_id if isinstance(turn_id, str) else None


#: turn/completed's status on the wire -> the Result status that reports it
_REPORTS = {"completed": "completed", "interrupted": "aborted", "failed": "failed"}


def _outcome_on_wire(index: WireIndex, turn_id: str | None) -> str | None:
    """The Result status that says what the server's (first) turn/completed of the turn says; None without one."""
    completions = index.turn_completions(turn_id) if turn_id else []
    if not completions:
        return None
    frame = completions[0][1].frame or {}
    params = frame.get("params") if isinstance(frame.get("params"), dict) else {}
    turn = params.get("turn") if isinstance(params, dict) else None
    return _REPORTS.get(turn.get("status")) if isinstance(turn, dict) else None


def _consistency(got: UsageBuckets) -> list[str]:
    problems = [f"{f.name} is negative ({getattr(got, f.name)})" for f in fields(got) if getattr(got, f.name) < 0]
    if got.reasoning > got.output:
        problems.append(f"reasoning {got.reasoning} > output {got.output}: output must include reasoning")
    return problems


def _wire_consistency(index: WireIndex) -> list[str]:
    problems = []
    for _, entry in index.frames("s2c", "thread/tokenUsage/updated"):
        params = entry.frame.get("params") if isinstance(entry.frame, dict) else None
        usage = params.get("tokenUsage") if isinstance(params, dict) else None
        if not isinstance(usage, dict):
            continue
        for part in ("last", "total"):
            b = _breakdown(usage.get(part))
            if b is None:
                continue
            if b["cachedInputTokens"] > b["inputTokens"]:
                problems.append(f"t={entry.t:.3f} {part}: cachedInputTokens > inputTokens")
            if b["reasoningOutputTokens"] > b["outputTokens"]:
                problems.append(f"t={entry.t:.3f} {part}: reasoningOutputTokens > outputTokens")
    return problems


@CONTRACT.judge
def check(record: SessionRecord) -> list[Check]:
    make = CONTRACT.maker(record)
    index = WireIndex.build(record.wire)
    turns_on_wire = wire_turns(index)
    checks: list[Check] = []
    for result in sorted(record.results, key=lambda r: r.index):
        label = f"turn {result.index + 1}"
        if result.usage_unjudged:
            # An outside client that reports no usage has none to judge: zeros would fail it for silence.
            checks.append(make(f"{label} usage", "skip", f"not judged: {result.usage_unjudged}"))
            continue
        got = result.total_usage()
        problems = _consistency(got)
        for model, buckets in result.usage.items():
            problems += [f"{model}: {p}" for p in _consistency(buckets)]
        checks.append(
            make(
                f"{label} buckets consistent",
                "fail" if problems else "pass",
                "; ".join(problems) if problems else _show(got),
            )
        )
        declared = record.expect.turns[result.index] if result.index < len(record.expect.turns) else None
        expected = declared.usage if declared is not None else None
        taken = _outcome_on_wire(index, result.turn_id or _turn_by_order(turns_on_wire, result.index))
        if (
            declared is not None
            and expected is not None
            and result.status not in declared.statuses
            and result.status == taken
        ):
            # The client reports the outcome the server gave the turn, not the one [expect] declares (terminal_status
            # judges that, and allows it where the server completed the turn after the client's cancel): the
            # declared usage is the other course's; the usage of the turn that happened is what the wire says.
            turn_id = result.turn_id or _turn_by_order(turns_on_wire, result.index)
            truth = (wire_usage(index, turn_id) if turn_id else None) or UsageBuckets()
            diffs = _differences(got, truth)
            raced = " after the client's cancel" if completed_after_cancel(index, result) else ""
            detail = (
                f"got {_show(got)}; the server's usage of this turn {_show(truth)} (it ended {taken}{raced}, as "
                f"reported; [expect] declares {_show(expected)} for {' or '.join(declared.statuses)})"
            )
            verdict = ("; ".join(diffs) + " — " if diffs else "") + detail
            checks.append(make(f"{label} usage", "fail" if diffs else "pass", verdict))
            continue
        if expected is not None:
            diffs = _differences(got, expected)
            detail = f"got {_show(got)}; [expect] {_show(expected)}"
            checks.append(
                make(
                    f"{label} usage", "fail" if diffs else "pass", ("; ".join(diffs) + " — " if diffs else "") + detail
                )
            )
            if not diffs and not expected.reasoning and got.reasoning:
                checks.append(
                    make(f"{label} reasoning", "warn", f"reasoning {got.reasoning} reported, [expect] declares none")
                )
            continue
        turn_id, matched = result.turn_id, ""
        if not turn_id:
            # A client that reports no turn id (many keep none) ran its turns in order: its Result is the turn
            # started at the same position on the wire.
            turn_id = _turn_by_order(turns_on_wire, result.index)
            matched = f" (turn {result.index + 1} on the wire by order: the Result has no turn_id)" if turn_id else ""
        derived = wire_usage(index, turn_id) if turn_id else None
        if derived is None:
            if got.is_zero():
                checks.append(
                    make(f"{label} usage", "pass", "no usage: the server reported none, [expect] declares none")
                )
            else:
                checks.append(
                    make(f"{label} usage", "warn", f"usage {_show(got)} but none for this turn on the wire{matched}")
                )
            continue
        diffs = _differences(got, derived)
        checks.append(
            make(
                f"{label} usage",
                "warn" if diffs else "pass",
                f"{'; '.join(diffs) + ' — ' if diffs else ''}got {_show(got)}; derived from the wire {_show(derived)} "
                f"([expect] declares none){matched}",
            )
        )
    wire_problems = _wire_consistency(index)
    if wire_problems:
        ok_allowed = record.expect.allowance(NAME, "server_usage_inconsistent") is not None
        checks.append(
            make(
                "server usage consistent",
                "pass" if ok_allowed else "warn",
                "; ".join(wire_problems[:3]) + (" (allowed by [expect])" if ok_allowed else ""),
            )
        )
    if not checks:
        checks.append(make("usage", "skip", "no Result to judge", applies=False))
    return checks
