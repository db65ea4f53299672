"""What turn programs and fault strikes may do to the connection: the engine's outbox.

Turn code and fault strikes get this small surface (the time, ids, notify / respond / request /
trace, the process faults, timers), never the :class:`~fake_server.engine.Engine` itself: the
engine owns the connection (threads, handshake, dispatch); the outbox owns what goes out and the
bookkeeping every part shares (JSON-RPC ids and pending tables, the fault points counted at
session level and the faults struck so far). Everything it does becomes an
:mod:`~fake_server.effects` effect that the engine hands to its deployment.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from contracts.jsonrpc import Endpoint, ProtocolViolation
from contracts.messages import NOTSET, SERVER_OVERLOADED, JsonId, Request
from contracts.scenario import Fault
from contracts.text import escape
from fake_server.effects import (
    CloseStdout,
    Effect,
    Exit,
    FaultStruck,
    PauseInput,
    Send,
    SendBytes,
    SpawnGrandchild,
    TraceEvent,
    TransportFault,
    Wake,
    WriteStderr,
)
from fake_server.ids import IdMaker

OVERLOADED_MESSAGE = "Server overloaded; retry later."


class Outbox:
    """The connection's output and shared bookkeeping (one per engine)."""

    def __init__(self, ids: IdMaker, session_faults: tuple[Fault, ...] = ()) -> None:
        self.ids = ids
        self.endpoint = Endpoint()
        self.now_ms = 0
        self.opt_out: frozenset[str] = frozenset()
        self.exited: int | None = None
        self.hung = False
        self.stdout_closed = False
        self.overload_left = 0  # requests an ``overload`` fault still refuses
        self.last_response_frame: dict[str, Any] | None = None
        #: Faults of session-level points (``initialize``): the first turn's, counted over the session.
        self.session_faults = session_faults
        self.session_counts: dict[str, int] = {}
        #: (turn index, fault index within the turn) of every fault struck, in order.
        self.struck: list[tuple[int, int]] = []
        #: Lines written and read so far: where on the wire a fault struck.
        self.lines_sent = 0
        self.lines_received = 0
        self._counters: dict[str, int] = {}
        self._out: list[Effect] = []
        self._timers: dict[int, Callable[[], None]] = {}
        self._next_token = 0
        #: What the release played leaves out of a frame (fake_server.profiles.Profile.reshape); None: nothing.
        self.reshape: Callable[[dict[str, Any]], dict[str, Any]] | None = None
        #: The notifications the release played can send (its pin's); None: any. The engine's own others are
        #: not sent (a release older than the notification); a scripted fault's are (``unchecked``).
        self.notifications: frozenset[str] | None = None

    # --- state --------------------------------------------------------------------------------

    @property
    def silent(self) -> bool:
        """Exited or hung: nothing more is read or written."""
        return self.exited is not None or self.hung

    def flush(self) -> list[Effect]:
        out, self._out = self._out, []
        return out

    def next_id(self, prefix: str) -> str:
        """``prefix`` + a per-connection counter (``msg-1``, ``call_2``...)."""
        self._counters[prefix] = self._counters.get(prefix, 0) + 1
        return f"{prefix}{self._counters[prefix]}"

    # --- frames -------------------------------------------------------------------------------

    def _can_send(self) -> bool:
        return self.exited is None and not self.hung and not self.stdout_closed

    def send_frame(self, frame: dict[str, Any]) -> None:
        """Send a prepared frame as is (a request prepared earlier, faults replaying frames)."""
        if self._can_send():
            self.lines_sent += 1
            self._out.append(Send(frame if self.reshape is None else self.reshape(frame)))

    def send_raw(self, data: bytes, *, torn: bool = False) -> None:
        """One message of exactly ``data`` (``torn``: the start of one, cut off by a crash)."""
        if self._can_send():
            self.lines_sent += 0 if torn else 1
            self._out.append(SendBytes(data, torn))

    def notify(self, method: str, params: dict[str, Any], *, unchecked: bool = False) -> dict[str, Any]:
        frame = {"method": method, "params": params, "emittedAtMs": self.now_ms}
        sendable = unchecked or self.notifications is None or method in self.notifications
        if method not in self.opt_out and sendable:
            self.send_frame(frame)
        return frame

    def respond(self, request_id: JsonId, result: Any) -> None:
        try:
            response = self.endpoint.respond(request_id, result)
        except ProtocolViolation:
            return  # already answered or abandoned: nothing to send
        self.last_response_frame = response.frame
        self.send_frame(response.frame)

    def respond_error(self, request_id: JsonId, code: int, message: str, data: Any = NOTSET) -> None:
        """An error answer (``data``: the error's data member; left out when NOTSET)."""
        try:
            response = self.endpoint.respond_error(request_id, code, message, data)
        except ProtocolViolation:
            return
        self.last_response_frame = response.frame
        self.send_frame(response.frame)

    def refuse_overloaded(self, request_id: JsonId) -> bool:
        """While an ``overload`` fault lasts, a request is refused ``-32001`` (True: this one was)."""
        if self.overload_left <= 0:
            return False
        self.overload_left -= 1
        self.respond_error(request_id, SERVER_OVERLOADED, OVERLOADED_MESSAGE)
        return True

    def request(self, method: str, params: dict[str, Any], *, send: bool = True) -> Request:
        """A server request with the next id; ``send=False`` only reserves it (sent later with ``send_frame``)."""
        request = self.endpoint.request(method, params)
        if send:
            self.send_frame(request.frame)
        return request

    def abandon_request(self, request_id: JsonId) -> None:
        if request_id in self.endpoint.outgoing:
            self.endpoint.abandon(request_id)

    # --- side channels --------------------------------------------------------------------------

    def trace(self, kind: str, **data: Any) -> None:
        self._out.append(TraceEvent(kind, {"at_ms": self.now_ms, **data}))

    def stderr(self, text: str) -> None:
        """One log line, stamped like the real server's."""
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(self.now_ms / 1000))
        # A line can quote what a client sent (a method, an id): escaped, it cannot act on a terminal.
        line = escape(text.rstrip(), keep_newlines=True)
        self._out.append(WriteStderr(f"{stamp}.{self.now_ms % 1000:03d}Z {line}\n"))

    def stderr_raw(self, text: str) -> None:
        if self.exited is None:
            self._out.append(WriteStderr(text))

    def fault_struck(self, turn: int, index: int, fault: Fault) -> None:
        self.struck.append((turn, index))
        self._out.append(
            FaultStruck(turn, index, fault.kind, fault.at, fault.n, self.lines_sent, self.lines_received)
        )

    # --- the process --------------------------------------------------------------------------

    def shutdown(self, code: int) -> None:
        self.trace("shutdown")
        self.exited = code
        self._out.append(Exit(code))

    def crash(self, code: int, partial: bytes = b"") -> None:
        if partial:
            self.send_raw(partial, torn=True)
        self.exited = code
        self._out.append(Exit(code, crash=True))

    def hang(self) -> None:
        self.hung = True

    def close_stdout(self) -> None:
        if not self.stdout_closed and self.exited is None:
            self._out.append(CloseStdout())
            self.stdout_closed = True

    def spawn_grandchild(self, hold_ms: int) -> None:
        self._out.append(SpawnGrandchild(hold_ms))

    def pause_input(self, ms: int) -> None:
        self._out.append(PauseInput(ms))

    def transport_fault(self, kind: str, params: dict[str, Any]) -> None:
        if self.exited is None:
            self._out.append(TransportFault(kind, dict(params)))

    # --- timers -------------------------------------------------------------------------------

    def after(self, ms: int, callback: Callable[[], None]) -> int:
        """Call ``callback`` ``ms`` from now (a Wake effect); returns the token to cancel it."""
        self._next_token += 1
        token = self._next_token
        self._timers[token] = callback
        self._out.append(Wake(token, max(0, ms)))
        return token

    def cancel_timer(self, token: int | None) -> None:
        if token is not None:
            self._timers.pop(token, None)

    def pop_timer(self, token: int) -> Callable[[], None] | None:
        return self._timers.pop(token, None)
