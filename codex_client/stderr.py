"""A bounded, redacted tail of the server's stderr (pure: bytes in, text out)."""

from __future__ import annotations

import re
from typing import Final

from contracts.text import escape, one_line

DEFAULT_TAIL_BYTES: Final = 2048
# Extra bytes kept before the tail so a secret cut by the tail boundary is still recognised.
_MARGIN: Final = 512
REDACTED: Final = "[REDACTED]"

_PATTERNS: Final = (
    re.compile(r"(?i)\b(bearer)\s+[A-Za-z0-9._~+/=-]+"),
    re.compile(r"(?i)(authorization\s*[:=]\s*)(?!bearer\b)[^\s,;]+"),
    re.compile(r"\bsk-[A-Za-z0-9_-]{6,}"),
    re.compile(
        r"(?i)\b([A-Z0-9_]*(?:api[_-]?key|token|secret|password|passwd|credential)[A-Z0-9_]*)"
        r"(\"?\s*[:=]\s*\"?)([^\s\"',;]+)"
    ),
)


# Colour codes (SGR: ``ESC[2m``, ``ESC[0m``, ``ESC[38;5;1m``). codex colours its tracing output even into a
# pipe; a tail shown in a terminal, a report or a file reads plain. Only colours go: any other sequence
# (a cursor move, OSC 52 writing the clipboard, OSC 0 the window title) is kept, and shown escaped
# wherever the tail is shown (contracts.text), so a server that sends one is seen doing it.
_SGR: Final = re.compile(r"\x1b\[[0-9;:]*m")
#: A line of a tail shown on the terminal is cut here (the whole tail is in the record).
TAIL_LINE_WIDTH: Final = 400


def strip_ansi(text: str) -> str:
    """``text`` without colour codes (SGR sequences); every other escape sequence stays."""
    return _SGR.sub("", text) if "\x1b" in text else text


def terminal_lines(tail: str, count: int) -> list[str]:
    """The last ``count`` lines of a stderr tail as lines to print: colours stripped, each line clipped
    and escaped (contracts.text), so a line of the tail is one line on the terminal."""
    return [one_line(line, TAIL_LINE_WIDTH) for line in strip_ansi(tail).strip().splitlines()[-count:]]


def redact(text: str) -> str:
    """Mask bearer tokens, ``sk-...`` keys and ``*api_key*=`` / ``*token*:`` style assignments."""
    text = _PATTERNS[0].sub(lambda m: f"{m.group(1)} {REDACTED}", text)
    text = _PATTERNS[1].sub(lambda m: f"{m.group(1)}{REDACTED}", text)
    text = _PATTERNS[2].sub(REDACTED, text)
    return _PATTERNS[3].sub(lambda m: f"{m.group(1)}{m.group(2)}{REDACTED}", text)


class StderrTail:
    """Keeps the last ``limit`` bytes (plus a margin for redaction) and counts everything seen."""

    def __init__(self, limit: int = DEFAULT_TAIL_BYTES) -> None:
        if limit < 0:
            raise ValueError("limit must not be negative")
        self.limit = limit
        self.total = 0
        self._buf = bytearray()

    def feed(self, data: bytes | bytearray) -> None:
        self.total += len(data)
        self._buf += data
        keep = self.limit + _MARGIN
        if len(self._buf) > keep:
            del self._buf[: len(self._buf) - keep]

    @property
    def truncated(self) -> bool:
        return self.total > self.limit

    def text(self) -> str:
        """The redacted tail, at most ``limit`` bytes of the original's end (redaction may shorten it),
        escaped (contracts.text): the record's ``stderr.txt`` is safe to ``cat`` and every place that shows
        the tail shows the same text."""
        if self.limit == 0:
            return ""
        # Colours go first: ``token\x1b[2m=\x1b[0m"…"`` must still read as an assignment to redact.
        redacted = redact(strip_ansi(self._buf.decode("utf-8", errors="replace")))
        encoded = redacted.encode("utf-8")
        if len(encoded) > self.limit:
            redacted = encoded[-self.limit :].decode("utf-8", errors="ignore")
        return escape(redacted, keep_newlines=True)
