"""Rollout-trace bundles: writer, strict bounded reader (replay), closure checker.

Format and semantics: ``docs/trace.md`` (envelope schema 3); the formats of the releases: their folders'
``trace`` (:mod:`contracts.releases`).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from contracts.trace.closure import Problem, TraceVerdict, check_bundle, check_trace
    from contracts.trace.errors import (
        TraceInvalid,
        TraceLimitExceeded,
        TraceUnreadable,
        WindowAlreadyEnded,
        WriterClosed,
    )
    from contracts.trace.reader import ReadLimits, ReplayedTrace, Window, read_bundle
    from contracts.trace.writer import (
        InferenceWindow,
        Payload,
        TerminalOperationWindow,
        ThreadWindow,
        ToolCallWindow,
        TraceWriter,
        TurnWindow,
    )

# Each name is imported from its module on first use (PEP 562): a process that needs only the bundle format
# (``contracts.trace.format``, read by every release's description) does not pay for the reader, the closure
# checker and the writer at start (fake-codex starts within a client's handshake timeout: bench/fake_start.py).
_HOME: dict[str, str] = {
    **dict.fromkeys(("Problem", "TraceVerdict", "check_bundle", "check_trace"), "closure"),
    **dict.fromkeys(
        ("TraceInvalid", "TraceLimitExceeded", "TraceUnreadable", "WindowAlreadyEnded", "WriterClosed"), "errors"
    ),
    **dict.fromkeys(("ReadLimits", "ReplayedTrace", "Window", "read_bundle"), "reader"),
    **dict.fromkeys(
        (
            "InferenceWindow",
            "Payload",
            "TerminalOperationWindow",
            "ThreadWindow",
            "ToolCallWindow",
            "TraceWriter",
            "TurnWindow",
        ),
        "writer",
    ),
}


def __getattr__(name: str) -> Any:
    module = _HOME.get(name)
    if module is None:
        raise AttributeError(f"module 'contracts.trace' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"contracts.trace.{module}"), name)
    globals()[name] = value
    return value


__all__ = [
    "InferenceWindow",
    "Payload",
    "Problem",
    "ReadLimits",
    "ReplayedTrace",
    "TerminalOperationWindow",
    "ThreadWindow",
    "ToolCallWindow",
    "TraceInvalid",
    "TraceLimitExceeded",
    "TraceUnreadable",
    "TraceVerdict",
    "TraceWriter",
    "TurnWindow",
    "Window",
    "WindowAlreadyEnded",
    "WriterClosed",
    "check_bundle",
    "check_trace",
    "read_bundle",
]
