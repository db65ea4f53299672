"""``show --html OUT``: one recorded session (a record directory, or a bare wire.jsonl) as an HTML page."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from contracts.checks import Check
from contracts.exitcodes import UsageError
from contracts.expect import Expect
from contracts.record import SessionRecord, WireEntry
from harness.html.report import write_session_html


def write_show_html(
    out: Path, record: SessionRecord | None, entries: Sequence[WireEntry], checks: Sequence[Check], source: Path
) -> Path:
    """Write the page; a bare transcript is drawn as a record with only its wire (no checks, no faults)."""
    if record is None:
        record = SessionRecord(source.parent.name or source.name, "transcript", Expect(), wire=list(entries))
    try:
        return write_session_html(out, record, checks)
    except OSError as exc:
        raise UsageError(f"cannot write {out}: {exc.strerror}") from None
