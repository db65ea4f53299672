"""Rollout-trace bundles: writer, strict bounded reader (replay), closure checker.

Format and semantics: ``docs/trace.md`` (envelope schema 3); the formats of the releases: their folders'
``trace`` (:mod:`contracts.releases`).
"""

from contracts.trace.closure import Problem, TraceVerdict, check_bundle, check_trace
from contracts.trace.errors import TraceInvalid, TraceLimitExceeded, TraceUnreadable, WindowAlreadyEnded, WriterClosed
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
