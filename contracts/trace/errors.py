"""Typed errors of the trace-bundle reader and writer."""

from __future__ import annotations

from contracts.exitcodes import InternalError, InvalidInput


class TraceInvalid(InvalidInput):
    """The bundle is rejected by replay (the reducer's verdict), or breaks a reading bound.

    ``message`` stays close to the wording of ``codex debug trace-reduce`` (of the default release).
    """

    def __init__(self, message: str, *, line: int | None = None, seq: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.line = line
        self.seq = seq


class TraceLimitExceeded(TraceInvalid):
    """A reading bound was hit (line length, decompressed bytes, file size): refused, not exhausted."""


class TraceUnreadable(InvalidInput):
    """The bundle path itself cannot be read (not a directory, permission): a usage problem, not a verdict."""


class WindowAlreadyEnded(InternalError, RuntimeError):
    """A window handle was ended (or leaked) a second time: a window ends exactly once."""


class WriterClosed(InternalError, RuntimeError):
    """The writer was completed or abandoned and accepts no more events."""
