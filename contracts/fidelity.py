"""Structural comparison of two server sides of a session (a real transcript against the fake, two runs...).

Each server frame is reduced to its *shape*: the method (or "response"/"request"), the item type and
status of item notifications, the turn status, the thread status with its active flags, ``willRetry``
of error notifications, the error code of an error answer. Ids, timestamps and texts are ignored, and
so are ambient notifications (``configWarning``, ``warning``, ``remoteControl/status/changed``,
``account/rateLimits/updated``) whose placement the real server does not fix.

``serverRequest/resolved`` is compared as a count per turn segment (a segment starts at each
``turn/started``), not by position: the real server sends it from a separate task, so its order against
``turn/completed`` is not part of the contract.

After a declined or failed approval, the real server writes the item's ``item/completed`` and the thread's
``thread/status/changed{active}`` from two tasks in the same millisecond: the reference shows the item
first, a loaded run here showed the status first. Such an adjacent pair is compared in one canonical
order (item first), so the race does not read as a difference; every other order is compared as is.
Likewise the answer to ``turn/start`` and the ``turn/started`` it races with (seen loaded on an older release,
the notification first): a result answer right after ``turn/started`` is placed where an unloaded run writes it,
before the ``thread/status/changed`` that announces the turn.

A ``thread/status/changed`` that repeats the one right before it (same thread, same status) is compared as
one: loaded, the default release wrote ``notLoaded`` twice in the same millisecond for one ``thread/archive`` (3 of 40
recordings of ``threads_after_turn`` on 2 busy cores), and a repeated status tells a client nothing new.

Pure: frames in, differences out. Used by the fidelity tests and by ``codex-harness diff``.
"""

from __future__ import annotations

import difflib
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Final, TypeAlias

from contracts.jsonval import as_object
from contracts.text import one_line

AMBIENT_METHODS: Final = frozenset(
    {"configWarning", "warning", "remoteControl/status/changed", "account/rateLimits/updated"}
)
RESOLVED: Final = "serverRequest/resolved"
DELTA_METHODS: Final = frozenset(
    {
        "item/agentMessage/delta",
        "item/reasoning/summaryTextDelta",
        "item/reasoning/textDelta",
        "item/commandExecution/outputDelta",
        "item/fileChange/outputDelta",
    }
)

Shape: TypeAlias = tuple[Any, ...]


def shape(frame: Any) -> Shape | None:
    """The structural shape of one server frame; None for an ambient notification.

    A line that was not a frame (``None`` or a non-dict) has the shape ``("not-a-frame",)``.
    """
    if not isinstance(frame, dict):
        return ("not-a-frame",)
    method = frame.get("method")
    if not isinstance(method, str):
        if "error" in frame:
            error = frame.get("error")
            code = error.get("code") if isinstance(error, dict) else None
            return ("response", "error", code)
        return ("response", "result")
    if "id" in frame:
        return ("request", method)
    if method in AMBIENT_METHODS:
        return None
    params = as_object(frame.get("params"))
    if method in ("item/started", "item/completed"):
        item = as_object(params.get("item"))
        return (method, item.get("type"), item.get("status"))
    if method in ("turn/started", "turn/completed"):
        turn = as_object(params.get("turn"))
        return (method, turn.get("status"))
    if method == "thread/status/changed":
        status = as_object(params.get("status"))
        flags = status.get("activeFlags")
        return (method, status.get("type"), tuple(sorted(flags)) if isinstance(flags, list) else None)
    if method == "error":
        return (method, params.get("willRetry"))
    return (method,)


@dataclass(frozen=True, slots=True)
class Difference:
    """One way the actual server side departs from the expected one."""

    segment: int  # 0: before the first turn/started; n: the n-th turn
    expected: tuple[Shape, ...]
    actual: tuple[Shape, ...]
    what: str  # "missing", "extra", "changed", "resolved count"
    #: What each side is, as the text names them (``diff``: ``("fake", "real")``; a release against another:
    #: their versions); the default reads a recording as the expectation.
    sides: tuple[str, str] = ("expected", "got")

    def __str__(self) -> str:
        def show(shapes: tuple[Shape, ...]) -> str:
            return ", ".join("/".join(str(p) for p in s if p is not None) for s in shapes) or "nothing"

        left, right = self.sides
        what = {"missing": f"only on {left}", "extra": f"only on {right}"}.get(self.what, self.what)
        if self.sides == ("expected", "got"):
            what = self.what
        return f"segment {self.segment}: {what}: {left} {show(self.expected)}; {right} {show(self.actual)}"


def _racy_pair(first: Shape, second: Shape) -> bool:
    """A status change written just before the declined/failed item it races with."""
    return (
        first[0] == "thread/status/changed"
        and first[1] == "active"
        and second[0] == "item/completed"
        and second[2] in ("declined", "failed")
    )


def _canonical(ordered: list[Shape]) -> list[Shape]:
    out = list(ordered)
    for i in range(len(out) - 1):
        if _racy_pair(out[i], out[i + 1]):
            out[i], out[i + 1] = out[i + 1], out[i]
    return out


def _repeated_status(previous: Any, frame: Any) -> bool:
    """The same thread's same status, announced again right after itself (a no-op for a client)."""
    return (
        isinstance(previous, dict)
        and isinstance(frame, dict)
        and frame.get("method") == previous.get("method") == "thread/status/changed"
        and frame.get("params") == previous.get("params")
    )


def _segments(frames: Iterable[Any], collapse_deltas: bool) -> list[tuple[list[Shape], Counter[Shape]]]:
    segments: list[tuple[list[Shape], Counter[Shape]]] = [([], Counter())]
    previous: Any = None  # the last frame that had a shape
    for frame in frames:
        s = shape(frame)
        if s is None:
            continue
        if _repeated_status(previous, frame):
            continue
        previous = frame
        if s[0] == "turn/started":
            segments.append(([], Counter()))
        elif s == ("response", "result") and len(segments) > 1 and len(segments[-1][0]) == 1:
            # The turn/start answer that lost its race with turn/started: back before the status change.
            before = segments[-2][0]
            at = len(before)
            while at > 0 and before[at - 1][0] == "thread/status/changed":
                at -= 1
            before.insert(at, s)
            continue
        ordered, resolved = segments[-1]
        if s[0] == RESOLVED:
            resolved[s] += 1
            continue
        if collapse_deltas and s[0] in DELTA_METHODS and ordered and ordered[-1] == s:
            continue
        ordered.append(s)
    return [(_canonical(ordered), resolved) for ordered, resolved in segments]


def diff_server_sides(
    expected: Sequence[Any],
    actual: Sequence[Any],
    *,
    collapse_deltas: bool = False,
    sides: tuple[str, str] = ("expected", "got"),
) -> list[Difference]:
    """Differences between two server sides (lists of frames in wire order); empty when equal.

    ``collapse_deltas`` counts a run of identical delta notifications as one (for sides whose
    streams were chunked differently). ``sides`` names the two in the text (:class:`Difference`).
    """
    left = _segments(expected, collapse_deltas)
    right = _segments(actual, collapse_deltas)
    out: list[Difference] = []
    for index in range(max(len(left), len(right))):
        exp_order, exp_resolved = left[index] if index < len(left) else ([], Counter())
        act_order, act_resolved = right[index] if index < len(right) else ([], Counter())
        matcher = difflib.SequenceMatcher(a=exp_order, b=act_order, autojunk=False)
        for tag, i1, i2, j1, j2 in matcher.get_opcodes():
            if tag == "equal":
                continue
            what = {"delete": "missing", "insert": "extra", "replace": "changed"}[tag]
            out.append(Difference(index, tuple(exp_order[i1:i2]), tuple(act_order[j1:j2]), what, sides))
        if exp_resolved != act_resolved:
            out.append(
                Difference(
                    index, tuple(exp_resolved.elements()), tuple(act_resolved.elements()), "resolved count", sides
                )
            )
    return out


def render(differences: Sequence[Difference], limit: int = 50) -> str:
    if not differences:
        return "server sides are structurally equal"
    lines = [one_line(str(d), 400) for d in differences[:limit]]  # shapes are the binary's strings
    if len(differences) > limit:
        lines.append(f"... and {len(differences) - limit} more")
    return "\n".join(lines)


def server_frames(transcript: Iterable[dict[str, Any]]) -> list[Any]:
    """The server side of a transcript in the shared ``{"t", "dir", "msg"}`` format, in order."""
    out: list[Any] = []
    for entry in transcript:
        if entry.get("dir") != "s2c":
            continue
        msg = entry.get("msg")
        out.append(None if isinstance(msg, dict) and "_raw" in msg else msg)
    return out
