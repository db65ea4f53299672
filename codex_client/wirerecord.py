"""The client core's wire record and its inline schema check (sans-IO).

:class:`WireRecord` keeps every frame sent and received and every note, in order, each with its time on the
session clock. Received notification frames are kept with the time of their read and turned into
:class:`~contracts.record.WireEntry` objects only when the record is read, so the order and the timestamps stay
the wire's and the read path builds no object per frame. A frame whose line the reader still has is kept as
that line (``bytes``) rather than as the parsed frame, parsed again when the record is read: a parsed frame is a
dict the garbage collector tracks, a line is not. A record that held one tracked dict per frame made every
long turn promote them into the oldest generation, so CPython ran a full collection (every object of the
process, the schemas included) about once per quarter of the heap the turn kept: a flood of 20,000 deltas
paid ≈ 70 ms of collection, more than its own reading. Lines are also a third of the memory.

:class:`FrameChecker` validates frames as they pass (``SessionOptions.validate_frames``): the agent message
deltas of one read in ONE ``jsonschema-rs`` call (a schema whose items are the delta notification's schema),
the rest frame by frame. Every frame is still judged: when the batch fails, its frames are checked one by
one, so each breach is reported with its frame and the stdout line it came on.
"""

from __future__ import annotations

from array import array
from itertools import repeat
from typing import Any, Final, NamedTuple

import jsonschema_rs
import orjson

from contracts.protocol_index import Union
from contracts.record import WireEntry

MAX_KEPT_VIOLATIONS: Final = 1000
DELTA_METHOD: Final = "item/agentMessage/delta"


class SchemaViolation(NamedTuple):
    """A frame that broke the pinned schema; ``line``: its 1-based line on stdout (None for frames sent)."""

    t: float
    dir: str
    frame: dict[str, Any]
    violations: list[Any]
    line: int | None = None


class WireRecord:
    """Frames and notes in wire order (see the module doc for the lazy runs of notifications)."""

    def __init__(self) -> None:
        self._entries: list[WireEntry] = []
        # After ``_entries``, in wire order, what is not an entry yet: a received notification as its line
        # (``bytes``) or its frame (a ``dict``), or an entry of another kind as it is; ``_times[i]`` is when
        # ``_tail[i]`` was read. Flat, so that a read of one frame keeps no container of its own either.
        self._tail: list[Any] = []
        self._times = array("d")

    @property
    def entries(self) -> list[WireEntry]:
        if self._tail:
            self._settle()
        return self._entries

    def _settle(self) -> None:
        entries = self._entries
        loads = orjson.loads  # each line parsed once already, with its depth bounded: the same frame again
        for t, part in zip(self._times, self._tail, strict=True):
            kind = type(part)
            if kind is WireEntry:
                entries.append(part)
            else:
                entries.append(WireEntry(t, "s2c", frame=part if kind is dict else loads(part)))
        self._tail.clear()
        del self._times[:]

    def append(self, entry: WireEntry) -> None:
        if self._tail:
            self._tail.append(entry)
            self._times.append(entry.t)
        else:
            self._entries.append(entry)

    def received(self, t: float, frame: dict[str, Any], line: bytes | None = None) -> None:
        """One notification frame read at ``t``; ``line``: the line it was parsed from (kept instead of it)."""
        self._tail.append(frame if line is None else line)
        self._times.append(t)

    def received_run(self, t: float, frames: list[dict[str, Any]], lines: list[bytes] | None = None) -> None:
        """Notification frames read at ``t``, in order; ``lines``: the lines they were parsed from, one each (kept
        instead of the frames)."""
        self._tail.extend(frames if lines is None else lines)
        self._times.extend(repeat(t, len(frames)))


class FrameChecker:
    """Inline validation of the frames of one connection; breaches kept bounded (the first 1,000)."""

    def __init__(self) -> None:
        from contracts.validator import SessionValidator

        self.session_validator = SessionValidator()
        self.violations: list[SchemaViolation] = []
        self.count = 0
        self._batch_for: Any = None  # the Validator the batch schema was built from (it changes on experimental)
        self._batch: Any = None

    def check(self, t: float, direction: str, frame: Any, line: int | None = None) -> None:
        violations = self.session_validator.validate(frame, direction)  # type: ignore[arg-type]
        if violations:
            self.report(t, direction, frame, violations, line)

    def check_deltas(self, frames: list[dict[str, Any]]) -> list[int]:
        """Indexes of the agent message delta ``frames`` that break the schema (one call when all are valid)."""
        validator = self.session_validator.validator
        if self._batch_for is not validator:
            single = validator.schema_for((Union.SERVER_NOTIFICATION.value, DELTA_METHOD))
            item = {k: v for k, v in single.items() if k not in ("definitions", "$schema")}
            schema = {"definitions": single.get("definitions", {}), "type": "array", "items": item}
            self._batch = jsonschema_rs.Draft7Validator(schema)
            self._batch_for = validator
        try:
            if self._batch.is_valid(frames):
                return []
        except (ValueError, TypeError, OverflowError):  # not JSON values: the frame-by-frame check says which
            pass
        is_valid = validator.is_valid
        return [i for i, frame in enumerate(frames) if not is_valid(frame, "s2c")]

    def report(self, t: float, direction: str, frame: Any, violations: list[Any], line: int | None) -> None:
        self.count += 1
        if len(self.violations) < MAX_KEPT_VIOLATIONS:
            self.violations.append(SchemaViolation(t, direction, frame, violations, line))
