"""The seam between a client and its server, whatever carries it: a message stream, and a process handle when
there is a process.

- :class:`MessageStream`: one connection's messages, both ways. The framing belongs to the stream: a
  :class:`LineStream` is newline-delimited JSON over a byte pipe (stdio); a message transport carries one
  payload per transport message (a websocket text frame, an item of a memory channel) and has no newline at
  all. A read hands over a *list* of messages (all a read of a pipe completed), so a reader can take a burst
  in one step. Bounded: every stream has a cap per message and reports a message over it as a typed
  :class:`~contracts.wire.WireError` in its place.
- :class:`ProcessHandle`: the server's process (a child on stdio, the in-process fake's simulated process):
  its exit, its kill, its stderr. A socket transport to a server someone else started has none.
- :class:`Transport`: what a target yields and a session runs on: ``stream`` and ``process`` (or None).

The client's session (``codex_client.session``) and the fake's runtime (``fake_server.runtime``) see only
these, so a new transport is a new stream (and, when it starts a server, a handle).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import NamedTuple, Protocol, runtime_checkable

from contracts.exitcodes import Finding
from contracts.wire import DEFAULT_MAX_LINE, Incoming, LineFraming


class TransportClosed(Finding):
    """The peer's input is closed or the peer is gone: nothing more can be sent."""


class StreamWords(NamedTuple):
    """How a record names the ends of a stream (the notes a session writes, its teardown steps)."""

    closed: str  # we sent our end of stream ("stdin closed")
    eof: str  # the peer's end of stream reached us ("stdout EOF")
    close_step: str  # the teardown step that sends our end
    eof_step: str  # the teardown step that waits for the peer's


class Kind(NamedTuple):
    """One transport a session can run on: its name (``run --transport``), whether it is bytes on a wire a process
    serves (``fake-codex --listen``, the real binary) and whether it is a socket, where a thread outlives the
    connection that started it (docs/transports.md)."""

    name: str
    wire: bool
    socket: bool
    about: str


#: Every transport, one row each: a new transport is a row here and a stream (and, when it starts a server, a
#: handle).
KINDS: tuple[Kind, ...] = (
    Kind("stdio", wire=True, socket=False, about="newline-delimited JSON on the server's stdin and stdout"),
    Kind("messages", wire=False, socket=False, about="in process only: one payload per message, no newline"),
    Kind("ws", wire=True, socket=True, about="a websocket, one text frame per message (ws://IP:PORT)"),
    Kind("unix", wire=True, socket=True, about="a websocket over a unix socket (unix://PATH)"),
)
#: Every transport the in-process fake serves.
ALL: tuple[str, ...] = tuple(k.name for k in KINDS)
#: What a process serves: fake-codex and the real binary.
WIRE: tuple[str, ...] = tuple(k.name for k in KINDS if k.wire)
#: Where a thread outlives the connection that started it.
SOCKETS: tuple[str, ...] = tuple(k.name for k in KINDS if k.socket)

STDIO_WORDS = StreamWords("stdin closed", "stdout EOF", "close_stdin", "wait_stdout_eof")
CONNECTION_WORDS = StreamWords("connection closed", "connection EOF", "close_connection", "wait_connection_eof")
#: Every note that says a client closed its session's output (contracts.checks.protocol reads them).
CLOSED_NOTES = frozenset({STDIO_WORDS.closed, CONNECTION_WORDS.closed})


@runtime_checkable
class MessageStream(Protocol):
    """One end of a connection, as messages (the framing is the stream's own)."""

    words: StreamWords
    #: The cap per received message, in bytes; a reader sets it before its first receive.
    max_message: int

    async def send(self, messages: Sequence[bytes], torn: bytes = b"") -> None:
        """Write ``messages`` (payloads: one JSON object each, or any bytes a fault sends) in one go, then
        ``torn``, the start of a message its writer never finished (a server that dies mid-write).

        Raises TransportClosed when the peer's input is closed or the stream aborted."""

    async def receive(self) -> list[Incoming]:
        """The next messages, in order (at least one); ``[]`` once the peer's output has ended.

        A message over the cap, or one cut off by the end of the stream, comes as its WireError in its place."""

    async def send_eof(self) -> None:
        """End our output (the peer reads its end of stream: stdin closed, a close frame). Idempotent."""

    def abort(self) -> None:
        """Drop the connection now, both ways: our receive ends, our send raises TransportClosed. Idempotent."""


@runtime_checkable
class ProcessHandle(Protocol):
    """The server's process. Its stream is separate: a process can outlive its connection, and back."""

    async def wait_exit(self) -> int:
        """Wait until the server has exited and return its status (negative: killed by that signal).

        Callers bound this with a cancel scope.
        """

    def kill(self) -> None:
        """Force-stop the server now: SIGKILL to the whole process group, or crash the in-process engine.

        Idempotent; never raises for a server that already exited.
        """

    @property
    def exit_code(self) -> int | None:
        """The exit status once known, else None."""

    def stderr_tail(self) -> str:
        """The bounded, redacted tail of the server's stderr."""

    @property
    def pid(self) -> int | None:
        """The process id, or None in process."""

    def group_alive(self) -> bool:
        """Whether any process of the server's group is still alive (a grandchild outliving the server counts);
        False for a server that is no process group (in process)."""

    def stop_after_close(self) -> None:
        """Ask a server that serves on after its connection closed (a listener) to stop. Nothing for a server
        whose input is its connection (stdio: closing stdin is the ask). Idempotent; never raises."""

    @property
    def stderr_bytes(self) -> int | None:
        """How many bytes the server wrote to stderr (None when not counted)."""

    @property
    def stderr_truncated(self) -> bool | None:
        """Whether :meth:`stderr_tail` lost some of them (None when not counted)."""


class NoProcess:
    """The :class:`ProcessHandle` members of a server that is no process (the engine in this process): no id,
    no group to outlive it, its input is its connection, its stderr not counted. A mixin for such handles."""

    @property
    def pid(self) -> int | None:
        return None

    def group_alive(self) -> bool:
        return False  # no process group: nothing outlives the server

    def stop_after_close(self) -> None:
        """Nothing to do: the server's input is its connection."""

    @property
    def stderr_bytes(self) -> int | None:
        return None  # not counted

    @property
    def stderr_truncated(self) -> bool | None:
        return None


@runtime_checkable
class Transport(Protocol):
    """What a session runs on."""

    @property
    def stream(self) -> MessageStream: ...

    @property
    def process(self) -> ProcessHandle | None:
        """None when the transport started no server (a socket to a server already running)."""


ByteSender = Callable[[bytes], Awaitable[None]]
ByteReceiver = Callable[[int], Awaitable[bytes]]


class LineStream:
    """A :class:`MessageStream` over a byte pipe, newline-delimited (the stdio framing, :class:`LineFraming`).

    ``send_bytes`` raises TransportClosed when it cannot write; ``receive_bytes(n)`` returns ``b""`` at the end
    of the peer's output; ``send_eof`` closes our output; ``abort`` drops both ways (None: nothing to drop).
    ``report_overflow``: report a line over the cap while it still streams in (a client that fails on it
    must not wait for its end: the writer may be blocked writing it)."""

    words = STDIO_WORDS

    def __init__(
        self,
        send_bytes: ByteSender,
        receive_bytes: ByteReceiver,
        send_eof: Callable[[], Awaitable[None]],
        *,
        abort: Callable[[], None] | None = None,
        max_line: int = DEFAULT_MAX_LINE,
        report_overflow: bool = False,
        read_chunk: int = 65536,
    ) -> None:
        self.framing = LineFraming(max_line, report_overflow=report_overflow)
        self._send = send_bytes
        self._receive = receive_bytes
        self._send_eof = send_eof
        self._abort = abort
        self._chunk = read_chunk
        self._ended = False

    @property
    def max_message(self) -> int:
        return self.framing.max_line

    @max_message.setter
    def max_message(self, value: int) -> None:
        if value < 1:
            raise ValueError("max_message must be positive")
        self.framing.max_line = value

    async def send(self, messages: Sequence[bytes], torn: bytes = b"") -> None:
        data = LineFraming.encode(messages, torn)
        if data:
            await self._send(data)

    async def receive(self) -> list[Incoming]:
        framing = self.framing
        while not self._ended:
            data = await self._receive(self._chunk)
            if not data:
                self._ended = True
                return framing.feed_eof()  # a torn last line, else [] (the end) at once
            out = framing.feed(data)
            if out:
                return out
        return []

    async def send_eof(self) -> None:
        await self._send_eof()

    def abort(self) -> None:
        self._ended = True
        if self._abort is not None:
            self._abort()
