"""Newline-delimited JSON framing (sans-IO): bytes in, messages and typed errors out.

One JSON object per line, ``\\n`` only (never split on U+2028 or ``\\r``). A line longer than the
cap is discarded as it streams in, never buffered, and reported once with its size. Every bad line
becomes a :class:`WireError`; the decoder always carries on with the next line.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Final, TypeVar

import orjson

from contracts.messages import Message, classify

DEFAULT_MAX_LINE: Final = 32 * 1024 * 1024
_SAMPLE: Final = 120  # bytes of a bad line kept for the report


class WireErrorKind(StrEnum):
    OVERSIZED_LINE = "oversized_line"
    INVALID_UTF8 = "invalid_utf8"
    INVALID_JSON = "invalid_json"
    NOT_AN_OBJECT = "not_an_object"
    NOT_A_MESSAGE = "not_a_message"
    TRUNCATED_AT_EOF = "truncated_at_eof"


@dataclass(frozen=True, slots=True)
class WireError:
    """A line that did not yield a message. ``size`` is the line's length in bytes."""

    kind: WireErrorKind
    detail: str
    size: int
    sample: bytes

    def describe(self) -> str:
        return f"{self.kind}: {self.detail} ({self.size} bytes: {self.sample[:60]!r})"


Item = Message | WireError
_T = TypeVar("_T")


def encode(message: Message) -> bytes:
    """One frame as a wire line. orjson escapes control characters, so the line has one ``\\n``."""
    return orjson.dumps(message.frame) + b"\n"


def encode_frame(frame: dict) -> bytes:
    """Write an arbitrary frame (faults use this to send frames no message type would build)."""
    return orjson.dumps(frame) + b"\n"


def parse_line(line: bytes) -> Item | None:
    """Parse one line without its ``\\n``. Blank lines give ``None`` (nothing to report)."""
    try:
        obj = orjson.loads(line)
    except orjson.JSONDecodeError as exc:
        return _unparsable(line, exc)
    return _from_object(obj, line)


def parse_notification_or_line(line: bytes) -> dict[str, Any] | Item | None:
    """Like :func:`parse_line`, but a notification comes back as its bare frame (a dict), no message built.

    A frame with a string ``method`` and no ``id`` is exactly what :func:`classify` makes a
    :class:`Notification` of; the hot path of a reader handles those frames without the object.
    """
    try:
        obj = orjson.loads(line)
    except orjson.JSONDecodeError as exc:
        return _unparsable(line, exc)
    if type(obj) is dict and "id" not in obj and type(obj.get("method")) is str:
        return obj
    return _from_object(obj, line)


def _unparsable(line: bytes, exc: orjson.JSONDecodeError) -> WireError | None:
    if not line.strip():
        return None
    try:
        line.decode("utf-8")
    except UnicodeDecodeError as uexc:
        return WireError(WireErrorKind.INVALID_UTF8, str(uexc), len(line), bytes(line[:_SAMPLE]))
    return WireError(WireErrorKind.INVALID_JSON, str(exc), len(line), bytes(line[:_SAMPLE]))


def _from_object(obj: Any, line: bytes) -> Item:
    if not isinstance(obj, dict):
        return WireError(
            WireErrorKind.NOT_AN_OBJECT, f"JSON {type(obj).__name__}, not an object", len(line), bytes(line[:_SAMPLE])
        )
    result = classify(obj)
    if isinstance(result, str):
        return WireError(WireErrorKind.NOT_A_MESSAGE, result, len(line), bytes(line[:_SAMPLE]))
    return result


class LineDecoder:
    """Reassembles lines across reads and parses them.

    ``feed`` returns what the bytes completed; ``feed_eof`` reports a final line that never got
    its ``\\n`` (it is not used as a frame: a writer that died mid-line must not be trusted).
    """

    def __init__(self, max_line: int = DEFAULT_MAX_LINE) -> None:
        if max_line < 1:
            raise ValueError("max_line must be positive")
        self.max_line = max_line
        self._buf = bytearray()
        self._discarding = False
        self._discarded = 0  # bytes of the oversized line seen so far
        self._discard_sample = b""

    def feed(self, data: bytes) -> list[Item]:
        return self._feed(data, parse_line)

    def feed_fast(self, data: bytes) -> list[dict[str, Any] | Item]:
        """As :meth:`feed`, but notifications come back as bare frames (see :func:`parse_notification_or_line`)."""
        return self._feed(data, parse_notification_or_line)

    def _feed(self, data: bytes, parse: Callable[[bytes], _T | None]) -> list[_T | WireError]:
        out: list[_T | WireError] = []
        cap = self.max_line
        start = 0
        if self._discarding or self._buf:
            # the first line continues one from an earlier read
            nl = data.find(b"\n")
            if nl < 0:
                self._hold(data)
                return out
            if self._discarding:
                self._extend_sample(data, 0, nl)
                out.append(self._oversized(self._discarded + nl))
            else:
                size = len(self._buf) + nl
                if size > cap:
                    # Measured, not concatenated: the excess is never held in memory.
                    self._discard_sample = bytes(self._buf[:_SAMPLE])
                    self._extend_sample(data, 0, nl)
                    out.append(self._oversized(size))
                else:
                    self._buf += data[:nl]
                    item = parse(bytes(self._buf))
                    if item is not None:
                        out.append(item)
            self._buf.clear()
            start = nl + 1
        # whole lines: one bulk split instead of a find per line
        lines = (data[start:] if start else data).split(b"\n")
        rest = lines.pop()  # after the last newline (b"" when the read ended on one)
        append = out.append
        if parse is parse_notification_or_line:
            # the reader's hot loop: parse_notification_or_line inlined (one call less per line)
            loads = orjson.loads
            for line in lines:
                if len(line) > cap:
                    self._discard_sample = line[:_SAMPLE]
                    append(self._oversized(len(line)))
                elif line:
                    try:
                        obj = loads(line)
                    except orjson.JSONDecodeError as exc:
                        if (error := _unparsable(line, exc)) is not None:
                            append(error)
                        continue
                    if type(obj) is dict and "id" not in obj and type(obj.get("method")) is str:
                        append(obj)
                    else:
                        append(_from_object(obj, line))
            if rest:
                self._hold(rest)
            return out
        for line in lines:
            if len(line) > cap:
                self._discard_sample = line[:_SAMPLE]
                append(self._oversized(len(line)))
            elif line:
                item = parse(line)
                if item is not None:
                    append(item)
        if rest:
            self._hold(rest)
        return out

    def _hold(self, rest: bytes) -> None:
        """Keep the start of a line whose newline has not come yet (or only count it, past the cap)."""
        if self._discarding:
            self._extend_sample(rest, 0, len(rest))
            self._discarded += len(rest)
        elif len(self._buf) + len(rest) > self.max_line:
            # Over the cap without a newline: stop buffering, only count from here on.
            self._discarding = True
            self._discarded = len(self._buf) + len(rest)
            self._discard_sample = bytes(self._buf[:_SAMPLE])
            self._extend_sample(rest, 0, len(rest))
            self._buf.clear()
        else:
            self._buf += rest

    def _extend_sample(self, data: bytes, start: int, end: int) -> None:
        # The sample is the line's first bytes however the line was split across reads.
        missing = _SAMPLE - len(self._discard_sample)
        if missing > 0:
            self._discard_sample += data[start : min(end, start + missing)]

    def feed_eof(self) -> list[Item]:
        out: list[Item] = []
        if self._discarding:
            out.append(self._oversized(self._discarded))
        elif self._buf.strip():
            line = bytes(self._buf)
            out.append(
                WireError(
                    WireErrorKind.TRUNCATED_AT_EOF,
                    "final line has no newline at end of stream",
                    len(line),
                    line[:_SAMPLE],
                )
            )
        self._buf.clear()
        return out

    @property
    def buffered(self) -> int:
        """Bytes held for an incomplete line (never more than ``max_line``)."""
        return len(self._buf)

    def _oversized(self, size: int) -> WireError:
        self._discarding = False
        self._discarded = 0
        sample, self._discard_sample = self._discard_sample, b""
        return WireError(
            WireErrorKind.OVERSIZED_LINE, f"line of {size} bytes exceeds the cap of {self.max_line}", size, sample
        )
