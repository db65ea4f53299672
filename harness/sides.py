"""The two sides ``diff`` compares, as ``diff`` and ``release learn`` read them: a session's server frames and
the difference of two trace bundles' events."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from contracts.record import SessionRecord


def server_side(record: SessionRecord) -> list[Any]:
    """The frames the server wrote, in wire order (None for a line that was not a frame)."""
    return [entry.frame for entry in record.wire if entry.dir == "s2c"]


def trace_differences(
    left: Path | None, right: Path | None, sides: tuple[str, str] = ("fake", "real")
) -> list[str]:
    """Two servers' trace bundles compared event by event, as lines naming ``sides`` (empty: the same events)."""
    from contracts.trace.errors import TraceInvalid, TraceUnreadable
    from contracts.trace.sequence import diff_sequences, event_shapes

    if left is None or right is None:
        if left is right:
            return []
        return [f"only the {sides[0] if right is None else sides[1]} side wrote a trace bundle"]
    try:
        return diff_sequences(event_shapes(left), event_shapes(right), sides=sides)
    except (TraceInvalid, TraceUnreadable) as exc:
        return [f"a trace bundle could not be read: {exc}"]
