"""The client core's wire record and its inline schema check (sans-IO).

:class:`WireRecord` keeps every frame sent and received and every note, in order, each with its time on the
session clock. Runs of received notification frames are kept as ``(t, frames)`` pairs and turned into
:class:`~contracts.record.WireEntry` objects only when the record is read (or before an entry of another kind
is appended), so the order and the timestamps stay the wire's and the read path builds no object per frame.

:class:`FrameChecker` validates frames as they pass (``SessionOptions.validate_frames``): the agent message
deltas of one read in ONE ``jsonschema-rs`` call (a schema whose items are the delta notification's schema),
the rest frame by frame. Every frame is still judged: when the batch fails, its frames are checked one by
one, so each breach is reported with its frame and the stdout line it came on.
"""

from __future__ import annotations

from typing import Any, Final, NamedTuple

import jsonschema_rs

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
        self._runs: list[tuple[float, list[dict[str, Any]]]] = []

    @property
    def entries(self) -> list[WireEntry]:
        if self._runs:
            self._flush()
        return self._entries

    def _flush(self) -> None:
        entries = self._entries
        for t, frames in self._runs:
            entries.extend([WireEntry(t, "s2c", frame=frame) for frame in frames])
        self._runs.clear()

    def append(self, entry: WireEntry) -> None:
        if self._runs:
            self._flush()
        self._entries.append(entry)

    def received_run(self, t: float, frames: list[dict[str, Any]]) -> None:
        """Notification frames read at ``t``, in order (the list is kept as it is: do not reuse it)."""
        self._runs.append((t, frames))


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
