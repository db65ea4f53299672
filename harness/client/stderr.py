"""A bounded, redacted tail of the server's stderr (pure: bytes in, text out)."""

from __future__ import annotations

import re
from typing import Final

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

    def feed(self, data: bytes) -> None:
        self.total += len(data)
        self._buf += data
        keep = self.limit + _MARGIN
        if len(self._buf) > keep:
            del self._buf[: len(self._buf) - keep]

    @property
    def truncated(self) -> bool:
        return self.total > self.limit

    def text(self) -> str:
        """The redacted tail, at most ``limit`` bytes of the original's end (redaction may shorten it)."""
        if self.limit == 0:
            return ""
        redacted = redact(self._buf.decode("utf-8", errors="replace"))
        encoded = redacted.encode("utf-8")
        if len(encoded) <= self.limit:
            return redacted
        return encoded[-self.limit :].decode("utf-8", errors="ignore")
