"""The two sides ``diff`` compares, as ``diff`` and ``release learn`` read them: a session's server frames and
the difference of two trace bundles' events."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from contracts.record import SessionRecord


def server_side(record: SessionRecord) -> list[Any]:
    """The frames the server wrote, in wire order (None for a line that was not a frame)."""
    return [entry.frame for entry in record.wire if entry.dir == "s2c"]


def trace_differences(real: Path | None, fake: Path | None) -> list[str]:
    """The fake's server trace bundle against the real one's, as lines (empty: the same events)."""
    from contracts.trace.errors import TraceInvalid, TraceUnreadable
    from contracts.trace.sequence import diff_sequences, event_shapes

    if real is None or fake is None:
        if real is fake:
            return []
        return [f"only the {'real binary' if fake is None else 'fake'} wrote a trace bundle"]
    try:
        return diff_sequences(event_shapes(real), event_shapes(fake))
    except (TraceInvalid, TraceUnreadable) as exc:
        return [f"a trace bundle could not be read: {exc}"]
