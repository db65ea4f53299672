"""Typed errors of the client. JSON-RPC error answers are :class:`contracts.jsonrpc.RpcError`."""

from __future__ import annotations

from contracts.exitcodes import Finding, interrupt_in
from contracts.jsonrpc import RpcError
from contracts.transport import TransportClosed
from contracts.wire import WireError, WireErrorKind

__all__ = [
    "ClientError",
    "LineTooLong",
    "MessageTooLarge",
    "RequestTimeout",
    "RpcError",
    "ServerExited",
    "SessionClosed",
    "ThreadStartFailed",
    "TransportClosed",
    "TurnBusy",
    "is_interrupt",
    "single_exception",
]


class ClientError(Finding):
    """Base of the client's own errors."""


class MessageTooLarge(ClientError):
    """The server sent a message over the stream's cap: a frame was lost, the session is failed and the server
    killed. ``at_least``: the message was still coming in (its size is at least ``size``)."""

    what = "message"

    def __init__(self, size: int, cap: int, *, at_least: bool = False) -> None:
        qualifier = "at least " if at_least else ""
        super().__init__(
            f"server {self.what} of {qualifier}{size} bytes exceeds the cap of {cap} bytes: a frame was lost"
        )
        self.size = size
        self.cap = cap
        self.at_least = at_least


class LineTooLong(MessageTooLarge):
    """The server wrote a line longer than the cap (the newline framing's :class:`MessageTooLarge`)."""

    what = "line"


def too_large(error: WireError, cap: int) -> MessageTooLarge | None:
    """The typed error of a framing's report of a message over the cap (None: ``error`` is another kind)."""
    if error.kind is WireErrorKind.OVERSIZED_LINE:
        return LineTooLong(error.size, cap, at_least=error.partial)
    if error.kind is WireErrorKind.OVERSIZED_MESSAGE:
        return MessageTooLarge(error.size, cap, at_least=error.partial)
    return None


class ServerExited(ClientError):
    """The server's stdout ended (exit, crash, closed stdout) or the client killed it."""

    def __init__(self, message: str, *, exit_code: int | None = None, stderr_tail: str = "") -> None:
        super().__init__(message)
        self.exit_code = exit_code
        self.stderr_tail = stderr_tail


class RequestTimeout(ClientError):
    """A request got no answer within its timeout."""

    def __init__(self, method: str, timeout: float) -> None:
        super().__init__(f"app-server handshake timeout: `{method}` did not respond after {timeout:g}s")
        self.method = method
        self.timeout = timeout


class SessionClosed(ClientError):
    """The session is closed, failed or killed: nothing more can be sent."""


class ThreadStartFailed(ClientError):
    """thread/start or thread/resume answered without a thread id."""


class TurnBusy(ClientError):
    """A turn was started while another one of the same session is still running."""


def single_exception(group: BaseExceptionGroup) -> BaseException:
    """What a context manager built on a nursery re-raises for its body: the one exception the nursery
    wrapped (its background tasks never raise), else the group unchanged.

    Only for that: a caller's ``except ClientError`` around the block keeps working. Several exceptions are
    never collapsed to one: the group goes on, and who handles a kind of exception wherever it is in a
    group (the CLI's interrupt, harness.cli) does so with ``except*``.
    """
    if len(group.exceptions) == 1:
        inner = group.exceptions[0]
        return single_exception(inner) if isinstance(inner, BaseExceptionGroup) else inner
    return group


def is_interrupt(exc: BaseException | None) -> bool:
    """``exc`` stands for a ``KeyboardInterrupt`` (:func:`contracts.exitcodes.interrupt_in`: it is one, its group holds
    one, or one is its cause): Ctrl-C or SIGTERM (codex_sandbox.interrupts) ends the run, so a block leaving with it
    kills its server at once instead of waiting out a graceful end."""
    return exc is not None and interrupt_in(exc) is not None
