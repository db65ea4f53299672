"""What the engine asks its deployment to do. The engine never does I/O or reads a clock itself."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, TypeAlias


@dataclass(frozen=True, slots=True)
class Send:
    """Send one frame (one message; the deployment's framing writes it: a JSON line on stdio)."""

    frame: dict[str, Any]


@dataclass(frozen=True, slots=True)
class SendBytes:
    """Send one message whose payload is these exact bytes (garbage, invalid UTF-8, an oversized line...).

    ``torn``: the start of a message the server was writing when it died (half a frame; on stdio, a line
    without its newline). Nothing follows it but the end of the stream."""

    data: bytes
    torn: bool = False


@dataclass(frozen=True, slots=True)
class Wake:
    """Call ``Engine.timer(token, now_ms)`` ``after_ms`` milliseconds from now."""

    token: int
    after_ms: int


@dataclass(frozen=True, slots=True)
class WriteStderr:
    text: str


@dataclass(frozen=True, slots=True)
class CloseStdout:
    """Close stdout while the process stays alive."""


@dataclass(frozen=True, slots=True)
class Exit:
    """The process ends now with ``code``. ``crash``: no graceful shutdown (the trace stays unclosed)."""

    code: int
    crash: bool = False


@dataclass(frozen=True, slots=True)
class SpawnGrandchild:
    """Start a process that inherits stdout and outlives the server by up to ``hold_ms``."""

    hold_ms: int


@dataclass(frozen=True, slots=True)
class TraceEvent:
    """A semantic event for the server's rollout trace bundle (see :mod:`fake_server.server_trace`)."""

    kind: str
    data: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class FaultStruck:
    """A scripted fault struck: turn ``turn`` (0-based), its ``index``-th fault (the scenario check
    ``fault_not_struck`` compares these with the scenario's faults), after the server had written ``sent``
    lines and read ``received`` (the report places the fault on the client's wire from these)."""

    turn: int
    index: int
    kind: str
    at: str
    n: int
    sent: int = 0
    received: int = 0


@dataclass(frozen=True, slots=True)
class PauseInput:
    """Read nothing for ``ms`` milliseconds (a slow reader: what the client writes backs up); writing goes on."""

    ms: int


@dataclass(frozen=True, slots=True)
class TransportFault:
    """A websocket fault (``ws_close``, ``ws_ping_silent``, ``ws_fragment``) for the deployment's connection to
    carry out; ``params`` as the fault table declares them."""

    kind: str
    params: dict[str, Any] = field(default_factory=dict)


Effect: TypeAlias = (
    Send
    | SendBytes
    | Wake
    | WriteStderr
    | CloseStdout
    | Exit
    | SpawnGrandchild
    | TraceEvent
    | FaultStruck
    | PauseInput
    | TransportFault
)
