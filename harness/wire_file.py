"""Reading a ``wire.jsonl`` transcript line by line, in bounded memory, with line-numbered errors.

Each line is ``{"t": seconds, "dir": "c2s"|"s2c"|"note", "msg": {...}}`` (docs: a session record). A line
that is not one (``[1]``, ``"msg": 5``, ``"dir": "bogus"``, not JSON, longer than :data:`MAX_LINE_BYTES`)
raises :class:`WireFileError` naming the file and the line: invalid input (exit 2), never a traceback.
Blank lines are skipped. Only one line is held at a time.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any, BinaryIO

import orjson

from contracts import bounded_parse
from contracts.exitcodes import InvalidInput
from contracts.record import WireEntry

#: A longer line is refused: the recorder keeps a bounded sample of an oversized server line, so no
#: line a session record holds comes near this.
MAX_LINE_BYTES = 16 * 1024 * 1024
DIRECTIONS = ("c2s", "s2c", "note")


class WireFileError(InvalidInput, ValueError):
    """A transcript line that is not ``{"t", "dir", "msg"}``; ``str()`` is ``file:line: what``."""

    def __init__(self, source: str, line: int, what: str) -> None:
        super().__init__(f"{source}:{line}: {what}")
        self.source, self.line, self.what = source, line, what


def _kind(value: Any) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean", type(None): "null"}.get(
        type(value), "a number" if isinstance(value, int | float) else type(value).__name__
    )


def parse_line(line: bytes, source: str, number: int) -> WireEntry | None:
    """One transcript line as a :class:`WireEntry`; None for a blank line."""
    if not line.strip():
        return None
    try:
        data = bounded_parse.loads_json(line, bounded_parse.MAX_RECORD_DEPTH)
    except orjson.JSONDecodeError as exc:
        raise WireFileError(source, number, f"not JSON ({exc})") from None
    if not isinstance(data, dict):
        raise WireFileError(source, number, f'expected an object {{"t", "dir", "msg"}}, got {_kind(data)}')
    direction = data.get("dir")
    if direction not in DIRECTIONS:
        raise WireFileError(source, number, f'"dir" must be c2s, s2c or note, got {direction!r:.60}')
    t = data.get("t")
    if isinstance(t, bool) or not isinstance(t, int | float) or not math.isfinite(t):
        raise WireFileError(source, number, f'"t" must be a finite number of seconds, got {t!r:.60}')
    msg = data.get("msg")
    if direction == "note":
        if not isinstance(msg, dict | str):
            raise WireFileError(source, number, f'"msg" of a note must be an object or a string, got {_kind(msg)}')
    elif not isinstance(msg, dict):
        raise WireFileError(source, number, f'"msg" must be an object (the frame), got {_kind(msg)}')
    try:
        return WireEntry.from_json(data)
    except (KeyError, TypeError, ValueError) as exc:
        raise WireFileError(source, number, f"not a transcript line ({exc})") from None


def iter_wire(fh: BinaryIO, source: str, max_bytes: int | None = None) -> Iterator[WireEntry]:
    """The entries of an open transcript, one line in memory at a time; a file still growing past
    ``max_bytes`` while it is read (a log being appended to) is refused, so the read ends."""
    number = 0
    total = 0
    while True:
        line = fh.readline(MAX_LINE_BYTES + 1)
        if not line:
            return
        number += 1
        total += len(line)
        if max_bytes is not None and total > max_bytes:
            raise WireFileError(source, number, f"the file grew past {max_bytes} bytes while it was read")
        if len(line) > MAX_LINE_BYTES and not line.endswith(b"\n"):
            raise WireFileError(source, number, f"longer than {MAX_LINE_BYTES} bytes")
        entry = parse_line(line, source, number)
        if entry is not None:
            yield entry
