"""The wire codec and its framings (sans-IO): bytes in, messages and typed errors out.

Codec: one JSON-RPC message is one *payload*, the bytes of one JSON object (:func:`payload`,
:func:`parse_line`, :func:`parse_payloads`). Framing: how payloads travel, which belongs to the transport
(:mod:`contracts.transport`):

- :class:`LineFraming`: newline-delimited JSON, the stdio framing. One JSON object per line, ``\\n`` only
  (never split on U+2028 or ``\\r``). A line longer than the cap is discarded as it streams in, never
  buffered, and reported once with its size; a final line without its ``\\n`` is reported, never used.
- :class:`MessageFraming`: one payload per transport message (a websocket text frame, an item of a memory
  channel); the framing only bounds them and names a message cut off by the end of the stream.

Every bad payload becomes a :class:`WireError`; readers always carry on with the next one.
:class:`LineDecoder` is the two together for a byte stream: a line framing plus the codec.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Final

import orjson

from contracts import bounded_parse
from contracts.messages import Message, classify

DEFAULT_MAX_LINE: Final = 32 * 1024 * 1024
_SAMPLE: Final = 120  # bytes of a bad line kept for the report
SAMPLE_BYTES: Final = _SAMPLE


class WireErrorKind(StrEnum):
    OVERSIZED_LINE = "oversized_line"
    OVERSIZED_MESSAGE = "oversized_message"
    INVALID_UTF8 = "invalid_utf8"
    INVALID_JSON = "invalid_json"
    NOT_AN_OBJECT = "not_an_object"
    NOT_A_MESSAGE = "not_a_message"
    TRUNCATED_AT_EOF = "truncated_at_eof"
    BINARY_FRAME = "binary_frame"  # a websocket binary message: app-server messages are text frames


#: The kinds a framing reports for a message over its cap.
OVERSIZED_KINDS: Final = frozenset({WireErrorKind.OVERSIZED_LINE, WireErrorKind.OVERSIZED_MESSAGE})


@dataclass(frozen=True, slots=True)
class WireError:
    """A line (or message) that did not yield a message. ``size`` is its length in bytes.

    ``partial``: an oversized line still streaming in, reported early (``size`` is what came so far: at least
    that much); the same line is reported again, whole, when its end comes.
    """

    kind: WireErrorKind
    detail: str
    size: int
    sample: bytes
    partial: bool = False

    def describe(self) -> str:
        return f"{self.kind}: {self.detail} ({self.size} bytes: {self.sample[:60]!r})"


Item = Message | WireError
#: What a framing hands over: one entry per message on the stream, in order (a bad one as its error).
Incoming = bytes | WireError


# --- the codec -------------------------------------------------------------------------------------------


def payload(message: Message) -> bytes:
    """One message as its payload (no framing). orjson escapes control characters: it holds no ``\\n``."""
    return orjson.dumps(message.frame)


def encode(message: Message) -> bytes:
    """One frame as a wire line. orjson escapes control characters, so the line has one ``\\n``."""
    return orjson.dumps(message.frame) + b"\n"


def encode_frame(frame: dict) -> bytes:
    """Write an arbitrary frame (faults use this to send frames no message type would build)."""
    return orjson.dumps(frame) + b"\n"


def parse_line(line: bytes) -> Item | None:
    """Parse one payload (a line without its ``\\n``). Blank ones give ``None`` (nothing to report)."""
    try:
        obj = bounded_parse.loads_json(line)
    except orjson.JSONDecodeError as exc:
        return _unparsable(line, exc)
    return _from_object(obj, line)


def parse_notification_or_line(line: bytes) -> dict[str, Any] | Item | None:
    """Like :func:`parse_line`, but a notification comes back as its bare frame (a dict), no message built.

    A frame with a string ``method`` and no ``id`` is exactly what :func:`classify` makes a
    :class:`Notification` of; the hot path of a reader handles those frames without the object.
    """
    try:
        obj = bounded_parse.loads_json(line)
    except orjson.JSONDecodeError as exc:
        return _unparsable(line, exc)
    if type(obj) is dict and "id" not in obj and type(obj.get("method")) is str:
        return obj
    return _from_object(obj, line)


def parse_items(payloads: Sequence[Incoming]) -> list[Item]:
    """What a framing handed over, as messages and errors (blank payloads dropped)."""
    out: list[Item] = []
    for one in payloads:
        item = one if type(one) is WireError else parse_line(one)  # type: ignore[arg-type]
        if item is not None:
            out.append(item)
    return out


def parse_payloads(payloads: Sequence[Incoming]) -> list[dict[str, Any] | Item]:
    """As :func:`parse_items`, but notifications come back as bare frames (:func:`parse_notification_or_line`).

    The reader's hot loop: the parse is inlined (one call less per payload) and a framing's error passes
    through the ``except`` (orjson refuses a non-bytes argument with the same error), so a read of valid
    frames costs one ``bounded_parse.loads_json`` and one type check each.
    """
    out: list[dict[str, Any] | Item] = []
    append = out.append
    loads = bounded_parse.loads_json
    for line in payloads:
        if not line:
            continue
        try:
            obj = loads(line)
        except orjson.JSONDecodeError as exc:
            if type(line) is WireError:
                append(line)
            elif (error := _unparsable(line, exc)) is not None:  # type: ignore[arg-type]
                append(error)
            continue
        if type(obj) is dict and "id" not in obj and type(obj.get("method")) is str:
            append(obj)
        else:
            append(_from_object(obj, line))  # type: ignore[arg-type]
    return out


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


# --- framings --------------------------------------------------------------------------------------------


class LineFraming:
    """Newline-delimited payloads: reassembles lines across reads, bounded by ``max_line``.

    :meth:`feed` returns one entry per line the bytes completed, in order: the line's bytes (an empty line
    too, so the n-th entry of a stream is its n-th line), or a :class:`WireError` for a line over the cap.
    With ``report_overflow``, a line still coming in past the cap is also reported at once, as a ``partial``
    error after the read's lines (a reader that fails on it need not wait for a newline that may never come).
    :meth:`feed_eof` reports a final line that never got its ``\\n`` (a writer that died mid-line must not be
    trusted).
    """

    name: Final = "line"

    def __init__(self, max_line: int = DEFAULT_MAX_LINE, *, report_overflow: bool = False) -> None:
        if max_line < 1:
            raise ValueError("max_line must be positive")
        self.max_line = max_line
        self.report_overflow = report_overflow
        self._buf = bytearray()
        self._discarding = False
        self._discarded = 0  # bytes of the oversized line seen so far
        self._discard_sample = b""
        self._overflow_reported = False

    @staticmethod
    def encode(messages: Sequence[bytes], torn: bytes = b"") -> bytes:
        """``messages`` as lines, then ``torn`` (the start of a line its writer never finished) as it is."""
        if not messages:
            return torn
        return b"\n".join(messages) + b"\n" + torn

    def check(self, messages: Sequence[bytes]) -> list[Incoming]:
        """``messages`` as a reader of their lines gets them: a line over the cap as its error."""
        cap = self.max_line
        return [_oversized_line(len(m), cap, bytes(m[:_SAMPLE])) if len(m) > cap else m for m in messages]

    @staticmethod
    def torn(line: bytes) -> WireError:
        """A line its writer began and never ended (what :meth:`feed_eof` reports)."""
        detail = "final line has no newline at end of stream"
        return WireError(WireErrorKind.TRUNCATED_AT_EOF, detail, len(line), bytes(line[:_SAMPLE]))

    def feed(self, data: bytes) -> list[Incoming]:
        out: list[Incoming] = []
        cap = self.max_line
        start = 0
        if self._discarding or self._buf:
            # the first line continues one from an earlier read
            nl = data.find(b"\n")
            if nl < 0:
                self._hold(data)
                return self._with_overflow(out)
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
                    out.append(bytes(self._buf))
            self._buf.clear()
            start = nl + 1
        # whole lines: one bulk split instead of a find per line
        lines: list[Any] = (data[start:] if start else data).split(b"\n")
        rest = lines.pop()  # after the last newline (b"" when the read ended on one)
        if len(data) - start > cap:  # only then can a whole line of this read be over the cap
            lines = [self._oversized_whole(line) if len(line) > cap else line for line in lines]
        if out:
            out += lines
        else:
            out = lines
        if rest:
            self._hold(rest)
        return self._with_overflow(out)

    def feed_eof(self) -> list[Incoming]:
        out: list[Incoming] = []
        if self._discarding:
            out.append(self._oversized(self._discarded))
        elif self._buf.strip():
            out.append(self.torn(bytes(self._buf)))
        self._buf.clear()
        return out

    @property
    def buffered(self) -> int:
        """Bytes held for an incomplete line (never more than ``max_line``)."""
        return len(self._buf)

    @property
    def overflowing(self) -> int:
        """Bytes so far of a line still coming in that is over the cap already (0: none)."""
        return self._discarded if self._discarding else 0

    def _with_overflow(self, out: list[Incoming]) -> list[Incoming]:
        if self.report_overflow and self._discarding and not self._overflow_reported:
            self._overflow_reported = True
            size = self._discarded
            detail = f"line of at least {size} bytes exceeds the cap of {self.max_line}"
            out.append(WireError(WireErrorKind.OVERSIZED_LINE, detail, size, b"", partial=True))
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

    def _oversized_whole(self, line: bytes) -> WireError:
        return _oversized_line(len(line), self.max_line, line[:_SAMPLE])

    def _oversized(self, size: int) -> WireError:
        self._discarding = False
        self._discarded = 0
        self._overflow_reported = False
        sample, self._discard_sample = self._discard_sample, b""
        return _oversized_line(size, self.max_line, sample)


def _oversized_line(size: int, cap: int, sample: bytes) -> WireError:
    return WireError(WireErrorKind.OVERSIZED_LINE, f"line of {size} bytes exceeds the cap of {cap}", size, sample)


class MessageFraming:
    """One payload per transport message: the transport delimits them, this bounds them (``max_message``)."""

    name: Final = "message"

    def __init__(self, max_message: int = DEFAULT_MAX_LINE) -> None:
        if max_message < 1:
            raise ValueError("max_message must be positive")
        self.max_line = max_message  # the same knob as a line framing's cap

    def check(self, messages: Sequence[bytes]) -> list[Incoming]:
        """``messages`` as received, a message over the cap replaced by its error (the list itself when none is)."""
        cap = self.max_line
        if not messages or max(map(len, messages)) <= cap:
            return messages if isinstance(messages, list) else list(messages)
        return [self.oversized(m) if len(m) > cap else m for m in messages]

    def oversized(self, message: bytes) -> WireError:
        return self.oversized_size(len(message), message)

    def oversized_size(self, size: int, sample: bytes) -> WireError:
        """A message of ``size`` bytes over the cap, of which ``sample`` is the start (a reader keeps no more)."""
        detail = f"message of {size} bytes exceeds the cap of {self.max_line}"
        return WireError(WireErrorKind.OVERSIZED_MESSAGE, detail, size, bytes(sample[:_SAMPLE]))

    @staticmethod
    def torn(message: bytes) -> WireError:
        """A message its writer began and the end of the stream cut off."""
        detail = "message cut off at end of stream"
        return WireError(WireErrorKind.TRUNCATED_AT_EOF, detail, len(message), bytes(message[:_SAMPLE]))


class LineDecoder:
    """A byte stream's messages: a :class:`LineFraming` and the codec.

    ``feed`` returns what the bytes completed; ``feed_eof`` reports a final line that never got
    its ``\\n`` (it is not used as a frame: a writer that died mid-line must not be trusted).
    """

    def __init__(self, max_line: int = DEFAULT_MAX_LINE) -> None:
        self.framing = LineFraming(max_line)

    @property
    def max_line(self) -> int:
        return self.framing.max_line

    def feed(self, data: bytes) -> list[Item]:
        return parse_items(self.framing.feed(data))

    def feed_fast(self, data: bytes) -> list[dict[str, Any] | Item]:
        """As :meth:`feed`, but notifications come back as bare frames (see :func:`parse_notification_or_line`)."""
        return parse_payloads(self.framing.feed(data))

    def feed_eof(self) -> list[Item]:
        return parse_items(self.framing.feed_eof())

    @property
    def buffered(self) -> int:
        """Bytes held for an incomplete line (never more than ``max_line``)."""
        return self.framing.buffered


__all__ = [
    "DEFAULT_MAX_LINE",
    "OVERSIZED_KINDS",
    "Incoming",
    "Item",
    "LineDecoder",
    "LineFraming",
    "MessageFraming",
    "WireError",
    "WireErrorKind",
    "encode",
    "encode_frame",
    "parse_items",
    "parse_line",
    "parse_notification_or_line",
    "parse_payloads",
    "payload",
]
