"""Text from outside, made safe to show: one escaper for everything that reaches a terminal (or a report a
CI parser or a person reads), one clip for long strings.

A frame, a method name, an id, a client's output, a server's stderr, a scenario string: any of them can
hold characters a terminal obeys. ``ESC [`` moves the cursor or rewrites a line, ``ESC ] 52`` writes the
clipboard, ``ESC ] 0`` the window title, BEL rings, NUL and the C1 controls (U+0080–U+009F; ``\\x9b`` is
a one-byte CSI) act like their ESC forms on many terminals, and the bidi controls (U+202A–U+202E,
U+2066–U+2069, with U+200E/U+200F/U+061C) reorder what is shown, so a FAIL can read as a PASS. Each of
them is shown as an escape instead: ``\\n``, ``\\r``, ``\\t``, ``\\x1b`` below U+0080, ``\\u202e`` (and
``\\u0085``) from there on, so a JSON document that passes through (orjson never writes a raw C0 control
but writes C1 and bidi characters as they are) stays JSON with the same meaning. Also escaped: U+2028 and
U+2029 (line breaks to some terminals and editors), lone surrogates (they cannot be encoded) and U+FFFE,
U+FFFF (with the C0 controls, what XML 1.0 forbids, even as ``&#27;``). A backslash is left as it is: it
cannot act on a terminal, and escaping it would double every backslash of a JSON document or a path.

:func:`escape` is the one escaper; :class:`TerminalStream` applies it to everything the command-line
entry points print (``codex-harness``: stdout and stderr; ``fake-codex``: stderr, its stdout is the
wire), so no print site can forget it. Where a value is put inside one line of our own (a timeline row,
a table cell), :func:`one_line` also folds its line breaks and clips it, so it cannot forge a line.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Final, TextIO

#: Every character :func:`escape` rewrites, line breaks and tabs excepted (kept by ``keep_newlines``).
_CONTROLS: Final = (
    "\x00-\x08\x0b-\x1f\x7f-\x9f"  # C0 (tab and line feed apart), DEL, C1
    "\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069"  # bidi controls and marks
    "\u2028\u2029"  # line and paragraph separators
    "\ud800-\udfff\ufffe\uffff"  # lone surrogates, the noncharacters XML forbids
)
_UNSAFE_KEEP_LINES: Final = re.compile(f"[{_CONTROLS}]")
_UNSAFE: Final = re.compile(f"[\t\n{_CONTROLS}]")

#: The default width of :func:`one_line`: a value longer than this is cut, with ``…`` and the count.
LINE_WIDTH: Final = 200


_SHORT: Final = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escaped(match: re.Match[str]) -> str:
    char = match.group()
    if char in _SHORT:
        return _SHORT[char]
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x80 else f"\\u{code:04x}"


def escape(text: str, *, keep_newlines: bool = False) -> str:
    """``text`` with every control, bidi and line-separator character shown as ``\\xNN`` / ``\\uNNNN``.

    ``keep_newlines``: line feeds and tabs stay (a block of our own lines); without it they are escaped
    too (a value inside a line). Idempotent: what it returns holds nothing it would escape."""
    pattern = _UNSAFE_KEEP_LINES if keep_newlines else _UNSAFE
    if pattern.search(text) is None:  # the usual case: nothing to do, no copy
        return text
    return pattern.sub(_escaped, text)


def clip(text: str, width: int) -> str:
    """``text`` cut to ``width`` characters and the length it had (``abc… (10,485,760 chars)``)."""
    if len(text) <= width:
        return text
    return f"{text[: max(width - 1, 0)]}… ({len(text):,} chars)"


def one_line(value: Any, width: int = LINE_WIDTH) -> str:
    """``value`` as one line to put inside a line of ours: runs of whitespace (line breaks, tabs, U+2028)
    folded to one space, clipped to ``width`` (with its length when cut), then escaped."""
    text = value if isinstance(value, str) else str(value)
    if len(text) <= 4 * width:
        return escape(clip(" ".join(text.split()), width))
    # Fold only what can be shown: a 10 MB value costs a slice, not a split of all of it.
    head = " ".join(text[: 4 * width].split())
    return escape(f"{head[: max(width - 1, 0)]}… ({len(text):,} chars)")


class TerminalStream:
    """A text stream whose every write goes through :func:`escape` (line feeds and tabs kept); the rest
    (``flush``, ``fileno``, ``isatty``, ``encoding``, ``buffer``) is the wrapped stream's."""

    def __init__(self, inner: TextIO) -> None:
        self._inner = inner

    @property
    def inner(self) -> TextIO:
        """The wrapped stream, for a caller that writes its own control sequences around escaped text."""
        return self._inner

    def write(self, text: str) -> int:
        self._inner.write(escape(text, keep_newlines=True))
        return len(text)

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


@contextmanager
def escaped_output(stdout: bool = True, stderr: bool = True) -> Iterator[None]:
    """While the block runs, ``sys.stdout`` / ``sys.stderr`` escape what is written to them (restored after,
    whatever the block raises)."""
    saved = sys.stdout, sys.stderr
    if stdout and not isinstance(sys.stdout, TerminalStream):
        sys.stdout = TerminalStream(sys.stdout)
    if stderr and not isinstance(sys.stderr, TerminalStream):
        sys.stderr = TerminalStream(sys.stderr)
    try:
        yield
    finally:
        sys.stdout, sys.stderr = saved
