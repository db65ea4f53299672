"""Trace-closure checker: invariants 1–6 of docs/trace.md §2, with the §3 allowances.

Two layers: replay-equivalent rejection first (:func:`contracts.trace.reader.read_bundle`, verdict
``invalid``), then the stricter closure rules on the raw end events and the replayed windows, because the
real reducer is lenient exactly where the pre-fix bug lived (a tool call left ``running`` in a complete
recording).

Verdicts: ``closed`` (valid and closed; partial payloads, and a wall clock that steps back, only warn),
``unclosed`` (valid, the recording has no ``recording_completed``: a live or killed writer), ``violation`` (a
closure invariant is broken), ``invalid`` (replay rejects the bundle, or a closed recording's shard has no content
checksum).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import orjson

from contracts import bounded_parse
from contracts.trace.errors import TraceInvalid
from contracts.trace.reader import WINDOW_KINDS, ReadLimits, ReplayedTrace, Window, read_bundle

Verdict = Literal["closed", "unclosed", "violation", "invalid"]

_START_END_EVENTS = {
    "thread": ("thread_started", "thread_ended"),
    "codex_turn": ("codex_turn_started", "codex_turn_ended"),
    "inference_call": ("inference_started", "inference_completed|failed|cancelled"),
    "tool_call": ("tool_call_started", "tool_call_ended"),
    "terminal_operation": ("tool_call_runtime_started", "tool_call_runtime_ended"),
    "compaction_request": ("compaction_request_started", "compaction_request_completed|failed"),
    "code_cell": ("code_cell_started", "code_cell_ended"),
}
_RUNNING_STATUSES = frozenset({"running", "starting", "yielded"})


@dataclass(frozen=True, slots=True)
class Problem:
    """One broken rule: which invariant, which window (kind and id), where in the log (seq, wall time)."""

    invariant: int
    kind: str  # a window kind, or "recording" / "rollout" / "event"
    id: str | None
    seq: int | None
    time_unix_ms: int | None
    message: str
    # A problem every unfinished recording has (an open window, no rollout end): it does not make an
    # unclosed recording a violation, because closure applies only after a graceful shutdown (docs/trace.md §3).
    expected_while_unclosed: bool = False

    def to_json(self) -> dict[str, Any]:
        return {
            "invariant": self.invariant,
            "kind": self.kind,
            "id": self.id,
            "seq": self.seq,
            "time_unix_ms": self.time_unix_ms,
            "message": self.message,
        }

    def describe(self) -> str:
        where = []
        if self.id is not None:
            where.append(f"{self.kind} {self.id}")
        else:
            where.append(self.kind)
        if self.seq is not None:
            where.append(f"seq {self.seq}")
        if self.time_unix_ms is not None:
            where.append(f"t={self.time_unix_ms}")
        return f"[invariant {self.invariant}] {', '.join(where)}: {self.message}"


@dataclass(slots=True)
class TraceVerdict:
    path: str
    verdict: Verdict
    recording_status: str | None = None
    rollout_status: str | None = None
    error: str | None = None  # the replay rejection, for ``invalid``
    error_line: int | None = None
    problems: list[Problem] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    trace: ReplayedTrace | None = field(default=None, repr=False)

    @property
    def closed(self) -> bool:
        return self.verdict == "closed"

    def open_windows(self) -> list[Problem]:
        return [p for p in self.problems if p.expected_while_unclosed and p.kind not in ("rollout", "recording")]

    def to_json(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "verdict": self.verdict,
            "recording_status": self.recording_status,
            "rollout_status": self.rollout_status,
            "error": self.error,
            "error_line": self.error_line,
            "problems": [p.to_json() for p in self.problems],
            "warnings": list(self.warnings),
        }


def check_bundle(path: str | os.PathLike[str], limits: ReadLimits | None = None) -> TraceVerdict:
    """Check one bundle directory (pure: reads, never writes). Raises TraceUnreadable for a non-directory."""
    try:
        trace = read_bundle(path, limits or ReadLimits())
    except TraceInvalid as exc:
        return TraceVerdict(path=str(Path(path)), verdict="invalid", error=exc.message, error_line=exc.line)
    return check_trace(trace)


def check_trace(trace: ReplayedTrace) -> TraceVerdict:
    """The closure verdict of an already replayed bundle."""
    problems: list[Problem] = []
    closed = trace.recording_status != "unclosed"
    warnings: list[str] = []
    _recording(trace, problems)
    _order(trace, warnings)
    _ends(trace, problems, warnings)
    _interrupts(trace, problems)
    _rollout(trace, problems)
    if trace.recording_status == "closed_with_partial_payloads":
        partial = ", ".join(f"{r.raw_payload_id} ({r.kind}, {r.capture})" for r in trace.partial_payloads)
        warnings.append(f"recording closed with partial payloads: {partial}")
    hard = [p for p in problems if not p.expected_while_unclosed]
    if hard or (closed and problems):
        verdict: Verdict = "violation"
    elif not closed:
        verdict = "unclosed"
    else:
        verdict = "closed"
    problems.sort(key=lambda p: (p.seq if p.seq is not None else 1 << 62, p.invariant))
    return TraceVerdict(
        path=str(trace.path),
        verdict=verdict,
        recording_status=trace.recording_status,
        rollout_status=trace.status,
        problems=problems,
        warnings=warnings,
        trace=trace,
    )


def _recording(trace: ReplayedTrace, problems: list[Problem]) -> None:
    # Invariant 1: replay already refuses events after recording_completed and unfinished or
    # checksum-less shards in a closed recording; what remains is its absence.
    if trace.recording_status == "unclosed":
        closed_by = trace.recording_completed_seq
        why = "no recording_completed or rollout_ended" if closed_by is None else "last line not terminated"
        problems.append(
            Problem(1, "recording", None, None, None, f"recording is unclosed ({why})", expected_while_unclosed=True)
        )


def _order(trace: ReplayedTrace, warnings: list[str]) -> None:
    # Invariant 2: seq contiguity is a replay rejection; the order is seq's. Wall time going backwards is neither a
    # rejection nor a closure problem: the real writer assigns seq under its lock and reads the clock outside it, so
    # two threads' events may step back (a release wrote a step of 1 ms back, docs/trace.md §2). Said, not judged.
    for r in trace.wall_time_regressions:
        warnings.append(
            f"event seq {r.seq}: wall_time_unix_ms went backwards ({r.previous_unix_ms} -> {r.wall_time_unix_ms}); "
            "the order is seq's, the time is for display"
        )


def _ends(trace: ReplayedTrace, problems: list[Problem], warnings: list[str]) -> None:
    # Every window kind must end; terminal sessions are no window kind and may stay open (docs/trace.md §3).
    for kind in WINDOW_KINDS:
        start_name, end_name = _START_END_EVENTS[kind]
        for w in trace.windows_of(kind).values():
            explicit = [m for m in w.ends if not m.implicit]
            # Invariant 3, on the raw end events: replay keeps the last of two ends, the log shows both.
            if len(explicit) > 1:
                seqs = ", ".join(str(m.seq) for m in explicit)
                second = explicit[1]
                problems.append(
                    Problem(
                        3,
                        kind,
                        w.id,
                        second.seq,
                        second.wall_time_unix_ms,
                        f"ended {len(explicit)} times (seq {seqs}): {start_name} needs exactly one {end_name}",
                    )
                )
            if w.ended_seq is None:
                invariant = 6 if kind == "thread" else 3
                what = "thread_ended" if kind == "thread" else end_name
                problems.append(
                    Problem(
                        invariant,
                        kind,
                        w.id,
                        w.started_seq,
                        w.started_at_unix_ms,
                        f"{w.label + ' ' if w.label else ''}started at seq {w.started_seq} never ended: "
                        f"no {what}, still running",
                        expected_while_unclosed=True,
                    )
                )
                continue
            # Invariant 4: a window that ended is sane.
            assert w.ended_at_unix_ms is not None
            if w.status in _RUNNING_STATUSES:
                problems.append(
                    Problem(
                        4,
                        kind,
                        w.id,
                        w.ended_seq,
                        w.ended_at_unix_ms,
                        f"ended with status {w.status!r} (still running)",
                    )
                )
            if w.ended_seq <= w.started_seq:
                problems.append(
                    Problem(
                        4,
                        kind,
                        w.id,
                        w.ended_seq,
                        w.ended_at_unix_ms,
                        f"ended at seq {w.ended_seq}, not after its start at seq {w.started_seq}",
                    )
                )
            if w.ended_at_unix_ms < w.started_at_unix_ms:  # by seq it ends after: the clock is for display
                warnings.append(
                    f"{kind} {w.id}: ended at {w.ended_at_unix_ms} ms, before its start at {w.started_at_unix_ms} ms "
                    "by the wall clock (after it by seq)"
                )


def _turn_of_protocol_event(trace: ReplayedTrace, payload_id: str | None) -> tuple[str | None, str | None]:
    body = trace.payload_body(payload_id) if payload_id else None
    if body is None:
        return None, None
    try:
        value = bounded_parse.loads_json(body)
    except orjson.JSONDecodeError:
        return None, None
    if not isinstance(value, dict):
        return None, None
    turn = value.get("turn_id")
    reason = value.get("reason")
    return (turn if isinstance(turn, str) else None), (reason if isinstance(reason, str) else None)


def _interrupts(trace: ReplayedTrace, problems: list[Problem]) -> None:
    # Invariant 5: an interrupted turn ends `cancelled`, after every tool call it started, and the
    # protocol records `turn_aborted`. Terminal operations may end after the turn (docs/trace.md §3).
    aborted_turns: dict[str, int] = {}
    anonymous_aborts: list[int] = []
    for ev in trace.protocol_events:
        if ev.event_type != "turn_aborted":
            continue
        turn_id, reason = _turn_of_protocol_event(trace, ev.payload_id)
        if turn_id is None:
            anonymous_aborts.append(ev.seq)
            continue
        aborted_turns.setdefault(turn_id, ev.seq)
        turn = trace.codex_turns.get(turn_id)
        if reason == "interrupted" and turn is not None and turn.ended_seq is not None and turn.status != "cancelled":
            problems.append(
                Problem(
                    5,
                    "codex_turn",
                    turn_id,
                    turn.ended_seq,
                    turn.ended_at_unix_ms,
                    f"turn_aborted (interrupted) recorded at seq {ev.seq}, but the turn ended {turn.status!r}, "
                    "not 'cancelled'",
                )
            )
    for turn in trace.codex_turns.values():
        if turn.status != "cancelled" or turn.ended_seq is None:
            continue
        if turn.id not in aborted_turns and not any(s > turn.started_seq for s in anonymous_aborts):
            problems.append(
                Problem(
                    5,
                    "codex_turn",
                    turn.id,
                    turn.ended_seq,
                    turn.ended_at_unix_ms,
                    "turn ended 'cancelled' but no turn_aborted protocol event was recorded",
                    # it is written just after the turn end: a recording cut in between lacks it legitimately
                    expected_while_unclosed=True,
                )
            )
        for tool in trace.tool_calls.values():
            if tool.codex_turn_id != turn.id:
                continue
            explicit = [m for m in tool.ends if not m.implicit]
            if not explicit:
                problems.append(
                    Problem(
                        5,
                        "tool_call",
                        tool.id,
                        tool.started_seq,
                        tool.started_at_unix_ms,
                        f"{tool.label} tool call of interrupted turn {turn.id} was never ended "
                        f"(turn cancelled at seq {turn.ended_seq}): no tool_call_ended, still running",
                    )
                )
                continue
            first = explicit[0]
            if first.seq > turn.ended_seq:
                problems.append(
                    Problem(
                        5,
                        "tool_call",
                        tool.id,
                        first.seq,
                        first.wall_time_unix_ms,
                        f"tool call ended at seq {first.seq}, after its interrupted turn {turn.id} "
                        f"ended at seq {turn.ended_seq}",
                    )
                )
            if first.status == "aborted" and first.has_result_payload:
                problems.append(
                    Problem(
                        5,
                        "tool_call",
                        tool.id,
                        first.seq,
                        first.wall_time_unix_ms,
                        "tool call aborted by an interrupt carries a result payload (expected result_payload null)",
                    )
                )


def _rollout(trace: ReplayedTrace, problems: list[Problem]) -> None:
    # Invariant 6: rollout_ended once, before recording_completed, status completed.
    ends = trace.rollout_ended
    if not ends:
        problems.append(
            Problem(6, "rollout", trace.rollout_id, None, None, "no rollout_ended", expected_while_unclosed=True)
        )
        return
    if len(ends) > 1:
        seqs = ", ".join(str(m.seq) for m in ends)
        problems.append(
            Problem(
                6,
                "rollout",
                trace.rollout_id,
                ends[1].seq,
                ends[1].wall_time_unix_ms,
                f"rollout_ended written {len(ends)} times (seq {seqs})",
            )
        )
    last = ends[-1]
    if trace.recording_completed_seq is not None and last.seq > trace.recording_completed_seq:
        problems.append(
            Problem(
                6,
                "rollout",
                trace.rollout_id,
                last.seq,
                last.wall_time_unix_ms,
                "rollout_ended after recording_completed",
            )
        )
    if last.status != "completed":
        problems.append(
            Problem(
                6,
                "rollout",
                trace.rollout_id,
                last.seq,
                last.wall_time_unix_ms,
                f"rollout ended {last.status!r}, expected 'completed'",
            )
        )


def open_window_summary(window: Window) -> str:
    return f"{window.kind} {window.id} (seq {window.started_seq}, t={window.started_at_unix_ms})"
