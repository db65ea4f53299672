"""A trace bundle's events as a sequence of shapes, to compare two bundles of one session by structure.

Each event of ``trace.jsonl`` becomes a short shape: its type, the protocol event's type, the status of
an end, and for ``history_item_accepted`` which item: a context, input or interrupt-marker message
(``msg_*``, ids the server makes up), a tool output (``fco_*``, ``+output`` when the event carries the
output's payload), or the output item's own id with its numbers as ``#`` (``msg-#``, ``rs_#``,
``fc_call_echo``: the mock model's ids, counted over every request the mock served). Ids, times and
payloads are left out.

One race is read in one order. The real server accepts a streamed output item (and starts its tool call) as soon
as the item is done, and ends the inference when the stream completes; which of the two it writes first
varies from run to run (seen on ``steer``, ``experimental_unread`` and, on the older releases, the file
change scenarios, whose ``apply_patch`` runtime starts with the call).
An ``inference_completed`` written after such items is compared where the other order writes it: right
after its ``inference_started``. And when two or more calls are settled together (``two_approvals``: the
client answers both approvals at once), which call's events come first follows which answer the server
read first; such a run of runtime, end and tool-output events is compared as a set. A command still
running when its turn is aborted ends its runtime ``failed`` when its process is reaped: right after the
``turn_aborted`` event, or (an older release, loaded) after the recording's ``rollout_ended``; it is compared right
after the ``turn_aborted``. A call's runtime end written after the call's own end or after its output was
accepted (the oldest release and, loaded, the default one: the process is reaped after the call returned) is
compared before them. Every other order is compared as written.

Pure apart from reading the event log (bounded as :func:`contracts.trace.reader.read_bundle` reads it).
Used by the tests that hold the fake's bundles to the real binary's.
"""

from __future__ import annotations

import difflib
import os
import re
from collections.abc import Sequence
from pathlib import Path

import orjson

from contracts import bounded_parse
from contracts.trace.errors import TraceLimitExceeded
from contracts.trace.reader import ReadLimits, iter_event_lines
from contracts.trace_format import EVENT_LOG_NAME

HISTORY = "history_item_accepted"
_MADE_UP = ("msg_", "fco_")  # item-id prefixes the server makes up (a uuid follows)


def event_shape(event: object) -> str:
    """The shape of one event (``"?"`` for a line that is not an event object)."""
    if not isinstance(event, dict) or not isinstance(event.get("payload"), dict):
        return "?"
    payload = event["payload"]
    parts = [str(payload.get("type"))]
    if isinstance(payload.get("event_type"), str):
        parts.append(payload["event_type"])
    if isinstance(payload.get("status"), str):
        parts.append(payload["status"])
    if parts[0] == HISTORY:
        item = str(payload.get("item_id", ""))
        made_up = next((p for p in _MADE_UP if item.startswith(p)), None)
        parts.append(f"{made_up}*" if made_up else re.sub(r"\d+", "#", item))
        if "tool_output_payload" in payload:
            parts[-1] += "+output"
    return " ".join(parts)


def event_shapes(bundle: str | os.PathLike[str], limits: ReadLimits | None = None) -> list[str]:
    """The shapes of a bundle's events, in log order (a torn last line is left out, as replay does)."""
    limits = limits or ReadLimits()
    out: list[str] = []
    for number, line, whole in iter_event_lines(Path(bundle) / EVENT_LOG_NAME, limits):
        if not whole or not line.strip():
            continue
        if len(out) >= limits.max_events:
            raise TraceLimitExceeded(f"more than {limits.max_events} events", line=number)
        try:
            out.append(event_shape(bounded_parse.loads_json(line)))
        except orjson.JSONDecodeError:
            out.append("?")
    return out


def _streamed_output(shape: str) -> bool:
    """An output item accepted, or a tool call started, while its inference may still stream."""
    if shape in ("tool_call_started", "tool_call_runtime_started"):  # an apply_patch runtime starts with its call
        return True
    return shape.startswith(HISTORY + " ") and not shape.split(" ")[1].startswith(_MADE_UP)


def _settling(shape: str) -> bool:
    """An event of a call being settled: its runtime, its end, its output accepted."""
    return shape.startswith(("tool_call_runtime_", "tool_call_ended", HISTORY + " fco_"))


def canonical(shapes: Sequence[str]) -> list[str]:
    """``shapes`` with the two races above read in one order; nothing else moves."""
    out = list(shapes)
    for i, shape in enumerate(out):
        if shape != "inference_completed":
            continue
        j = i
        while j > 0 and _streamed_output(out[j - 1]):
            j -= 1
        if j < i and j > 0 and out[j - 1] == "inference_started":
            out.insert(j, out.pop(i))
    for i, shape in enumerate(list(out)):
        if shape.startswith("tool_call_runtime_ended "):
            j = i
            while j > 0 and out[j - 1].startswith(("tool_call_ended ", HISTORY + " fco_")):
                j -= 1
            out.insert(j, out.pop(i))
    aborted_at = None  # just after the last turn_aborted, while no other turn has started
    for i, shape in enumerate(list(out)):
        if shape == "protocol_event_observed turn_aborted":
            aborted_at = i + 1
        elif shape == "codex_turn_started":
            aborted_at = None
        elif shape == "tool_call_runtime_ended failed" and aborted_at is not None and aborted_at < i:
            out.insert(aborted_at, out.pop(i))
            aborted_at += 1
    i = 0
    while i < len(out):
        j = i
        while j < len(out) and _settling(out[j]):
            j += 1
        if sum(1 for s in out[i:j] if s.startswith("tool_call_ended")) > 1:
            out[i:j] = sorted(out[i:j])
        i = max(j, i + 1)
    return out


def diff_sequences(
    expected: Sequence[str], actual: Sequence[str], *, sides: tuple[str, str] = ("expected", "got")
) -> list[str]:
    """What ``actual`` lacks or adds against ``expected`` (both canonicalised), one line each; empty: equal.
    ``sides`` names the two in the text (``diff``: ``("fake", "real")``)."""
    left, right = canonical(expected), canonical(actual)
    lines: list[str] = []
    matcher = difflib.SequenceMatcher(a=left, b=right, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            continue
        where = f"after event {i1} ({left[i1 - 1]})" if i1 > 0 else "at the start"
        missing = ", ".join(left[i1:i2]) or "nothing"
        extra = ", ".join(right[j1:j2]) or "nothing"
        lines.append(f"{where}: {sides[0]} {missing}; {sides[1]} {extra}")
    return lines
