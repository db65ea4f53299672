"""The Result's usage equals what the server reported of that turn on the wire, per bucket (under duplicates,
replays, cancellation and late usage), and its buckets are consistent (reasoning inside output, counted once;
nothing negative). ``[expect]`` judges the server: the usage it sent of a turn that ran the declared course.

The truth of a Result's usage is the documented accounting (docs/client-rules.md §4.2) replayed over the
server's ``thread/tokenUsage/updated`` of the turn the client played (:func:`played_turn`, the one place that
says what a turn was): whatever course the turn took (an approval the client answered, a steer it could not
send, a policy under which the server asked nothing), a correct client reports what the server said of it.
A client that declares its ``usage_style`` (input with cached tokens, the last model request only) is judged
on what a correct client of that style reports; a last-request report of a turn of several requests still
fails, as the count it gets wrong. A Result without a turn id (an outside client that keeps none) is the turn
started at its position on the wire. A Result whose usage was not reported (``usage_unjudged``) is a skip
naming why, never zeros.
"""

from __future__ import annotations

import bisect
from collections.abc import Collection
from dataclasses import dataclass, fields
from typing import Any

from contracts.checks.base import Check, Maker
from contracts.checks.client_run import wire_turns
from contracts.checks.registry import Contract, Rule
from contracts.checks.terminal_status import completed_after_cancel
from contracts.checks.wire_index import WireIndex
from contracts.expect import ExpectTurn
from contracts.jsonval import as_object
from contracts.record import SessionRecord, TurnResult
from contracts.usage import UsageBuckets

NAME = "usage"
REFERENCE = "docs/client-rules.md §4"
#: The ids of its checks (other modules name a check by these).
TURN_N_BUCKETS_CONSISTENT = "turn N buckets consistent"
TURN_N_USAGE = "turn N usage"
TURN_N_REASONING = "turn N reasoning"
TURN_N_SERVER_USAGE = "turn N server usage"
SERVER_USAGE_CONSISTENT = "server usage consistent"
USAGE = "usage"
CONTRACT = Contract(
    NAME,
    citation=REFERENCE,
    checks=(
        Rule(TURN_N_BUCKETS_CONSISTENT, citation="docs/client-rules.md §4.3"),
        TURN_N_USAGE,
        # Informational: reasoning is a part of output, and a client that reports it otherwise bills nothing wrong.
        Rule(TURN_N_REASONING, level="should", citation="docs/client-rules.md §4.3"),
        # [expect] judges the server (the fake, a release): a finding about the target, never the client.
        Rule(
            TURN_N_SERVER_USAGE,
            level="should",
            citation="docs/scenarios.md (`[expect]`: the ground truth, as literals)",
            outside="the server's usage against [expect] is a finding about the server, never an outside client's",
        ),
        # The server's own numbers (cached > input, reasoning > output): a finding about the target, never the client.
        Rule(SERVER_USAGE_CONSISTENT, level="should", citation="docs/protocol.md §4"),
        USAGE,
    ),
)
BILLED = ("input", "cache_read", "cache_write", "output")
_WIRE = ("inputTokens", "cachedInputTokens", "cacheWriteInputTokens", "outputTokens", "reasoningOutputTokens")


def _show(b: UsageBuckets, style: dict[str, str] | None = None) -> str:
    with_cache = (style or {}).get("input") == "with_cache"
    text = ", ".join(
        f"{name}{' (with cache)' if with_cache and name == 'input' else ''} {getattr(b, name)}" for name in BILLED
    )
    return text + (f" (reasoning {b.reasoning})" if b.reasoning else "")


def _differences(got: UsageBuckets, expected: UsageBuckets, unexposed: Collection[str] = ()) -> list[str]:
    """What the billed buckets get wrong (reasoning is informational: ``turn N reasoning``); a bucket the client
    does not expose (``unexposed``) is not judged."""
    return [
        f"{n} {getattr(got, n)} != {getattr(expected, n)}"
        for n in BILLED
        if n not in unexposed and getattr(got, n) != getattr(expected, n)
    ]


def _breakdown(value: Any) -> dict[str, int] | None:
    if not isinstance(value, dict):
        return None
    return {k: int(value.get(k) or 0) for k in _WIRE if isinstance(value.get(k, 0), int | float | type(None))}


@dataclass(frozen=True, slots=True)
class WireUsage:
    """A turn's usage as the server reported it: the turn's (the documented accounting), its model requests',
    and how many updates said so."""

    turn: UsageBuckets
    #: each model request's own usage, in order: the first update's ``last``, then each update whose ``total``
    #: moved (a duplicate moves nothing and is no request)
    requests: tuple[UsageBuckets, ...]
    last_request: UsageBuckets  # the ``last`` of the turn's final update: what a last-request client reports


def _usage_frame(entry: Any) -> tuple[Any, dict[str, int], dict[str, int]] | None:
    """(threadId, last, total) of a ``thread/tokenUsage/updated`` frame; None when it has no usable usage."""
    params = entry.frame.get("params") if isinstance(entry.frame, dict) else None
    if not isinstance(params, dict):
        return None
    usage = params.get("tokenUsage")
    if not isinstance(usage, dict):
        return None
    last, total = _breakdown(usage.get("last")), _breakdown(usage.get("total"))
    if last is None or total is None:
        return None
    return params.get("threadId"), last, total


def _thread_total_before(index: WireIndex, thread: Any, pos: int) -> dict[str, int] | None:
    """The ``total`` of the thread's last usage update before position ``pos`` (None: none on this wire)."""
    frames = index.frames("s2c", "thread/tokenUsage/updated")
    at = bisect.bisect_left([p for p, _ in frames], pos)
    for _, entry in reversed(frames[:at]):
        parsed = _usage_frame(entry)
        if parsed is not None and parsed[0] == thread:
            return parsed[2]
    return None


def wire_usage_detail(index: WireIndex, turn_id: str) -> WireUsage | None:
    """The turn's usage by the documented rule (first ``last``, then non-negative deltas of ``total``), per
    request too; None when the server sent no usage of the turn.

    A first update whose ``total`` is the thread's total as its previous update left it is a re-report of
    usage already counted (older releases open each model response with one, naming the new turn, its
    ``last`` the previous response's): it counts nothing."""
    accepted: list[tuple[dict[str, int], dict[str, int]]] = []
    first: tuple[int, Any] | None = None
    for pos, entry in index.turn_frames("s2c", "thread/tokenUsage/updated", turn_id):
        parsed = _usage_frame(entry)
        if parsed is None:
            continue
        if first is None:
            first = (pos, parsed[0])
        accepted.append((parsed[1], parsed[2]))
    if not accepted or first is None:
        return None
    rereport = first[1] is not None and _thread_total_before(index, first[1], first[0]) == accepted[0][1]
    counted = dict.fromkeys(_WIRE, 0) if rereport else dict(accepted[0][0])
    requests = [] if rereport else [UsageBuckets.from_breakdown(accepted[0][0])]
    previous = accepted[0][1]
    for _, total in accepted[1:]:
        step = {}
        for key in _WIRE:
            # a field that went down is a counter reset: its new value counts
            diff = total[key] - previous[key]
            step[key] = diff if diff >= 0 else total[key]
            counted[key] += step[key]
        if total != previous:
            requests.append(UsageBuckets.from_breakdown(step))
        previous = total
    turn = UsageBuckets.from_breakdown(counted)
    return WireUsage(turn, tuple(requests), UsageBuckets.from_breakdown(accepted[-1][0]))


def wire_usage(index: WireIndex, turn_id: str) -> UsageBuckets | None:
    """The turn's usage by the documented rule: first ``last``, then non-negative deltas of ``total``."""
    detail = wire_usage_detail(index, turn_id)
    return detail.turn if detail is not None else None


def _turn_by_order(turns: list[dict[str, Any]], index: int) -> str | None:
    turn_id = turns[index]["id"] if 0 <= index < len(turns) else None
    return turn_id if isinstance(turn_id, str) else None


#: turn/completed's status on the wire (looked up with whatever a peer sent) -> the Result status that reports it
_REPORTS: dict[object, str] = {"completed": "completed", "interrupted": "aborted", "failed": "failed"}


def _outcome_on_wire(index: WireIndex, turn_id: str | None) -> str | None:
    """The Result status that says what the server's (first) turn/completed of the turn says; None without one."""
    completions = index.turn_completions(turn_id) if turn_id else []
    if not completions:
        return None
    frame = completions[0][1].frame or {}
    params = as_object(frame.get("params"))
    turn = params.get("turn") if isinstance(params, dict) else None
    return _REPORTS.get(turn.get("status")) if isinstance(turn, dict) else None


@dataclass(frozen=True, slots=True)
class PlayedTurn:
    """What the server played of the turn a Result reports, as the wire says: the one truth of its usage."""

    turn_id: str | None  # None: no turn/start at the Result's place on the wire (it never reached the server)
    usage: WireUsage | None  # None: the server sent no usage of it
    outcome: str | None  # the Result status that reports the server's turn/completed; None without one
    matched: str  # how the Result was matched to the wire's turn ("" by its turn id)


def played_turn(index: WireIndex, turns_on_wire: list[dict[str, Any]], result: TurnResult) -> PlayedTurn:
    """The wire's turn of ``result``: by its turn id, else (an outside client that keeps none ran its turns in
    order) the turn started at the same position."""
    turn_id, matched = result.turn_id, ""
    if not turn_id:
        turn_id = _turn_by_order(turns_on_wire, result.index)
        matched = f" (turn {result.index + 1} on the wire by order: the Result has no turn_id)" if turn_id else ""
    detail = wire_usage_detail(index, turn_id) if turn_id else None
    return PlayedTurn(turn_id, detail, _outcome_on_wire(index, turn_id), matched)


def on_declared_course(played: PlayedTurn, declared: ExpectTurn, result: TurnResult) -> str | None:
    """Why the turn did not run the course ``[expect]`` declares (so its declared usage is not the truth of it),
    or None when it did: the server ended it with a declared status and the client did what the plan asks."""
    if result.status == "unsupported" or result.unsupported:
        return "the client reported a part of its plan unsupported"
    if played.turn_id is None:
        return "the turn never reached the server"
    ended = played.outcome or "timeout"  # no turn/completed: the turn never ended on the server
    if ended not in declared.statuses and not (ended == "timeout" and "failed" in declared.statuses):
        return f"the server ended it {played.outcome or 'never (no turn/completed)'}"
    return None


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


def styled(truth: UsageBuckets, style: dict[str, str]) -> UsageBuckets:
    """``truth`` in the buckets a client of ``style`` reports: ``input`` ``with_cache`` counts the cached and
    cache-written tokens in input (the server's ``inputTokens``, an OpenAI-style ``prompt_tokens``)."""
    if style.get("input") == "with_cache":
        return UsageBuckets(
            truth.input + truth.cache_read + truth.cache_write,
            truth.cache_read,
            truth.cache_write,
            truth.output,
            truth.reasoning,
        )
    return truth


def _style_note(style: dict[str, str]) -> str:
    said = [f"{k} {v}" for k, v in sorted(style.items()) if (k, v) not in (("input", "uncached"), ("scope", "turn"))]
    return f" [usage_style: {', '.join(said)}]" if said else ""


def _judge_usage(
    make: Maker, label: str, result: TurnResult, played: PlayedTurn, declared: ExpectTurn | None, raced: bool
) -> list[Check]:
    """``turn N usage`` against the wire (in the client's declared style) and ``turn N reasoning``."""
    got = result.total_usage()
    style = result.usage_style
    note = _style_note(style) + played.matched
    wire = played.usage
    if played.turn_id is None:
        if got.is_zero():
            return [make(f"{label} usage", "pass", "no usage: the turn never reached the server, which reported none")]
        detail = f"usage {_show(got, style)} reported for a turn that never reached the server (no turn/start)"
        return [make(f"{label} usage", "fail", detail + note)]
    truth = wire.turn if wire is not None else UsageBuckets()
    expected = styled(truth, style)
    hidden = set(result.usage_unexposed)
    diffs = _differences(got, expected, hidden)
    where = "the server reported no usage of this turn" if wire is None else "the server's usage of this turn"
    if wire is not None and style.get("scope") == "last_request":
        # A correct client of this style reads the `last` of the turn's final update: one request's usage.
        last = styled(wire.last_request, style)
        if len(wire.requests) > 1 and not _differences(got, last, hidden):
            # ... and this turn made several: the style under-counts it, the bug it is, named as such.
            said = ", ".join(f"{k} {v}" for k, v in sorted(style.items()))
            why = (
                f"the client reports the last model request only (usage_style {said}) and this turn "
                f"made {len(wire.requests)}: it reported {_show(got, style)}, the turn used {_show(expected, style)} "
                "(docs/client-rules.md §4.2: a turn's usage counts each request once)"
            )
            return [make(f"{label} usage", "fail", why + played.matched)]
        if len(wire.requests) == 1 and not _differences(got, last, hidden):
            diffs = []
        where += f" (its last model request {_show(last, style)})"
    if wire is not None and len(wire.requests) > 1:
        where += f", {len(wire.requests)} model requests"
    if raced:
        where += ", completed after the client's cancel"
    text = f"got {_show(got, style)}; {where}" + (f": {_show(expected, style)}" if wire is not None else "")
    if declared is not None and declared.usage is not None and declared.usage != truth:
        text += f" ([expect] declares {_show(declared.usage)} for the course {' or '.join(declared.statuses)})"
    if hidden:
        note += f" [not exposed by the client, not judged: {', '.join(sorted(hidden))}]"
    verdict = ("; ".join(diffs) + " — " if diffs else "") + text + note
    checks = [make(f"{label} usage", "fail" if diffs else "pass", verdict)]
    if got.reasoning and got.reasoning != truth.reasoning:
        what = f"reasoning {got.reasoning} reported, the server's {truth.reasoning} (informational: inside output)"
        checks.append(make(f"{label} reasoning", "warn", what))
    return checks


def _server_usage(
    make: Maker, label: str, result: TurnResult, played: PlayedTurn, declared: ExpectTurn | None
) -> Check | None:
    """``turn N server usage``: the server's usage of a turn that ran the declared course is ``[expect]``'s."""
    if declared is None or declared.usage is None:
        return None
    off = on_declared_course(played, declared, result)
    if off is not None:
        why = f"not judged: {off}, not the course [expect] declares ({' or '.join(declared.statuses)})"
        return make(f"{label} server usage", "skip", why, applies=False)
    sent = played.usage.turn if played.usage is not None else UsageBuckets()
    diffs = _differences(sent, declared.usage)
    if declared.usage.reasoning and sent.reasoning != declared.usage.reasoning:
        diffs.append(f"reasoning {sent.reasoning} != {declared.usage.reasoning}")
    detail = f"the server reported {_show(sent)}; [expect] {_show(declared.usage)}"
    return make(
        f"{label} server usage", "fail" if diffs else "pass", ("; ".join(diffs) + " — " if diffs else "") + detail
    )


@CONTRACT.judge
def check(record: SessionRecord) -> list[Check]:
    make = CONTRACT.maker(record)
    index = WireIndex.build(record.wire)
    turns_on_wire = wire_turns(index)
    checks: list[Check] = []
    for result in sorted(record.results, key=lambda r: r.index):
        label = f"turn {result.index + 1}"
        declared = record.expect.turns[result.index] if 0 <= result.index < len(record.expect.turns) else None
        played = played_turn(index, turns_on_wire, result)
        server = _server_usage(make, label, result, played, declared)
        if result.usage_unjudged:
            # An outside client that reports no usage has none to judge: zeros would fail it for silence.
            checks.append(make(f"{label} usage", "skip", f"not judged: {result.usage_unjudged}"))
            checks += [server] if server is not None else []
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
        raced = completed_after_cancel(index, result)
        checks += _judge_usage(make, label, result, played, declared, raced)
        checks += [server] if server is not None else []
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
